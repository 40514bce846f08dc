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


# --------------------------------------------------------------------------- pickles by hand
#
# Each refusal is one exact line; the pickles below are written opcode by opcode (protocol 2,
# as PyTorch writes them), so that each holds the one thing under test.


def _text(value):
    """BINUNICODE."""
    data = value.encode()
    return b"X" + len(data).to_bytes(4, "little") + data


def _int(value):
    """LONG1 of 8 bytes: the same length whatever the value."""
    return b"\x8a\x08" + value.to_bytes(8, "little", signed=True)


def _global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _tuple(*items):
    return b"(" + b"".join(items) + b"t"


STORAGE = _text("storage")


def _pid(key="k", numel=4, kind="FloatStorage", tag=STORAGE, fields=None):
    """A storage reference (BINPERSID) of the legacy layout: six fields."""
    fields = fields or [tag, _global("torch", kind), _text(key), _text("cpu"), _int(numel), b"N"]
    return _tuple(*fields) + b"Q"


def _tensor(storage=None, offset=0, size=(4,), stride=(1,), rest=(b"\x89", b"}")):
    """``_rebuild_tensor_v2(storage, offset, size, stride, False, {})``; ``size`` or
    ``stride`` as bytes: that pickle as it is."""
    size = size if isinstance(size, bytes) else _tuple(*map(_int, size))
    stride = stride if isinstance(stride, bytes) else _tuple(*map(_int, stride))
    storage = _pid() if storage is None else storage
    args = _tuple(storage, _int(offset), size, stride, *rest)
    return _global("torch._utils", "_rebuild_tensor_v2") + args + b"R"


def _state(*entries, build=b""):
    """An OrderedDict of ``(name pickle, value pickle)`` entries; ``build``: its BUILD state."""
    items = b"".join(name + value for name, value in entries)
    return _global("collections", "OrderedDict") + b")R" + build + b"(" + items + b"u"


def _pickle(body):
    return b"\x80\x02" + body + b"."


HEADER = (
    pickle.dumps(torch_pickles.MAGIC_NUMBER, 2)
    + pickle.dumps(1001, 2)
    + pickle.dumps({"protocol_version": 1001, "little_endian": True}, 2)
)


def _file(*entries, storages=None, keys=None, build=b""):
    """A legacy file of an OrderedDict of ``entries`` (name, value pickle) whose storages are
    ``storages`` (``{key: array}``, written in the keys' order); ``keys``: the list written."""
    storages = storages or {}
    keys = sorted(storages) if keys is None else keys
    main = _pickle(_state(*((_text(n) if isinstance(n, str) else n, v) for n, v in entries),
                          build=build))  # fmt: skip
    data = HEADER + main + pickle.dumps(keys, 2)
    for key in sorted(storages):
        values = storages[key]
        data += np.int64(values.size).tobytes() + values.tobytes()
    return data


FOUR = {"k": np.array([1, 2, 3, 4], "<f4")}
LAYOUT = "state_dict: not a PyTorch state_dict file in PyTorch's legacy or zip layout"
REFUSED = "state_dict: not loaded: the PyTorch state_dict file"


def _refusal(data, **kwargs):
    """The one line ``parse_state_dict`` refuses ``data`` with."""
    with pytest.raises(ForeignModelError) as error:
        parse_state_dict(data, **kwargs)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_a_hand_written_file_reads():
    read = parse_state_dict(_file(("w", _tensor()), storages=FOUR))
    assert list(read) == ["w"]
    np.testing.assert_array_equal(read["w"], [1, 2, 3, 4])


@pytest.mark.parametrize(
    "data, message",
    [
        (_file(("w", _pid() + b"}b"), storages=FOUR), "sets attributes of a storage"),
        (_file(("w", _tensor() + b"}b"), storages=FOUR), "sets attributes of a tensor"),
        (_file(("w", _global("torch", "FloatStorage") + b"}b")),
         "sets attributes of one of PyTorch's names"),
        (_file(build=_text("x") + _int(1) + b"\x86b"),  # a state that is no dict
         "sets attributes of an OrderedDict other than _metadata"),
        (_file(build=b"}" + _text("x") + _int(1) + b"sb"),
         "sets attributes of an OrderedDict other than _metadata"),
        (_file(build=b")b"), "sets attributes of an OrderedDict other than _metadata"),
    ],
    ids=["storage", "tensor", "storage type", "a tuple", "another attribute", "an empty tuple"],
)  # fmt: skip
def test_a_pickle_that_sets_attributes_is_refused(data, message):
    assert _refusal(data) == f"{REFUSED} {message}"


