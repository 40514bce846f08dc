"""Fuzz target: the weight file's layout checks (``weight_file.parse_weight_file``: every check
``load_weights`` makes, the vocabulary datasets of a code-point model included), on HDF5 files
built from a fuzzed structure, not on HDF5's own C code: the bytes pick a model and a list of
changes to a valid file's datasets, and h5py writes the file they describe.

The input: its first byte picks the model (the tiny bilm-tf fixture, or the tiny
ELMoForManyLangs model converted); then each change is 4 bytes: what (``CHANGES``), which
dataset (of the valid file's, in order), and two arguments.

The contract: the arrays of every dataset the model needs, each in its expected shape as
float32 (a character or word table also with its id-0 row), and a code-point model's
vocabulary; or a ``WeightFileError`` of one line naming the file; never another exception. A
dataset that is an external link, or whose data is stored outside the file, is never read: a
file with one among the datasets read is refused.
"""

import atexit
import io
import os
import pathlib
import shutil
import tempfile

import h5py
import numpy as np

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import WeightFileError
from elmo_tf.formats.weight_file import _ZERO_ROW_DATASETS, expected_datasets, parse_weight_file

ROOT = pathlib.Path(__file__).resolve().parents[1]
_DIRECTORY = tempfile.mkdtemp(prefix="fuzz-weights-")
atexit.register(shutil.rmtree, _DIRECTORY, ignore_errors=True)
_OUTSIDE = os.path.join(_DIRECTORY, "outside.bin")  # external storage and links point here
with open(_OUTSIDE, "wb") as _f:  # data a read of external storage would succeed on
    _f.write(bytes(1 << 20))
DTYPES = [np.float64, np.float16, np.int32, np.int8, np.uint8, np.bool_, np.complex64, "S4"]
CHANGES = ("drop", "reshape", "dtype", "nonfinite", "group", "extra", "external link",
           "external storage", "soft link", "scalar", "compressed", "bytes")  # fmt: skip


def _models():
    """``[(config, {dataset: array})]``: the valid files the changes start from."""
    from elmo_tf.foreign import efml_folder
    from elmo_tf.kinds import efml_conversion

    tiny = ROOT / "tests" / "fixtures" / "tiny"
    arrays = {}
    with h5py.File(tiny / "weights.hdf5", "r") as f:  # the project's own fixture
        f.visititems(lambda n, o: arrays.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset)
                     else None)  # fmt: skip
    efml = efml_conversion.convert(efml_folder.read_folder(ROOT / "tests/fixtures/efml/tiny"))
    return [(ElmoConfig.from_file(tiny / "options.json"), arrays), efml]


MODELS = _models()


def _describe(data):
    """``(model index, [(change, dataset index, a, b)])`` of the input's bytes."""
    changes = [tuple(data[i : i + 4]) for i in range(1, len(data) - 3, 4)][:16]
    return data[0] % len(MODELS), changes


def _build(arrays, changes):
    """The file's bytes, and whether a dataset the model reads was put outside the file."""
    names = list(arrays)
    outside = set()
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        arrays = dict(arrays)
        special = {}
        for what, which, a, b in changes:
            name = names[which % len(names)]
            kind = CHANGES[what % len(CHANGES)]
            value = arrays.get(name)
            if kind == "drop":
                arrays.pop(name, None)
            elif value is None:
                continue
            elif kind == "reshape" and value.ndim:
                axis = a % value.ndim
                shape = list(value.shape)
                shape[axis] = max(0, shape[axis] + (b % 5) - 2)
                arrays[name] = np.resize(value, shape)
            elif kind == "dtype":
                arrays[name] = value.astype(DTYPES[a % len(DTYPES)])
            elif kind == "nonfinite" and value.size and value.dtype.kind == "f":
                value = value.copy()
                value.flat[a % value.size] = (np.nan, np.inf, -np.inf)[b % 3]
                arrays[name] = value
            elif kind == "scalar":
                arrays[name] = np.asarray(value.flat[0] if value.size else 0)
            elif kind == "bytes":
                arrays[name] = np.frombuffer(bytes([a, b]) * (1 + a % 7), np.uint8)
            else:
                special[name] = (kind, a, b)
        for name, value in arrays.items():
            kind, a, b = special.get(name, (None, 0, 0))
            if kind == "group":
                f.create_group(name)
            elif kind == "external link":
                f[name] = h5py.ExternalLink(_OUTSIDE, "/data")
                outside.add(name)
            elif kind == "external storage" and value.size and value.dtype.kind != "S":
                f.create_dataset(name, shape=value.shape, dtype=value.dtype,
                                 external=[(_OUTSIDE, 0, 1 << 20)])  # fmt: skip
                outside.add(name)
            elif kind == "soft link":
                f[name] = h5py.SoftLink("/" + names[a % len(names)])
            elif kind == "compressed" and value.ndim:
                f.create_dataset(name, data=value, compression="gzip", chunks=True)
            else:
                f.create_dataset(name, data=value)
        for what, _which, a, b in changes:
            if CHANGES[what % len(CHANGES)] == "extra":
                extra = f"extra_{a}/{'x' * (b % 3)}d{b}"
                if extra not in f:
                    f.create_dataset(extra, data=np.zeros([a % 4], np.float32))
    return buffer.getvalue(), outside


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    if not data:
        return
    index, changes = _describe(data)
    config, arrays = MODELS[index]
    file_bytes, outside = _build(arrays, changes)
    try:
        read, vocabulary = parse_weight_file(config, file_bytes, "model.hdf5")
    except WeightFileError as e:
        message = str(e)
        assert message.startswith("model.hdf5: ") and "\n" not in message, repr(message)
        return
    expected = expected_datasets(config)
    assert not outside & set(expected), f"read {sorted(outside & set(expected))} from outside"
    assert set(read) == set(expected), sorted(set(read) ^ set(expected))
    for name, shape in expected.items():
        shapes = [shape]  # a table may come with its id-0 row already (one row more)
        if name in _ZERO_ROW_DATASETS:
            shapes.append((shape[0] + 1, *shape[1:]))
        assert read[name].shape in shapes and read[name].dtype == np.float32, name
    assert (vocabulary is not None) == config.uses_codepoints


def seed_corpus():
    """Each model's valid file, and one change of each kind to its first datasets."""
    seeds = [bytes([i]) for i in range(len(MODELS))]
    for i in range(len(MODELS)):
        for what in range(len(CHANGES)):
            seeds.append(bytes([i, what, what, 1, 3]))
    return seeds
