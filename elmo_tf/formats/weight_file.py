"""Reading and writing the official ELMo weight file (bilm-tf's HDF5 layout).

Every dataset maps to exactly one model variable through :func:`weight_table`;
:func:`expected_datasets` is the only place that knows the datasets' names and shapes (it needs
only the options, so a file is checked before any model exists), and each entry of the table
states its transform:

======================================================  ==================================
dataset                                                 variable (transform)
======================================================  ==================================
``char_embed`` (261, E)                                 char embeddings (262, E): a zero
                                                        row for id 0 is prepended
``CNN/W_cnn_{i}`` (1, w, E, n), ``CNN/b_cnn_{i}``       CNN kernel ``W[0]``, bias
``CNN_high_{k}/{W,b}_{carry,transform}``                highway (``y = x @ W``, as stored)
``CNN_proj/W_proj``, ``b_proj``                         token projection
``RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0``       LSTM kernel over ``[x; h]``, gate
                                                        columns i, j, f, o
``.../B``                                               LSTM bias (forget bias +1 is added
                                                        at run time, never stored)
``.../W_P_0``                                           LSTM output projection
======================================================  ==================================

``d`` is 0 for the forward and 1 for the backward direction.

A model converted from ELMoForManyLangs (``config.character_scheme == "codepoints"``; docs/
models.md, "The format extension") has its own character table, so ``char_embed`` has
``n_characters - 1`` rows, and, with a word embedding of width W, ``word_embed``
``(n_words - 1, W)`` (a zero row for id 0 prepended, as for ``char_embed``) and
``CNN_proj/W_proj`` ``(W + F, P)``, the word rows first. Its token mapping's tables are
datasets too, read with the same checks (bounded by the options before anything is read) and
given to the model's ``token_mapper``, never to a variable: ``vocabulary/char_codepoints``
``(n_characters,)`` int32, ``vocabulary/words`` uint8 and ``vocabulary/word_offsets``
``(n_words + 1,)`` int64 (``elmo_tf.tokens.codepoints.CodepointVocabulary``).
"""

import dataclasses
import math
import os
import typing

import h5py
import numpy as np

from elmo_tf import checks
from elmo_tf.errors import WeightFileError
from elmo_tf.system import files, untrusted_files
from elmo_tf.tokens import codepoints, token_mappers


@dataclasses.dataclass(frozen=True)
class WeightEntry:
    dataset: str
    variable: typing.Any
    file_shape: tuple
    from_file: typing.Callable  # file array -> variable value
    to_file: typing.Callable  # variable value -> file array


def _same(x):
    return x


def weight_table(model):  # pragma: no mutate block, needs a model: tests/model/test_weight_file.py
    """Returns the ``WeightEntry`` list that maps every dataset to one variable of ``model``."""
    encoder = model.character_encoder
    shapes = expected_datasets(model.config)  # the file's names and shapes: one place
    table = []

    def add(dataset, variable, from_file=_same, to_file=_same):
        table.append(WeightEntry(dataset, variable, shapes[dataset], from_file, to_file))

    # The file has no row for id 0 (a padded token position); its row is zeros.
    add("char_embed", encoder.char_embedding.embeddings, _with_zero_row, _without_zero_row)
    if encoder.word_embedding is not None:  # the same for word id 0
        add("word_embed", encoder.word_embedding.embeddings, _with_zero_row, _without_zero_row)
    for i, (kernel, bias) in enumerate(zip(encoder.cnn.kernels, encoder.cnn.biases)):
        # Written by a Conv2D over (1, chars): the kernel has a leading height axis of 1.
        add(f"CNN/W_cnn_{i}", kernel, from_file=lambda w: w[0], to_file=lambda v: v[None])
        add(f"CNN/b_cnn_{i}", bias)
    for k, highway in enumerate(encoder.highways):
        # bilm-tf's "carry" gate multiplies the transformed input (see Highway's docstring).
        add(f"CNN_high_{k}/W_carry", highway.carry_kernel)
        add(f"CNN_high_{k}/b_carry", highway.carry_bias)
        add(f"CNN_high_{k}/W_transform", highway.transform_kernel)
        add(f"CNN_high_{k}/b_transform", highway.transform_bias)
    if encoder.projection is not None:
        add("CNN_proj/W_proj", encoder.projection.kernel)
        add("CNN_proj/b_proj", encoder.projection.bias)
    for direction, cells in enumerate((model.bilstm.forward_cells, model.bilstm.backward_cells)):
        for layer, cell in enumerate(cells):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            add(f"{prefix}/W_0", cell.kernel)  # rows [x ; h_prev], gate columns i, j, f, o
            add(f"{prefix}/B", cell.bias)  # without the +1.0 forget bias
            add(f"{prefix}/W_P_0", cell.projection_kernel)
    assert [e.dataset for e in table] == list(shapes), "the layout and the model disagree"
    return table