def test_an_ordered_dicts_metadata_alone_may_be_set():
    metadata = b"}" + _text("_metadata") + b"}sb"
    assert list(parse_state_dict(_file(("w", _tensor()), storages=FOUR, build=metadata))) == ["w"]


@pytest.mark.parametrize(
    "rest, message",
    [
        ((b"\x89", b"}", b"N", b"N"), "rebuilds a tensor with 8 arguments"),
        ((b"\x89", b"}" + _int(0) + _text("hook") + b"s"), "holds a tensor with backward hooks"),
    ],
)
def test_a_tensor_rebuilt_with_more_than_a_view_is_refused(rest, message):
    assert _refusal(_file(("w", _tensor(rest=rest)), storages=FOUR)) == f"{REFUSED} {message}"


@pytest.mark.parametrize(
    "rest", [(), (b"\x89",), (b"\x89", b"}"), (b"\x89", b"}", b"N")], ids=[4, 5, 6, 7]
)
def test_a_tensor_rebuilt_with_four_to_seven_arguments_reads(rest):
    read = parse_state_dict(_file(("w", _tensor(rest=rest)), storages=FOUR))
    np.testing.assert_array_equal(read["w"], [1, 2, 3, 4])


def test_a_tensor_rebuilt_from_what_is_no_storage_is_refused():
    assert _refusal(_file(("w", _tensor(storage=_int(1))))) == (
        f"{REFUSED} rebuilds a tensor from something that is not a storage"
    )


def _parameter(*args):
    """``_rebuild_parameter(*args)``."""
    return _global("torch._utils", "_rebuild_parameter") + _tuple(*args) + b"R"


def test_a_parameter_is_its_tensor():
    ordered = _global("collections", "OrderedDict") + b")R"
    for args in ((_tensor(),), (_tensor(), b"\x88", ordered)):
        read = parse_state_dict(_file(("w", _parameter(*args)), storages=FOUR))
        np.testing.assert_array_equal(read["w"], [1, 2, 3, 4])


@pytest.mark.parametrize(
    "args",
    [
        (_int(1),),
        (_tensor(), b"\x89", b"}" + _int(0) + _text("hook") + b"s"),
        (_tensor(), b"\x89", b"}", b"N"),
    ],
    ids=["no tensor", "backward hooks", "a fourth argument"],
)
def test_a_parameter_of_more_than_a_plain_tensor_is_refused(args):
    assert _refusal(_file(("w", _parameter(*args)), storages=FOUR)) == (
        f"{REFUSED} rebuilds a parameter from something that is not a plain tensor"
    )


def test_a_long_name_a_file_refers_to_is_shown_cut():
    data = torch_pickles.legacy_with_main(_pickle(_global("m" * 40, "n" * 40)))
    assert _refusal(data) == (
        f"{REFUSED} refers to {'m' * 40}.{'n' * 19}... (81 characters), which a state_dict "
        "never holds (loading the file with pickle would run it)"
    )


def test_a_storage_reference_outside_the_object_is_refused():
    assert _refusal(_pickle(_pid())) == f"{REFUSED} refers to a storage in its header"


@pytest.mark.parametrize(
    "pid, message",
    [
        (b"(" + _text("storage") + _global("torch", "FloatStorage") + _text("k") + _text("cpu")
         + _int(4) + b"NlQ", "holds a reference that is not a storage (a list of 6 items)"),
        (_tuple(_text("storage"), _global("torch", "FloatStorage"), _text("k"), _text("cpu"),
                _int(4)) + b"Q", "holds a reference that is not a storage (a tuple of 5 items)"),
        (_pid(tag=_text("Storage")),
         "holds a reference that is not a storage (a tuple of 6 items)"),
        (_pid(fields=[_text("storage"), _text("FloatStorage"), _text("k"), _text("cpu"), _int(4),
                      b"N"]), "holds a storage of no known type"),
        (_pid(fields=[_text("storage"), _global("torch", "FloatStorage"), _int(5), _text("cpu"),
                      _int(4), b"N"]), "holds a storage key that is not a short string (5)"),
        (_pid(key="k" * 257), "holds a storage key that is not a short string "
         f"('{'k' * 60}... (257 characters)')"),
    ],
    ids=["a list", "five fields", "another tag", "no storage type", "a number", "257 characters"],
)  # fmt: skip
def test_a_reference_that_is_no_storage_is_refused(pid, message):
    assert _refusal(_file(("w", _tensor(storage=pid)), storages=FOUR)) == f"{REFUSED} {message}"


