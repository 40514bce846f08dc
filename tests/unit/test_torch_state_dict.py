"""The PyTorch state_dict reader (``elmo_tf.foreign.torch_state_dict``): PyTorch's legacy and zip
layouts read as data with NumPy, and a file that would run code refused before any of it runs.
Unit tests: no model, no TensorFlow, no PyTorch (``torch_pickles`` writes the files)."""

import collections
import io
import pickle
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import torch_pickles
from support.foreign_models import EFML_TINY

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import torch_state_dict
from elmo_tf.foreign.torch_state_dict import parse_state_dict, read_state_dict
from elmo_tf.testing.memory import peak_bytes


def _tensors():
    rng = np.random.default_rng(0)
    shared = torch_pickles.Storage(rng.normal(size=30).astype(np.float32), "7")
    return collections.OrderedDict(
        [
            ("weight", rng.normal(size=(4, 3)).astype(np.float32)),
            ("ids", np.arange(5, dtype=np.int64)),
            ("half", np.array([1.5, -2.0], np.float16)),
            ("scalar", np.array(3.25, np.float64)),
            ("empty", np.zeros((0, 4), np.float32)),
            # two views of one storage: an offset, and a transposed (non-contiguous) one
            ("view", torch_pickles.Tensor(shared, 2, (3, 4), (4, 1))),
            ("transposed", torch_pickles.Tensor(shared, 0, (5, 6), (1, 5))),
        ]
    )


def _expected(name, value):
    if isinstance(value, np.ndarray):
        return value
    values = value.storage.values
    return np.lib.stride_tricks.as_strided(
        values[value.offset :], value.size, [s * values.itemsize for s in value.stride]
    )


@pytest.mark.parametrize("layout", ["legacy", "zip"])
def test_a_state_dict_reads_back_value_for_value(layout):
    tensors = _tensors()
    data = (torch_pickles.legacy_bytes if layout == "legacy" else torch_pickles.zip_bytes)(tensors)
    read = parse_state_dict(data)
    assert list(read) == list(tensors)
    for name, value in tensors.items():
        expected = _expected(name, value)
        assert read[name].dtype == expected.dtype and read[name].shape == expected.shape, name
        np.testing.assert_array_equal(read[name], expected)
        assert read[name].flags.writeable and read[name].flags.c_contiguous


def test_the_efml_fixture_reads_with_efml_shapes():
    embedder = read_state_dict(EFML_TINY / "token_embedder.pkl")
    assert embedder["char_emb_layer.embedding.weight"].shape == (126, 4)
    assert embedder["convolutions.2.weight"].shape == (6, 4, 3)
    assert embedder["projection.weight"].shape == (6, 3 + 14)
    encoder = read_state_dict(EFML_TINY / "encoder.pkl")
    assert sorted({k.split(".")[0] for k in encoder}) == [
        "backward_layer_0", "backward_layer_1", "forward_layer_0", "forward_layer_1"
    ]  # fmt: skip
    assert encoder["forward_layer_0.input_linearity.weight"].shape == (40, 6)
    assert all(v.dtype == np.float32 for v in [*embedder.values(), *encoder.values()])


@pytest.mark.parametrize("function", ["system", "exec"])
@pytest.mark.parametrize("where", ["object", "tensor"])
def test_a_pickle_that_would_run_code_is_refused_and_its_code_never_runs(tmp_path, function, where):
    marker = tmp_path / "marker"
    payload = torch_pickles.WritesMarker(marker, function)
    if where == "object":
        main = pickle.dumps(payload, protocol=2)
    else:  # inside a state_dict, as the value of one entry
        main = pickle.dumps(collections.OrderedDict(weight=payload), protocol=2)
    # The payload is live: plain pickle runs it (the reason for the reader).
    pickle.loads(main)
    assert marker.exists()
    marker.unlink()

    path = tmp_path / "encoder.pkl"
    path.write_bytes(torch_pickles.legacy_with_main(main))
    with pytest.raises(ForeignModelError) as error:
        read_state_dict(path)
    name = {"system": "posix.system", "exec": "__builtin__.exec"}[function]  # protocol 2's
    assert str(error.value) == (
        f"{path}: not loaded: the PyTorch state_dict file refers to {name}, which a state_dict "
        "never holds (loading the file with pickle would run it)"
    )
    assert "\n" not in str(error.value)
    assert not marker.exists()