def _with_zero_row(w):
    return np.concatenate([np.zeros([1, w.shape[1]], w.dtype), w])


def _without_zero_row(v):
    return v[1:]


# The datasets whose file may hold the id-0 row already (one row more than expected).
FILE_NAME = "weights.hdf5"  # in a model directory, beside options_file.FILE_NAME
_ZERO_ROW_DATASETS = ("char_embed", "word_embed")


def expected_datasets(config):
    """``{dataset: shape in the file}`` of an official weight file for ``config`` (an
    ``ElmoConfig``), in the order of ``weight_table``: what a file is checked against before
    a model exists (``check_file``)."""
    e, f, p, d = (config.char_embedding_dim, config.n_filters, config.projection_dim,
                  config.lstm_dim)  # fmt: skip
    shapes = {"char_embed": (config.char_table_rows - 1, e)}
    if config.word_embedding_dim:
        shapes["word_embed"] = (config.n_words - 1, config.word_embedding_dim)
    for i, (width, count) in enumerate(config.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, e, count)
        shapes[f"CNN/b_cnn_{i}"] = (count,)
    for k in range(config.n_highway):
        for kind in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{kind}"] = (f, f)
            shapes[f"CNN_high_{k}/b_{kind}"] = (f,)
    if config.uses_token_projection:
        shapes["CNN_proj/W_proj"] = (config.word_embedding_dim + f, p)  # word rows first
        shapes["CNN_proj/b_proj"] = (p,)
    for direction in (0, 1):
        for layer in range(config.n_lstm_layers):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            shapes[f"{prefix}/W_0"] = (2 * p, 4 * d)  # rows [x ; h_prev], x of size P
            shapes[f"{prefix}/B"] = (4 * d,)
            shapes[f"{prefix}/W_P_0"] = (d, p)
    return shapes


def check_file(config, path):
    """Checks ``path`` as ``load_weights`` does before it assigns anything (links and
    storage, every dataset's presence, shape and dtype, every value finite), for ``config``,
    without a model: a downloaded file is checked so before it counts as cached."""
    _check_against(config, path, read_values=True)


def check_structure(config, path):
    """The checks of :func:`check_file` that read no values (links and storage, every
    dataset's presence, shape and dtype): the metadata only, in milliseconds whatever the
    file's size. A command runs it before TensorFlow starts."""
    _check_against(config, path, read_values=False)  # pragma: no mutate, None reads as False


def parse_weight_file(config, data, source="weight file"):
    """``({dataset: array}, vocabulary)`` of a weight file's bytes for ``config``, through
    every check ``load_weights`` makes (``vocabulary``: a code-point model's
    ``CodepointVocabulary``, else ``None``). The fuzz target of the weight file (and of its
    vocabulary datasets)."""
    import io  # lazy: a fuzz target's own need

    table = [
        WeightEntry(name, None, shape, _same, _same)  # pragma: no mutate, to_file unused here
        for name, shape in expected_datasets(config).items()
    ]
    try:
        f = h5py.File(io.BytesIO(bytes(data)), "r")  # pragma: no mutate, h5py's default is "r"
    except OSError as e:
        raise WeightFileError(
            f"{source}: not a readable HDF5 weight file ({checks.first_line(e)})"
        ) from None
    with f:
        arrays = {e.dataset: a for e, a in _checked_arrays(f, source, table)}
        return arrays, _checked_vocabulary(f, source, config)