def test_a_storage_reference_tagged_in_bytes_and_a_key_of_256_characters_read():
    """Python 2's pickles (read with bytes for str) tag a storage b"storage"."""
    tag = b"C\x07storage"  # SHORT_BINBYTES
    key = "k" * 256
    data = _file(("w", _tensor(storage=_pid(key=key, tag=tag))), storages={key: FOUR["k"]})
    np.testing.assert_array_equal(parse_state_dict(data)["w"], [1, 2, 3, 4])


@pytest.mark.parametrize("kind, itemsize", [("ByteStorage", 1), ("FloatStorage", 4)])
def test_a_storage_may_declare_at_most_the_files_size_in_bytes(kind, itemsize):
    """Counted in bytes, against the file's length: a storage of that many bytes passes the
    reference (and is refused later, as the file holds no such storage); one element more is
    refused at once."""
    length = len(_file(("w", _tensor(storage=_pid(numel=0, kind=kind)))))
    at_most = length // itemsize
    data = _file(("w", _tensor(storage=_pid(numel=at_most, kind=kind))))
    assert len(data) == length
    assert _refusal(data) == f"{REFUSED} lists other storages than its object refers to"
    data = _file(("w", _tensor(storage=_pid(numel=at_most + 1, kind=kind))))
    assert _refusal(data) == (
        f"{REFUSED} holds storage 'k' of {at_most + 1} elements, more than the file's size allows"
    )


@pytest.mark.parametrize(
    "other, message",
    [
        (_pid(numel=5), "refers to storage 'k' with two types or sizes"),
        (_pid(kind="IntStorage"), "refers to storage 'k' with two types or sizes"),
    ],
    ids=["sizes", "types"],
)
def test_one_storage_referred_to_with_two_sizes_or_types_is_refused(other, message):
    data = _file(("a", _tensor()), ("b", _tensor(storage=other)), storages=FOUR)
    assert _refusal(data) == f"{REFUSED} {message}"


@pytest.mark.parametrize(
    "value, message",
    [
        (_pid(), "holds storage under 'w', not a tensor"),
        (_global("torch", "FloatStorage"), "holds storage type under 'w', not a tensor"),
        (_global("torch._utils", "_rebuild_tensor"), "holds rebuild function under 'w', not a "
         "tensor"),
        (_state(), "holds OrderedDict under 'w', not a tensor"),
        (b"]", "holds list under 'w', not a tensor"),
    ],
    ids=["storage", "storage type", "rebuild function", "OrderedDict", "list"],
)  # fmt: skip
def test_an_entry_that_is_no_tensor_is_named_as_the_file_names_it(value, message):
    assert _refusal(_file(("w", value), storages=FOUR)) == f"{REFUSED} {message}"


@pytest.mark.parametrize(
    "version, shown",
    [
        (2**63, "9223372036854775808"),  # 64 bits
        (-(2**63), "-9223372036854775808"),
        (2**64, "a very large integer"),  # 65 bits
        ("x" * 70, f"'{'x' * 60}... (70 characters)'"),
        (b"\x01", "b'\\x01'"),
        (2.5, "2.5"),
        (None, "None"),
        ([], "a list of 0 items"),
        ((1, 2), "a tuple of 2 items"),
        ({"a": 1}, "a dict of 1 items"),
        (collections.OrderedDict(), "an OrderedDict of 0 items"),
        ({1}, "a set"),
    ],
)
def test_a_value_is_shown_by_its_value_when_short_else_by_its_type(version, shown):
    data = pickle.dumps(torch_pickles.MAGIC_NUMBER, 2) + pickle.dumps(version, 4)
    assert _refusal(data) == f"{REFUSED} has protocol version {shown}, not 1001"


def test_a_long_entry_name_is_shown_cut():
    name = "w" * 70
    assert _refusal(_file((name, _int(1)))) == (
        f"{REFUSED} holds int under '{'w' * 60}... (70 characters)', not a tensor"
    )