def test_a_stand_in_cannot_be_changed_by_a_pickle():
    # BUILD on torch.FloatStorage would set its dtype for every later load in the process.
    main = b"\x80\x02ctorch\nFloatStorage\n}X\x05\x00\x00\x00dtypeX\x03\x00\x00\x00<i8sb."
    with pytest.raises(ForeignModelError, match="sets attributes of one of PyTorch's names"):
        parse_state_dict(torch_pickles.legacy_with_main(main))
    dtype = torch_state_dict._ALLOWED[("torch", "FloatStorage")].dtype
    assert dtype == np.dtype("<f4")
    np.testing.assert_array_equal(
        parse_state_dict(torch_pickles.legacy_bytes({"w": np.ones(2, np.float32)}))["w"], [1, 1]
    )


def _legacy(**kwargs):
    return torch_pickles.legacy_bytes({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, **kwargs)


def _count_offset(data):
    """Where the legacy file's only storage's element count is."""
    return len(data) - 6 * 4 - 8


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: b"", "not a PyTorch state_dict file in PyTorch's legacy or zip layout"),
        (lambda: b"\x80\x02K\x05.", "does not start with PyTorch's magic number"),
        (lambda: b"not a pickle at all", "legacy or zip layout"),
        (lambda: _legacy()[:-5], "ends inside storage '1000'"),
        (lambda: _legacy(trailing=b"\x00"), "has bytes after its last storage"),
        (
            lambda: _legacy(sys_info={"little_endian": False}),
            "was written on a big-endian machine",
        ),
        (
            lambda: (lambda d: d[: _count_offset(d)] + np.int64(7).tobytes() + d[-24:])(_legacy()),
            "has storage '1000' of 7 elements where its object says 6",
        ),
        (
            lambda: torch_pickles.legacy_with_main(pickle.dumps([1, 2], protocol=2)),
            "holds a list, not a state_dict",
        ),
        (
            lambda: torch_pickles.legacy_with_main(pickle.dumps({"w": "text"}, protocol=2)),
            "holds str under 'w', not a tensor",
        ),
        (  # a storage that views another (PyTorch's view metadata)
            lambda: torch_pickles.legacy_with_main(
                _storage_pid(4).replace(b"NtQ", b"X\x01\x00\x00\x00vK\x00K\x01\x87tQ")
            ),
            "holds storage 'k' as a view of another storage",
        ),
        (  # a persistent id that is not a storage (PyTorch's "module" source records)
            lambda: torch_pickles.legacy_with_main(
                b"\x80\x02(X\x06\x00\x00\x00moduleK\x01K\x02K\x03tQ."
            ),
            "holds a reference that is not a storage",
        ),
    ],
)
def test_a_broken_file_is_refused_in_one_line(make, message):
    with pytest.raises(ForeignModelError, match=message) as error:
        parse_state_dict(make(), source="encoder.pkl")
    assert str(error.value).startswith("encoder.pkl: ")
    assert "\n" not in str(error.value)


def _storage_pid(numel, key="k"):
    """A main pickle of {'w': tensor of ``numel`` floats, size (numel,)}."""
    key_bytes = key.encode()
    return (
        b"\x80\x02ccollections\nOrderedDict\n)R(X\x01\x00\x00\x00w"
        b"ctorch._utils\n_rebuild_tensor_v2\n("
        b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
        + b"X" + len(key_bytes).to_bytes(4, "little") + key_bytes
        + b"X\x03\x00\x00\x00cpu\x8a\x08" + numel.to_bytes(8, "little") + b"NtQ"
        + b"K\x00\x8a\x08" + numel.to_bytes(8, "little") + b"\x85K\x01\x85\x89)tRu."
    )  # fmt: skip