def _check_against(config, path, read_values):
    path = os.fspath(path)
    table = [
        WeightEntry(name, None, shape, _same, _same)  # pragma: no mutate, to_file unused here
        for name, shape in expected_datasets(config).items()
    ]
    with _open(path, "r") as f:
        for _ in _checked_arrays(f, path, table, read_values):
            pass
        _checked_vocabulary(f, path, config, read_values)


def _open(path, mode):
    path = os.fspath(path)
    if mode == "r":
        untrusted_files.check_readable(path, "weight file", WeightFileError)
    try:
        return h5py.File(path, mode)  # pragma: no mutate, mode is always "r", h5py's default
    except OSError as e:
        raise WeightFileError(
            f"{path}: not a readable HDF5 weight file ({checks.first_line(e)})"
        ) from None


def open_untrusted(path):
    """Opens an HDF5 file for reading as :func:`load_weights` does: one-line errors for a
    missing, empty or non-HDF5 file, and links or storage outside the file refused before
    any data is read. Returns the open ``h5py.File``."""
    f = _open(path, "r")
    try:
        _check_links_and_storage(f, os.fspath(path))
    except BaseException:
        f.close()
        raise
    return f


def _check_links_and_storage(f, path):
    """Refuses anything that would make HDF5 read outside ``f`` (or elsewhere in it).

    External links and external raw storage point at other files (a crafted weight file could
    name /etc/passwd and have it copied into the model's variables); virtual datasets map
    other datasets or files; soft links alias another path. The official files hold none of
    them, so each is refused before any data is read. ``visit_links`` lists every link
    without following soft or external ones.
    """
    found, errors = [], []

    def visit(name):
        try:
            problem = _link_problem(f, name)
        except Exception as e:  # raised inside HDF5's visit it would surface as SystemError
            errors.append(e)
            return True
        if problem:
            found.append(f"'{name}' {problem}")
            return True  # a value other than None stops the visit
        return None

    f.visit_links(visit)
    if errors:
        raise errors[0]
    if found:
        raise WeightFileError(f"{path}: {found[0]}")


def _link_problem(f, name):
    """What makes the link ``name`` unsafe to read through, or ``None``."""
    link = f.get(name, getlink=True)
    if isinstance(link, h5py.ExternalLink):
        return (
            f"is an external link (to '{link.path}' in {link.filename}); "
            "a weight file must hold its data itself"
        )
    if isinstance(link, h5py.SoftLink):
        return f"is a soft link (to '{link.path}'); a weight file holds datasets only"
    if not isinstance(link, h5py.HardLink):
        return f"is a {type(link).__name__}; a weight file holds datasets only"
    # Every component of ``name`` is a hard link (visit_links does not descend into soft or
    # external ones), so opening it stays inside this file.
    obj = f.get(name)
    if isinstance(obj, h5py.Dataset):
        if obj.is_virtual:
            return (
                "is a virtual dataset (its data comes from other datasets or files); "
                "a weight file must hold its data itself"
            )
        plist = obj.id.get_create_plist()
        if plist.get_external_count():
            return (
                "has external storage (its data is read from another file); "
                "a weight file must hold its data itself"
            )
        return _storage_problem(obj, plist)
    return None


# How much one chunk may hold uncompressed: reading any value of a chunked dataset decodes its
# whole chunk, so a small file with huge compressed chunks costs far more than its size.
MAX_CHUNK_BYTES = 64 << 20
# The filters h5py ships (lzf is h5py's own): anything else is a plugin this file should not
# need, and a missing one would only fail later, at the first read.
SAFE_FILTERS = {
    h5py.h5z.FILTER_DEFLATE: "gzip",
    h5py.h5z.FILTER_SHUFFLE: "shuffle",
    h5py.h5z.FILTER_FLETCHER32: "fletcher32",
    h5py.h5z.FILTER_SCALEOFFSET: "scaleoffset",
    h5py.h5z.FILTER_NBIT: "nbit",
    h5py.h5z.FILTER_LZF: "lzf",
}