def test_a_file_is_refused_in_one_line_naming_it(tmp_path):
    path = tmp_path / "encoder.pkl"
    with pytest.raises(ForeignModelError) as error:
        read_state_dict(path)
    assert str(error.value) == f"{path}: PyTorch state_dict file not found"
    path.write_bytes(b"")
    with pytest.raises(ForeignModelError) as error:
        read_state_dict(path)
    assert str(error.value) == f"{path}: PyTorch state_dict file is empty"


def test_a_file_of_exactly_its_bound_reads(tmp_path):
    path = tmp_path / "encoder.pkl"
    path.write_bytes(_legacy())
    size = len(_legacy())
    assert list(read_state_dict(path, max_bytes=size)) == ["w"]
    with pytest.raises(ForeignModelError) as error:
        read_state_dict(path, max_bytes=size - 1)
    assert str(error.value) == (
        f"{path}: {size:,} bytes, more than the {size - 1:,} a PyTorch state_dict file may have"
    )


def test_an_error_is_named_by_its_source_and_cut_to_one_short_line():
    assert _refusal(b"") == f"{LAYOUT} (pickle exhausted before seeing STOP)"
    assert _refusal(b"", source="encoder.pkl") == (
        "encoder.pkl: not a PyTorch state_dict file in PyTorch's legacy or zip layout (pickle "
        "exhausted before seeing STOP)"
    )
    data = bytearray(torch_pickles.zip_bytes({"w": np.ones(2, np.float32)}, folder="f" * 100))
    local = data.index(b"/data.pkl")  # the first: the member's local header, not the directory
    data[local + 1 : local + 9] = b"DATA.PKL"
    detail = f"File name in directory '{'f' * 100}/data.pkl' and header b'{'f' * 100}/DATA.PKL' "
    assert _refusal(bytes(data)) == f"{LAYOUT} ({detail[:120]})"


def test_a_pickle_opcode_no_state_dict_holds_is_refused():
    data = b"\x80\x05\x96" + (1).to_bytes(8, "little") + b"x."  # BYTEARRAY8
    assert _refusal(data) == (
        f"{REFUSED} uses the pickle opcode BYTEARRAY8, which a state_dict never holds"
    )


def test_a_memo_index_out_of_order_is_refused_in_one_exact_line():
    magic = pickle.dumps(torch_pickles.MAGIC_NUMBER, 2)
    assert _refusal(magic + b"\x80\x02]q\x00]q\x02.") == (
        f"{REFUSED} stores a value at memo index 2 after 1 values (a writer numbers them in order)"
    )


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x80\x02K\x05.", "does not start with PyTorch's magic number"),
        (pickle.dumps(torch_pickles.MAGIC_NUMBER, 2) + pickle.dumps(1001, 2)
         + pickle.dumps({"little_endian": False}, 2),
         "was written on a big-endian machine, or says nothing of its byte order"),
        (HEADER + _pickle(_state()) + pickle.dumps([1], 2),
         "has no list of storage keys after its object"),
        (HEADER + _pickle(_state()) + pickle.dumps({}, 2),
         "has no list of storage keys after its object"),
        (_file(("w", _tensor()), storages=FOUR, keys=[]),
         "lists other storages than its object refers to"),
        (_file(("w", _tensor()), storages=FOUR, keys=["k", "k"]),
         "lists other storages than its object refers to"),
        (_file(("w", _tensor()), storages=FOUR)[:-20], "ends before storage 'k'"),
        ((lambda d: d[:-24] + np.int64(-1).tobytes() + d[-16:])(_file(("w", _tensor()),
                                                                       storages=FOUR)),
         "has storage 'k' of -1 elements where its object says 4"),
        (_file(("w", _tensor()), storages=FOUR) + b"\x00", "has bytes after its last storage"),
    ],
    ids=["magic", "byte order", "keys of numbers", "keys not a list", "keys left out",
         "a key twice", "cut in a count", "a negative count", "trailing bytes"],
)  # fmt: skip
def test_a_legacy_file_out_of_its_layout_is_refused_in_one_exact_line(data, message):
    assert _refusal(data) == f"{REFUSED} {message}"