def test_a_storage_larger_than_the_file_is_refused_before_anything_is_allocated():
    data = torch_pickles.legacy_with_main(_storage_pid(1 << 40))
    with pytest.raises(ForeignModelError, match="of 1099511627776 elements, more than the file"):
        parse_state_dict(data)


def test_a_tensor_beyond_its_storage_is_refused():
    tensors = {"w": torch_pickles.Tensor(torch_pickles.Storage(np.ones(4, np.float32), "1"),
                                          2, (3,), (1,))}  # fmt: skip
    with pytest.raises(ForeignModelError, match=r"tensor 'w' \(3,\) beyond its storage of 4"):
        parse_state_dict(torch_pickles.legacy_bytes(tensors))


def test_many_views_of_one_storage_are_refused_before_they_cost_memory():
    storage = torch_pickles.Storage(np.ones(100, np.float32), "1")
    views = {f"w{i}": torch_pickles.Tensor(storage, 0, (100,), (1,)) for i in range(10)}
    with pytest.raises(ForeignModelError, match="more values in its tensors than its storages"):
        parse_state_dict(torch_pickles.legacy_bytes(views))
    # Tied weights (two names, one storage) read.
    read = parse_state_dict(torch_pickles.legacy_bytes(dict(list(views.items())[:2])))
    assert list(read) == ["w0", "w1"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda names: names + [names[0]], "names one member twice"),
        (lambda names: [n.replace("archive/", "") for n in names], "does not hold one folder"),
        (lambda names: [n for n in names if not n.endswith("data.pkl")], "has no data.pkl"),
        (lambda names: [n for n in names if "/data/" not in n], "has no data/"),
    ],
)
def test_a_broken_zip_layout_is_refused(mutate, message):
    source = zipfile.ZipFile(io.BytesIO(torch_pickles.zip_bytes({"w": np.ones(3, np.float32)})))
    names = mutate(source.namelist())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
        for name in names:
            original = name if name in source.namelist() else f"archive/{name}"
            target.writestr(name, source.read(original))
    with pytest.raises(ForeignModelError, match=message):
        parse_state_dict(out.getvalue())