def _storage_problem(dataset, plist):
    """Chunks larger than the dataset or than ``MAX_CHUNK_BYTES``, or a filter h5py does not
    ship (or this HDF5 cannot decode): checked from the metadata, before any data is read."""
    if dataset.chunks is not None and dataset.shape is not None:
        if any(c > max(s, 1) for c, s in zip(dataset.chunks, dataset.shape)):
            return (
                f"has chunks {tuple(dataset.chunks)} larger than its shape {tuple(dataset.shape)}"
            )
        chunk_bytes = math.prod(dataset.chunks) * dataset.dtype.itemsize
        if chunk_bytes > MAX_CHUNK_BYTES:
            return (
                f"has chunks of {chunk_bytes:,} bytes uncompressed, more than {MAX_CHUNK_BYTES:,}"
            )
    for index in range(plist.get_nfilters()):
        code = plist.get_filter(index)[0]
        if code not in SAFE_FILTERS:
            return f"is stored with HDF5 filter {code}, not one that h5py ships"
        if not h5py.h5z.filter_avail(code):
            return f"is stored with the {SAFE_FILTERS[code]} filter, which this HDF5 cannot decode"
    return None


def _check_datasets(f, path, table):
    """Checks every dataset's kind, shape and dtype; returns ``[(entry, dataset, transform)]``.

    Only metadata is looked at: the shapes are the ones the options file allows (bounded by
    ``ElmoConfig``'s size limits), so a dataset declaring an absurd size is refused here,
    before anything is allocated for it.
    """
    checked = []
    for entry in table:
        dataset = f.get(entry.dataset)  # links were refused: this stays inside the file
        if not isinstance(dataset, h5py.Dataset | np.ndarray):
            raise WeightFileError(f"{path}: missing dataset '{entry.dataset}'")
        found = None if dataset.shape is None else tuple(dataset.shape)  # None: null dataspace
        transform = entry.from_file
        if entry.dataset in _ZERO_ROW_DATASETS and found == (
            entry.file_shape[0] + 1,
            *entry.file_shape[1:],
        ):
            # A file that already holds the id-0 row (262 rows) is taken as is; it goes
            # through the same dtype and finiteness checks as the official 261 rows.
            transform = _same
        elif found != entry.file_shape:
            raise WeightFileError(
                f"{path}: dataset '{entry.dataset}' has shape {found}, expected "
                f"{entry.file_shape} for this options file"
            )
        if dataset.dtype.kind != "f":
            raise WeightFileError(
                f"{path}: dataset '{entry.dataset}' has dtype {dataset.dtype}, expected float"
            )
        checked.append((entry, dataset, transform))
    return checked


def load_weights(model, path):  # pragma: no mutate block, tests/model/test_weight_file.py
    """Loads an official-layout HDF5 file into ``model`` (an ``ELMo``).

    The file is untrusted input and is checked in stages, so a bad file leaves the model
    unchanged and no data is read before its structure passes:

    1. links and storage: soft, external and user-defined links, virtual datasets and
       external raw storage are refused (they would read other files or other datasets);
    2. every dataset: present, shape and float dtype as this options file expects;
    3. only then each dataset is read and must be finite;
    4. only then the variables are assigned.

    Errors name the file, the dataset, and what was expected and found.
    """
    path = os.fspath(path)
    with _open(path, "r") as f:
        values = [(e.variable, a) for e, a in _checked_arrays(f, path, weight_table(model))]
        vocabulary = _checked_vocabulary(f, path, model.config)
    return _assign(model, values, vocabulary)


def load_arrays(model, arrays, source):  # pragma: no mutate block, tests/model/test_efml_model.py
    """``load_weights`` from ``{dataset: numpy array}`` (a weight file's names and layout,
    as ``elmo_tf.kinds.efml_conversion`` makes them in memory), with the same checks of every
    dataset's presence, shape, dtype and values; ``source`` names them in errors."""
    values = [(e.variable, a) for e, a in _checked_arrays(arrays, source, weight_table(model))]
    return _assign(model, values, _checked_vocabulary(arrays, source, model.config))