def test_bytes_after_the_last_storage_are_refused_after_one_is_read(tmp_path):
    path = tmp_path / "encoder.pkl"
    path.write_bytes(_file(("w", _tensor()), storages=FOUR) + b"\x00" * (32 << 20))
    outcome, peak = peak_bytes(read_state_dict, path)
    assert str(outcome) == (
        f"{path}: not loaded: the PyTorch state_dict file has bytes after its last storage"
    )
    assert peak < 1 << 20


def _rezipped(data, change):
    """The zip ``data`` written again with ``change(name, bytes) -> [(name, bytes)]``."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate it writes
        for name in source.namelist():
            for new_name, member in change(name, source.read(name)):
                target.writestr(new_name, member)
    return out.getvalue()


ONES = torch_pickles.zip_bytes({"w": np.ones(3, np.float32)})


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda n, d: [(n, d)] * 2, "(a zip) names one member twice"),
        (lambda n, d: [(n.replace("archive/", ""), d)], "(a zip) does not hold one folder, as "
         "torch.save writes it"),
        (lambda n, d: [(n if "version" not in n else "other/version", d)], "(a zip) does not "
         "hold one folder, as torch.save writes it"),
        (lambda n, d: [(n, d)] if "data.pkl" not in n else [], "(a zip) has no data.pkl"),
        (lambda n, d: [(n, d if "byteorder" not in n else b"big")], "(a zip) was written on a "
         "big-endian machine"),
        (lambda n, d: [(n, d if "byteorder" not in n else b"little" + b" " * 10)], "(a zip) was "
         "written on a big-endian machine"),
        (lambda n, d: [(n, d if "byteorder" not in n else b"little" + b" " * 11)], "(a zip) has a "
         "member 'archive/byteorder' larger than the file"),
    ],
    ids=["twice", "no folder", "two folders", "no data.pkl", "big-endian", "16 bytes", "17 bytes"],
)  # fmt: skip
def test_a_zip_out_of_torch_saves_layout_is_refused_in_one_exact_line(change, message):
    assert _refusal(_rezipped(ONES, change)) == f"{REFUSED} {message}"


@pytest.mark.parametrize("order", [b"little", b"little\n"])
def test_a_zips_byte_order_may_end_in_a_newline(order):
    data = _rezipped(ONES, lambda n, d: [(n, order if "byteorder" in n else d)])
    np.testing.assert_array_equal(parse_state_dict(data)["w"], [1, 1, 1])


def test_a_zips_missing_storage_is_named_cut_when_its_key_is_long():
    storage = torch_pickles.Storage(np.ones(3, np.float32), "k" * 70)
    data = torch_pickles.zip_bytes({"w": torch_pickles.Tensor(storage, 0, (3,), (1,))})
    data = _rezipped(data, lambda n, d: [] if "/data/" in n else [(n, d)])
    assert _refusal(data) == f"{REFUSED} (a zip) has no data/{'k' * 60}... (70 characters)"


def test_zip_storages_of_exactly_the_files_size_pass_the_total_bound():
    """The directory declares one stored storage of as many bytes as the file: not refused by
    the total (the read of a member declared longer than it is fails instead)."""
    ones = torch_pickles.zip_bytes({"w": np.ones(300, np.uint8)})
    length = len(ones)
    data = _rezipped(ones, lambda n, d: [(n, d.replace(b"M\x2c\x01", b"M" + length.to_bytes(
        2, "little")) if n.endswith("data.pkl") else d)])  # fmt: skip
    data = _with_declared_size(data, "archive/data/1000", length)
    assert len(data) == length
    message = _refusal(data)
    assert message.startswith(LAYOUT) and "in all" not in message, message


class _Member(io.RawIOBase):
    """A zip member that hands over ``size`` bytes whatever it declares; its reads recorded,
    a read of no bound failing (a compressed member may expand without end)."""

    def __init__(self, size, reads):
        self.left, self.reads = size, reads

    def readable(self):
        return True

    def read(self, n=-1):
        if n is None or n < 0:
            raise AssertionError(f"read({n!r}): a read of no bound")
        self.reads.append(n)
        taken = min(n, self.left)
        self.left -= taken
        return b"x" * taken


class _Archive:
    """What ``_member`` uses of a ``zipfile.ZipFile``: ``open(info)``."""

    def __init__(self, size):
        self.size, self.reads = size, []

    def open(self, info):
        return _Member(self.size, self.reads)


def test_a_zip_member_is_read_no_further_than_its_bound_plus_one_byte():
    info = zipfile.ZipInfo("archive/data.pkl")
    info.file_size = 10
    archive = _Archive(10)
    assert torch_state_dict._member(archive, info, 10) == b"x" * 10
    assert archive.reads == [11]
    archive = _Archive(1000)  # more than it declares
    with pytest.raises(torch_state_dict._Refused) as error:
        torch_state_dict._member(archive, info, 10)
    assert str(error.value) == "(a zip) has a member 'archive/data.pkl' larger than declared"
    assert archive.reads == [11]
    info.file_size = 11
    with pytest.raises(torch_state_dict._Refused) as error:
        torch_state_dict._member(archive, info, 10)
    assert str(error.value) == "(a zip) has a member 'archive/data.pkl' larger than the file"


@pytest.mark.parametrize(
    "entries, message",
    [
        (((_int(1), _tensor()),), "has an entry named 1, not a string"),
        ((("w", _tensor(stride=_int(1))),),
         "describes tensor 'w' with a size or stride that is not a tuple"),
        ((("w", _tensor(size=_int(4))),),
         "describes tensor 'w' with a size or stride that is not a tuple"),
        ((("w", _tensor(stride=(1, 1))),), "describes tensor 'w' with 1 sizes and 2 strides"),
        ((("w", _tensor(size=(1,) * 9, stride=(1,) * 9)),),
         "describes tensor 'w' with 9 sizes and 9 strides"),
        ((("w", _tensor(offset=-1)),), "describes tensor 'w' with a negative or non-integer size"),
        ((("w", _tensor(size=_tuple(b"G" + np.float64(2).astype(">f8").tobytes()))),),
         "describes tensor 'w' with a negative or non-integer size"),
        ((("w", _tensor(size=(3,), stride=(2,))),),
         "describes tensor 'w' (3,) beyond its storage of 4 elements"),
    ],
    ids=["a number as name", "a stride of no tuple", "a size of no tuple", "ranks that differ",
         "rank 9", "a negative offset", "a float size", "beyond its storage"],
)  # fmt: skip
def test_a_tensor_described_out_of_its_rules_is_refused_in_one_exact_line(entries, message):
    assert _refusal(_file(*entries, storages=FOUR)) == f"{REFUSED} {message}"


@pytest.mark.parametrize(
    "size, stride, expected",
    [
        ((1,) * 8, (1,) * 8, np.ones((1,) * 8)),  # the most dimensions a tensor may have
        ((2,), (2,), [1, 3]),
        ((3,), (0,), [1, 1, 1]),  # one value broadcast (PyTorch's expand)
        ((2, 2), (1, 2), [[1, 3], [2, 4]]),
    ],
)
def test_views_read_as_their_strides_say(size, stride, expected):
    read = parse_state_dict(_file(("w", _tensor(size=size, stride=stride)), storages=FOUR))
    np.testing.assert_array_equal(read["w"], expected)
    assert read["w"].shape == tuple(size)


def test_views_may_hold_four_times_their_storages_values_and_one_more():
    storage = torch_pickles.Storage(np.arange(4, dtype=np.float32), "1")
    views = {f"w{i}": torch_pickles.Tensor(storage, 0, (4,), (1,)) for i in range(4)}
    views["one"] = torch_pickles.Tensor(storage, 0, (1,), (1,))  # 4 * 4 + 1 values
    assert len(parse_state_dict(torch_pickles.legacy_bytes(views))) == 5
    views["one"] = torch_pickles.Tensor(storage, 0, (2,), (1,))
    assert _refusal(torch_pickles.legacy_bytes(views)) == (
        f"{REFUSED} holds more values in its tensors than its storages hold"
    )


def test_bfloat16_is_read_as_the_float32_of_its_bits():
    bits = np.array([0x3F80, 0xC000, 0x0000, 0x7F80, 0x3F81], "<u2")
    expected = np.array([1.0, -2.0, 0.0, np.inf, 1.0078125], np.float32)
    seen = []
    data = _file(("w", _tensor(storage=_pid(numel=5, kind="BFloat16Storage"), size=(5,))),
                 storages={"k": bits})  # fmt: skip
    read = parse_state_dict(data, check=seen.append)
    assert read["w"].dtype == np.float32
    np.testing.assert_array_equal(read["w"], expected)
    assert seen == [{"w": ((5,), np.dtype(np.float32))}]