def test_the_file_size_bound_is_checked_before_reading(tmp_path):
    path = tmp_path / "big.pkl"
    path.write_bytes(_legacy())
    with pytest.raises(ForeignModelError, match="more than the 100 a PyTorch state_dict file"):
        read_state_dict(path, max_bytes=100)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_any_damaged_file_is_a_state_dict_or_one_error(data):
    """The fuzz target's contract on damaged copies of a valid file: a dict of arrays, or
    ``ForeignModelError``; never another exception."""
    original = bytearray(_legacy() if data.draw(st.booleans()) else torch_pickles.zip_bytes(
        {"w": np.arange(6, dtype=np.float32)}))  # fmt: skip
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(original) - 1))
        original[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        original = original[: data.draw(st.integers(0, len(original)))]
    try:
        read = parse_state_dict(bytes(original))
    except ForeignModelError as e:
        assert "\n" not in str(e)
    else:
        assert all(isinstance(v, np.ndarray) for v in read.values())


def test_a_zip_storage_of_the_wrong_size_is_refused():
    source = zipfile.ZipFile(io.BytesIO(torch_pickles.zip_bytes({"w": np.ones(3, np.float32)})))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            target.writestr(name, data + b"\x00" * 4 if "/data/" in name else data)
    with pytest.raises(ForeignModelError, match=r"has data/1000 of 16 bytes, expected 12"):
        parse_state_dict(out.getvalue())


# The memory a refused file may cost: a small multiple of its size, plus what reading any file
# costs (the unpickler's tables, zipfile's buffers).
MEMORY_FACTOR, MEMORY_BASE = 16, 1 << 20


def _refused_within_memory(data, message):
    outcome, peak = peak_bytes(parse_state_dict, data)
    assert isinstance(outcome, ForeignModelError), outcome
    assert message in str(outcome)
    assert peak <= MEMORY_FACTOR * len(data) + MEMORY_BASE, f"{peak:,} bytes for {len(data):,}"


@pytest.mark.parametrize("index", [0x00FFFFFF, 0xFFFFFFFF])
def test_a_memo_index_no_writer_uses_is_refused_before_the_memo_grows(index):
    """CPython's unpickler grows its memo to twice the largest index it is given, zero-filled:
    a 10-byte pickle naming index 0x0FFFFFFF would cost 4 GB."""
    data = b"\x80\x02}r" + index.to_bytes(4, "little") + b"."  # {} put at the index
    _refused_within_memory(data, f"stores a value at memo index {index:,} after 0 values")


def test_memo_indices_in_the_order_a_writer_numbers_them_read():
    """Each PUT may name the next index or an earlier one; one past the next is refused."""
    magic = pickle.dumps(torch_pickles.MAGIC_NUMBER, 2)  # no PUT: an int
    assert parse_state_dict(_legacy())["w"].shape == (2, 3)  # pickle's own numbering
    with pytest.raises(ForeignModelError, match="memo index 2 after 1 values"):
        parse_state_dict(magic + b"\x80\x02]q\x00]q\x02.")  # [] at 0, then [] at 2


def test_values_that_share_their_parts_are_never_formatted_whole():
    """Nested OrderedDicts sharing their children through the memo: each level doubles what a
    full repr() writes (depth 20: a million leaves) in a pickle of a few hundred bytes."""
    value = collections.OrderedDict()
    for _ in range(20):
        value = collections.OrderedDict([("a", value), ("b", value)])
    data = pickle.dumps(torch_pickles.MAGIC_NUMBER, 2) + pickle.dumps(value, 2)
    _refused_within_memory(data, "has protocol version an OrderedDict of 2 items, not 1001")
    main = pickle.dumps(collections.OrderedDict([("w", value)]), 2)
    _refused_within_memory(torch_pickles.legacy_with_main(main), "holds OrderedDict under 'w'")


def test_a_compressed_storage_is_refused_before_it_is_expanded():
    """torch.save stores its storages as they are; deflated zeros expand about a hundred times
    here (3,000 storages of 40 KB, 120 MB in all, in a file of about 1 MB), though each storage
    alone is smaller than the file."""
    zeros = {f"w{i}": np.zeros(10_000, np.float32) for i in range(3000)}
    data = torch_pickles.zip_bytes(zeros, compression=zipfile.ZIP_DEFLATED)
    assert 40_000 < len(data) < 2_000_000
    _refused_within_memory(data, "has data/1000 compressed; torch.save stores storages as is")


def _zip_with_counts(count):
    """A zip-layout file of two tensors of ``count`` floats each, its directory declaring the
    storages' sizes to match, though each member holds 300 floats."""
    ones = {"a": np.ones(300, np.float32), "b": np.ones(300, np.float32)}
    source = zipfile.ZipFile(io.BytesIO(torch_pickles.zip_bytes(ones)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            member = source.read(name)
            if name.endswith("data.pkl"):  # 300 is BININT2 (M, 2 bytes): counts and sizes
                member = member.replace(b"M\x2c\x01", b"M" + count.to_bytes(2, "little"))
            target.writestr(name, member)
    data = out.getvalue()
    for key in ("1000", "1001"):
        data = _with_declared_size(data, f"archive/data/{key}", 4 * count)
    return data


def test_storages_larger_than_the_file_together_are_refused_before_they_are_read():
    """The zip's directory declares two stored storages, each smaller than the file and
    larger together (the pickle's element counts to match): refused before either is read."""
    count = len(_zip_with_counts(300)) * 6 // 40  # floats: each storage 0.6 times the file
    data = _zip_with_counts(count)
    assert 4 * count < len(data) < 8 * count
    _refused_within_memory(data, f"has storages of {8 * count:,} bytes in all, more than its")


def _with_declared_size(data, name, size):
    """``data`` (a zip) with its central directory's sizes of member ``name`` set to ``size``."""
    data = bytearray(data)
    offset = data.index(b"PK\x01\x02")
    while data[offset + 46 : offset + 46 + len(name)] != name.encode():
        offset = data.index(b"PK\x01\x02", offset + 4)
    data[offset + 20 : offset + 28] = size.to_bytes(4, "little") * 2  # compressed, uncompressed
    return bytes(data)


def test_a_big_endian_zip_layout_is_refused_not_read_as_garbage():
    data = torch_pickles.zip_bytes({"w": np.arange(3, dtype=np.float32)}, byteorder="big")
    with pytest.raises(ForeignModelError, match="was written on a big-endian machine"):
        parse_state_dict(data)


def test_a_tensor_with_backward_hooks_is_refused():
    storage = torch_pickles.Storage(np.ones(3, np.float32), "1")
    hooked = torch_pickles.Tensor(storage, 0, (3,), (1,), backward_hooks={0: "hook"})
    for make in (torch_pickles.legacy_bytes, torch_pickles.zip_bytes):
        with pytest.raises(ForeignModelError, match="holds a tensor with backward hooks"):
            parse_state_dict(make({"w": hooked}))


def test_the_expected_shapes_are_checked_before_any_value_is_read():
    """A caller that knows the shapes (an EFML folder's config) sees the pickle's tensors
    before their values are read: its refusal costs no allocation of the tensors."""
    seen = []

    def check(tensors):
        seen.append({name: (shape, dtype.str) for name, (shape, dtype) in tensors.items()})
        raise ForeignModelError("refused by the caller")

    big = {"w": np.zeros((1000, 1000), np.float32), "h": np.zeros(2, np.float16)}
    for data in (torch_pickles.legacy_bytes(big), torch_pickles.zip_bytes(big)):
        outcome, peak = peak_bytes(parse_state_dict, data, check=check)
        assert str(outcome) == "refused by the caller"
        assert peak < len(data) // 4  # the 4 MB storage was never read
    assert seen == [{"w": ((1000, 1000), "<f4"), "h": ((2,), "<f2")}] * 2


TORCH_FIXTURES = EFML_TINY.parents[1] / "torch"  # written by PyTorch's own torch.save


def test_files_pytorchs_own_torch_save_wrote_read_value_for_value():
    """The zip layout as PyTorch 2.13 writes it (tests/fixtures/torch/make_fixture.py): the
    tiny EFML encoder saved again reads as its legacy file does; a module's views, tied
    weights, half, bfloat16, double and int64 tensors read as PyTorch holds them."""
    legacy = read_state_dict(EFML_TINY / "encoder.pkl")
    current = read_state_dict(TORCH_FIXTURES / "encoder_zip.pkl")
    assert list(current) == list(legacy)
    for name, array in legacy.items():
        np.testing.assert_array_equal(current[name], array)
    module = read_state_dict(TORCH_FIXTURES / "module_zip.pt")
    weight = module["linear.weight"]
    assert weight.shape == (6, 4) and weight.dtype == np.float32
    np.testing.assert_array_equal(module["linear.weight_t"], weight.T)
    np.testing.assert_array_equal(module["tied.weight"], weight)
    np.testing.assert_array_equal(module["row"], weight[2])
    assert {k: (v.dtype.str, v.shape) for k, v in module.items() if k in (
        "half", "bf16", "double", "steps")} == {
        "half": ("<f2", (3,)), "bf16": ("<f4", (2, 3)), "double": ("<f8", (2,)),
        "steps": ("<i8", (5,)),
    }  # fmt: skip
    np.testing.assert_array_equal(module["steps"], np.arange(5))
    bf16 = module["bf16"].view(np.uint32)
    assert not np.any(bf16 & 0xFFFF)  # widened from bfloat16's 16 bits: the low half is zero