def _assign(model, values, vocabulary):  # pragma: no mutate block, tests/model/test_efml_model.py
    for variable, value in values:
        variable.assign(value)
    if vocabulary is not None:
        model.token_mapper = token_mappers.mapper_for(model.config, vocabulary)
    return model


def _checked_vocabulary(f, path, config, read_values=True):
    """A code-point model's ``CodepointVocabulary`` from ``f`` (``None`` for bilm-tf's
    scheme), each dataset's kind, shape and dtype checked before it is read."""
    if not config.uses_codepoints:
        return None
    limits = {
        codepoints.DATASETS[0]: config.n_characters,
        codepoints.DATASETS[1]: codepoints.max_word_bytes(config),
        codepoints.DATASETS[2]: config.n_words + 1 if config.n_words else 0,
    }
    arrays = {}
    for name, most in limits.items():
        dataset = f.get(name)
        if not isinstance(dataset, h5py.Dataset | np.ndarray):
            raise WeightFileError(f"{path}: missing dataset '{name}' (a code-point model's table)")
        shape = None if dataset.shape is None else tuple(dataset.shape)
        if shape is None or len(shape) != 1 or shape[0] > most:
            raise WeightFileError(
                f"{path}: dataset '{name}' has shape {shape}, expected one axis of at most {most}"
            )
        if dataset.dtype.kind not in "iu":  # pragma: no mutate, no dtype kind is "X"
            raise WeightFileError(
                f"{path}: dataset '{name}' has dtype {dataset.dtype}, expected integers"
            )
        if read_values:
            try:
                arrays[name] = np.asarray(dataset[...])
            except (OSError, RuntimeError, ValueError, TypeError) as e:
                raise WeightFileError(
                    f"{path}: corrupt HDF5 weight file, cannot read dataset '{name}' "
                    f"({checks.first_line(e)})"
                ) from None
    if not read_values:
        return None
    return codepoints.CodepointVocabulary.from_arrays(config, arrays, path)


def _checked_arrays(f, path, table, read_values=True):
    """Yields ``(entry, value)`` for every dataset of ``table``, after stages 1 and 2 of
    ``load_weights`` passed for all of them: each value read, checked finite, transformed
    (nothing without ``read_values``: stages 1 and 2 only)."""
    where = "its structure"
    try:
        if isinstance(f, h5py.File):  # arrays in memory (load_arrays) link nowhere
            _check_links_and_storage(f, path)
        where = "a dataset's metadata"
        checked = _check_datasets(f, path, table)
        for entry, dataset, transform in checked if read_values else ():
            where = f"dataset '{entry.dataset}'"
            with np.errstate(over="ignore"):  # a float64 beyond float32 becomes inf: refused
                array = dataset[...].astype(np.float32)
            if not np.all(np.isfinite(array)):
                raise WeightFileError(f"{path}: dataset '{entry.dataset}' holds NaN or inf")
            yield entry, transform(array)
    except WeightFileError:
        raise
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
        # A corrupt file fails inside HDF5 with any of these, at any stage.
        raise WeightFileError(
            f"{path}: corrupt HDF5 weight file, cannot read {where} ({checks.first_line(e)})"
        ) from None


def save_weights(model, path):
    """Writes ``model``'s weights in the official layout (readable by bilm-tf and AllenNLP).

    The file is written next to ``path`` and renamed into place (``files.atomic_path``), so
    an interrupted save never leaves a partial file under that name.
    """
    arrays = {
        entry.dataset: entry.to_file(np.asarray(entry.variable.numpy(), np.float32))
        for entry in weight_table(model)
    }
    if model.config.uses_codepoints:
        if model.token_mapper.vocabulary is None:
            raise WeightFileError(
                f"{path}: not written: this code-point model has no character table (load "
                "its weights first)"
            )
        arrays.update(model.token_mapper.vocabulary.arrays())
    write_arrays(arrays, path)


def write_arrays(arrays, path):
    """Writes ``{dataset: array}`` as an HDF5 weight file, atomically (``files.atomic_path``)."""
    with files.atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        for name, value in arrays.items():
            f.create_dataset(name, data=value)
