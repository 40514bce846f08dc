"""An official HDF5 weight file checked against its options file, without a model
(``elmo_tf.formats.weight_file``): the file opened as untrusted input, its links and storage,
every dataset's presence, shape, dtype and values, a code-point model's vocabulary datasets,
and the file written back. Every file is made with h5py under ``tmp_path``, from the tiny
model's weights (tests/fixtures/tiny) or the tiny ELMoForManyLangs model converted in memory.
"""

import dataclasses
import io
import os
import types
import warnings

import h5py
import numpy as np
import pytest
from support.foreign_models import EFML_TINY
from support.paths import TINY

from elmo_tf import checks
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import WeightFileError
from elmo_tf.foreign import efml_folder
from elmo_tf.formats import weight_file
from elmo_tf.kinds import efml_conversion
from elmo_tf.tokens import codepoints

SECRET = 1234.5  # what a crafted file tries to smuggle in from elsewhere
LIMIT = weight_file.MAX_CHUNK_BYTES  # 64 MiB
ITSELF = "a weight file must hold its data itself"


@pytest.fixture
def tiny():
    """The tiny model's config, read from its options file alone."""
    return ElmoConfig.from_file(TINY / "options.json")


@pytest.fixture
def efml():
    """``(config, arrays)`` of the tiny EFML model converted: a code-point model whose weight
    file holds a word embedding and the three vocabulary datasets."""
    return efml_conversion.convert(efml_folder.read_folder(EFML_TINY))


def _tiny_arrays():
    with h5py.File(TINY / "weights.hdf5", "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        return {name: f[name][...] for name in names}


def _write(path, arrays, edit=None):
    with h5py.File(path, "w") as f:
        for name, value in arrays.items():
            f.create_dataset(name, data=value)
        if edit is not None:
            edit(f)
    return path


def _tiny_file(tmp_path, edit=None):
    return _write(tmp_path / "weights.hdf5", _tiny_arrays(), edit)


def _replace(name, make):
    def edit(f):
        del f[name]
        make(f, name)

    return edit


def _dataset(data, **kwargs):
    return lambda f, name: f.create_dataset(name, data=data, **kwargs)


def _message(call, *args):
    with pytest.raises(WeightFileError) as info:
        call(*args)
    return str(info.value)


def _other_file(tmp_path):
    """Another HDF5 file, with a '/secret' of the shape of 'CNN/b_cnn_0' (8,)."""
    other = tmp_path / "other.hdf5"
    with h5py.File(other, "w") as f:
        f["secret"] = np.full([8], SECRET, np.float32)
        f["high/W_carry"] = np.full([48, 48], SECRET, np.float32)
    return other


def _time_dataset(chunked):
    """A dataset of HDF5's time type, which has no NumPy dtype."""

    def make(f, name):
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        if chunked:
            plist.set_chunk((8,))
        space = h5py.h5s.create_simple((8,))
        h5py.h5d.create(f.id, name.encode(), h5py.h5t.UNIX_D32LE.copy(), space, plist)

    return make


def _plugin_filter(f, name):
    """Blosc (32001), a plugin: optional, so HDF5 writes the dataset without it."""
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plist.set_chunk((8,))
    plist.set_filter(32001, h5py.h5z.FLAG_OPTIONAL, ())
    space = h5py.h5s.create_simple((8,))
    h5py.h5d.create(f.id, name.encode(), h5py.h5t.NATIVE_FLOAT, space, plist)
    f[name][...] = np.zeros(8, np.float32)


def _flip_first_stored_byte(path, name):
    """Corrupts the stored data of ``name`` (a chunked dataset with a fletcher32 checksum)."""
    with h5py.File(path, "r") as f:
        offset = f[name].id.get_chunk_info(0).byte_offset
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _read_error(path, name):
    """The first line of HDF5's error when ``name``'s data is read."""
    with h5py.File(path, "r") as f, pytest.raises(OSError) as info:
        f[name][...]
    return checks.first_line(info.value)


def _table(config):
    return [
        weight_file.WeightEntry(name, None, shape, weight_file._same, weight_file._same)
        for name, shape in weight_file.expected_datasets(config).items()
    ]


# The layout: names and shapes from the options alone.


def test_expected_datasets_are_the_official_files_names_and_shapes(tiny):
    expected = weight_file.expected_datasets(tiny)
    assert expected == {name: array.shape for name, array in _tiny_arrays().items()}
    assert expected["char_embed"] == (261, 16)  # the 262 ids less id 0
    assert list(expected)[:3] == ["char_embed", "CNN/W_cnn_0", "CNN/b_cnn_0"]
    assert list(expected)[-1] == "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"


def test_a_code_point_models_embeddings_have_no_row_for_id_0(efml):
    config, arrays = efml
    expected = weight_file.expected_datasets(config)
    assert (config.n_characters, config.n_words, config.word_embedding_dim) == (127, 33, 3)
    assert expected["char_embed"] == (126, 4) and expected["word_embed"] == (32, 3)
    assert expected["CNN_proj/W_proj"] == (3 + 14, 6)  # the word rows first
    assert expected == {n: a.shape for n, a in arrays.items() if not n.startswith("vocabulary/")}


def test_the_zero_row_helpers_add_and_drop_the_row_of_id_0():
    rows = np.array([[1, 2, 3], [4, 5, 6]], np.float16)
    with_zero = weight_file._with_zero_row(rows)
    assert with_zero.dtype == np.float16
    np.testing.assert_array_equal(with_zero, [[0, 0, 0], [1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(weight_file._without_zero_row(with_zero), rows)


# A good file passes; what each check dataset_reads.


def test_the_official_file_passes_every_check(tiny, dataset_reads):
    assert weight_file.check_structure(tiny, TINY / "weights.hdf5") is None
    assert dataset_reads == []  # metadata only
    assert weight_file.check_file(tiny, str(TINY / "weights.hdf5")) is None
    # every value read
    assert sorted(dataset_reads) == sorted(f"/{name}" for name in _tiny_arrays())


def test_check_file_reads_the_values_and_check_structure_only_the_metadata(
    tiny, tmp_path, dataset_reads
):
    def poison(f):
        f["CNN/b_cnn_0"][3] = np.nan

    path = _tiny_file(tmp_path, poison)
    dataset_reads.clear()
    weight_file.check_structure(tiny, path)
    assert dataset_reads == []
    message = _message(weight_file.check_file, tiny, path)
    assert message == f"{path}: dataset 'CNN/b_cnn_0' holds NaN or inf"


def test_a_float64_value_beyond_float32_is_refused_as_inf_without_a_warning(tiny, tmp_path):
    path = _tiny_file(tmp_path, _replace("CNN/b_cnn_0", _dataset(np.full([8], 1e39))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        message = _message(weight_file.check_file, tiny, path)
    assert message == f"{path}: dataset 'CNN/b_cnn_0' holds NaN or inf"


def test_values_are_read_as_float32(tiny):
    data = (TINY / "weights.hdf5").read_bytes()
    arrays, vocabulary = weight_file.parse_weight_file(tiny, data)
    assert vocabulary is None
    assert list(arrays) == list(weight_file.expected_datasets(tiny))
    for name, array in _tiny_arrays().items():
        assert arrays[name].dtype == np.float32
        np.testing.assert_array_equal(arrays[name], array, err_msg=name)


def test_arrays_in_memory_get_the_same_checks_as_a_file(tiny):
    arrays = {name: array.astype(np.float64) for name, array in _tiny_arrays().items()}
    checked = dict(weight_file._checked_arrays(arrays, "folder", _table(tiny)))
    assert [e.dataset for e in checked] == list(weight_file.expected_datasets(tiny))
    assert all(value.dtype == np.float32 for value in checked.values())
    arrays["CNN_proj/b_proj"] = np.full([16], np.inf)
    with pytest.raises(WeightFileError) as info:
        list(weight_file._checked_arrays(arrays, "folder", _table(tiny)))
    assert str(info.value) == "folder: dataset 'CNN_proj/b_proj' holds NaN or inf"


# char_embed (and word_embed) may hold the row of id 0 already: exactly one row more.


def test_char_embed_with_the_row_of_id_0_is_taken_as_it_is(tiny, tmp_path):
    rows = _tiny_arrays()["char_embed"]
    with_zero = np.concatenate([np.zeros_like(rows[:1]), rows])
    path = _tiny_file(tmp_path, _replace("char_embed", _dataset(with_zero)))
    assert weight_file.check_structure(tiny, path) is None
    assert weight_file.check_file(tiny, path) is None
    arrays, _ = weight_file.parse_weight_file(tiny, path.read_bytes())
    np.testing.assert_array_equal(arrays["char_embed"], with_zero)  # no second zero row


def test_word_embed_with_the_row_of_id_0_is_accepted(efml, tmp_path):
    config, arrays = efml
    rows = arrays["word_embed"]
    arrays = {**arrays, "word_embed": np.concatenate([np.zeros_like(rows[:1]), rows])}
    path = _write(tmp_path / "weights.hdf5", arrays)
    assert weight_file.check_file(config, path) is None


@pytest.mark.parametrize(
    "name, make, problem",
    [
        ("char_embed", _dataset(np.zeros([260, 16])), "has shape (260, 16), expected (261, 16)"),
        ("char_embed", _dataset(np.zeros([263, 16])), "has shape (263, 16), expected (261, 16)"),
        ("CNN/b_cnn_0", _dataset(np.zeros([9])), "has shape (9,), expected (8,)"),
        ("CNN/b_cnn_0", _dataset(np.float32(1)), "has shape (), expected (8,)"),
        ("CNN/b_cnn_0", _dataset(h5py.Empty("f4")), "has shape None, expected (8,)"),
        (
            "CNN_high_0/W_carry",
            _dataset(np.zeros([48, 40])),
            "has shape (48, 40), expected (48, 48)",
        ),
    ],
)
def test_a_dataset_of_another_shape_is_refused_naming_both_shapes(
    tiny, tmp_path, dataset_reads, name, make, problem
):
    path = _tiny_file(tmp_path, _replace(name, make))
    dataset_reads.clear()
    message = _message(weight_file.check_structure, tiny, path)
    assert message == f"{path}: dataset '{name}' {problem} for this options file"
    assert dataset_reads == []


@pytest.mark.parametrize(
    "make, problem",
    [
        (
            _dataset(np.arange(8, dtype=np.int32)),
            "dataset 'CNN/b_cnn_0' has dtype int32, expected float",
        ),
        (_dataset(np.array([b"x"] * 8)), "dataset 'CNN/b_cnn_0' has dtype |S1, expected float"),
        (lambda f, name: f.create_group(name), "missing dataset 'CNN/b_cnn_0'"),
        (lambda f, name: None, "missing dataset 'CNN/b_cnn_0'"),
    ],
)
def test_a_dataset_of_another_kind_or_dtype_is_refused(tiny, tmp_path, make, problem):
    path = _tiny_file(tmp_path, _replace("CNN/b_cnn_0", make))
    assert _message(weight_file.check_structure, tiny, path) == f"{path}: {problem}"


def test_a_dtype_numpy_cannot_hold_is_an_unreadable_dataset_metadata(tiny, tmp_path):
    path = _tiny_file(tmp_path, _replace("CNN/b_cnn_0", _time_dataset(chunked=False)))
    with h5py.File(path, "r") as f, pytest.raises(TypeError) as error:
        _ = f["CNN/b_cnn_0"].dtype
    assert _message(weight_file.check_structure, tiny, path) == (
        f"{path}: corrupt HDF5 weight file, cannot read a dataset's metadata "
        f"({checks.first_line(error.value)})"
    )


def test_data_that_fails_its_checksum_is_refused_naming_the_dataset(tiny, tmp_path):
    values = _tiny_arrays()["CNN/b_cnn_0"]
    make = _dataset(values, chunks=(8,), fletcher32=True)
    path = _flip_first_stored_byte(
        _tiny_file(tmp_path, _replace("CNN/b_cnn_0", make)), "CNN/b_cnn_0"
    )
    assert weight_file.check_structure(tiny, path) is None  # nothing read
    assert _message(weight_file.check_file, tiny, path) == (
        f"{path}: corrupt HDF5 weight file, cannot read dataset 'CNN/b_cnn_0' "
        f"({_read_error(path, 'CNN/b_cnn_0')})"
    )


# Links and storage: nothing may make HDF5 read another file or another dataset.


def _external_link(tmp_path):
    other = _other_file(tmp_path)
    edit = _replace(
        "CNN/b_cnn_0", lambda f, n: f.__setitem__(n, h5py.ExternalLink(str(other), "/secret"))
    )
    return edit, f"'CNN/b_cnn_0' is an external link (to '/secret' in {other}); {ITSELF}"


def _external_group_link(tmp_path):
    other = _other_file(tmp_path)
    edit = _replace(
        "CNN_high_0", lambda f, n: f.__setitem__(n, h5py.ExternalLink(str(other), "/high"))
    )
    return edit, f"'CNN_high_0' is an external link (to '/high' in {other}); {ITSELF}"


def _external_link_beside_the_datasets(tmp_path):
    other = _other_file(tmp_path)

    def edit(f):
        f["zz"] = h5py.ExternalLink(str(other), "/secret")

    return edit, f"'zz' is an external link (to '/secret' in {other}); {ITSELF}"


def _soft_link(tmp_path):
    edit = _replace("CNN/b_cnn_0", lambda f, n: f.__setitem__(n, h5py.SoftLink("/CNN/b_cnn_1")))
    return (
        edit,
        "'CNN/b_cnn_0' is a soft link (to '/CNN/b_cnn_1'); a weight file holds datasets only",
    )


def _external_storage(tmp_path):
    secret = tmp_path / "secret.bin"  # stands for /etc/passwd: raw bytes of another file
    secret.write_bytes(np.full([8], SECRET, np.float32).tobytes())

    def make(f, name):
        f.create_dataset(name, shape=(8,), dtype=np.float32, external=[(str(secret), 0, 32)])

    problem = "has external storage (its data is read from another file)"
    return _replace("CNN/b_cnn_0", make), f"'CNN/b_cnn_0' {problem}; {ITSELF}"


def _virtual_dataset(tmp_path):
    other = _other_file(tmp_path)

    def make(f, name):
        layout = h5py.VirtualLayout(shape=(8,), dtype=np.float32)
        layout[:] = h5py.VirtualSource(str(other), "secret", shape=(8,))
        f.create_virtual_dataset(name, layout)

    problem = "is a virtual dataset (its data comes from other datasets or files)"
    return _replace("CNN/b_cnn_0", make), f"'CNN/b_cnn_0' {problem}; {ITSELF}"


@pytest.mark.parametrize(
    "craft",
    [_external_link, _external_group_link, _external_link_beside_the_datasets, _soft_link,
     _external_storage, _virtual_dataset],
)  # fmt: skip
def test_links_and_storage_outside_the_dataset_are_refused_before_any_read(
    tiny, tmp_path, dataset_reads, craft
):
    edit, problem = craft(tmp_path)
    path = _tiny_file(tmp_path, edit)
    dataset_reads.clear()
    assert _message(weight_file.check_structure, tiny, path) == f"{path}: {problem}"
    assert _message(weight_file.check_file, tiny, path) == f"{path}: {problem}"
    assert dataset_reads == []


def test_a_link_of_another_kind_is_refused_by_its_class_name():
    class UserDefinedLink:
        pass

    class Group:  # answers as h5py's Group.get would for a link kind it does not know
        def get(self, name, getlink=False):
            return UserDefinedLink()

    problem = weight_file._link_problem(Group(), "x")
    assert problem == "is a UserDefinedLink; a weight file holds datasets only"


def _visit_order(path):
    with h5py.File(path, "r") as f:
        names = []
        f.visit_links(names.append)
    return names


@pytest.fixture
def visited(monkeypatch):
    """The links whose target ``_link_problem`` looked at, in order."""
    names = []
    original = weight_file._link_problem

    def recording(f, name):
        names.append(name)
        return original(f, name)

    monkeypatch.setattr(weight_file, "_link_problem", recording)
    return names


def test_the_visit_stops_at_the_first_refused_link(tiny, tmp_path, visited):
    edit, problem = _soft_link(tmp_path)
    path = _tiny_file(tmp_path, edit)
    assert _message(weight_file.check_structure, tiny, path) == f"{path}: {problem}"
    order = _visit_order(path)
    assert visited == order[: order.index("CNN/b_cnn_0") + 1] and len(visited) < len(order)


def test_a_link_whose_target_fails_to_open_is_one_line_and_stops_the_visit(tiny, tmp_path, visited):
    """The chunked time-type dataset fails inside the visit (its dtype): that error, as an
    unreadable structure, not HDF5's SystemError; nothing after it is looked at."""
    path = _tiny_file(tmp_path, _replace("CNN/b_cnn_0", _time_dataset(chunked=True)))
    with h5py.File(path, "r") as f, pytest.raises(TypeError) as error:
        _ = f["CNN/b_cnn_0"].dtype
    assert _message(weight_file.check_structure, tiny, path) == (
        f"{path}: corrupt HDF5 weight file, cannot read its structure "
        f"({checks.first_line(error.value)})"
    )
    order = _visit_order(path)
    assert visited == order[: order.index("CNN/b_cnn_0") + 1]


def test_a_file_whose_link_table_is_corrupt_has_an_unreadable_structure(tiny, tmp_path):
    path = tmp_path / "corrupt.hdf5"
    path.write_bytes((TINY / "weights.hdf5").read_bytes().replace(b"HEAP", b"JUNK"))
    message = _message(weight_file.check_structure, tiny, path)
    assert message.startswith(f"{path}: corrupt HDF5 weight file, cannot read its structure (")
    assert "\n" not in message


# Chunks and filters: checked from the metadata, every dataset of the file (the table's or not).


def _huge(shape, dtype):
    """Declared, never written: gzip chunks of ``shape`` take a few hundred bytes on disk."""
    return lambda f, name: f.create_dataset(
        name, shape=shape, dtype=dtype, chunks=shape, compression="gzip", fillvalue=0
    )


def _with_extra(make):
    def edit(f):
        make(f, "extra")

    return edit


def test_chunked_and_compressed_storage_within_bounds_is_accepted(tiny, tmp_path):
    arrays = _tiny_arrays()

    def edit(f):
        for name, options in [
            ("CNN/b_cnn_0", dict(chunks=(8,), compression="gzip", shuffle=True, fletcher32=True)),
            ("CNN/W_cnn_0", dict(chunks=(1, 1, 16, 8), compression="lzf")),  # chunks == shape
            ("CNN/W_cnn_1", dict(chunks=(1, 2, 16, 8), scaleoffset=0)),
        ]:
            del f[name]
            f.create_dataset(name, data=arrays[name], **options)
        _huge((LIMIT,), np.int8)(f, "extra/at_the_limit")  # LIMIT bytes in one chunk
        f.create_dataset("extra/empty", shape=(0,), maxshape=(None,), chunks=(1,), dtype="f4")

    path = _tiny_file(tmp_path, edit)
    assert weight_file.check_file(tiny, path) is None
    read, _ = weight_file.parse_weight_file(tiny, path.read_bytes())
    np.testing.assert_array_equal(read["CNN/b_cnn_0"], arrays["CNN/b_cnn_0"])


@pytest.mark.parametrize(
    "edit, problem",
    [
        (
            _replace("CNN/b_cnn_0", _dataset(np.zeros(8, np.float32), maxshape=(None,),
                                             chunks=(1 << 20,), compression="gzip")),
            "'CNN/b_cnn_0' has chunks (1048576,) larger than its shape (8,)",
        ),
        (
            _replace("CNN/W_cnn_0", _dataset(np.zeros([1, 1, 16, 8], np.float32),
                                             maxshape=(None, 1, 16, 8), chunks=(2, 1, 16, 8))),
            "'CNN/W_cnn_0' has chunks (2, 1, 16, 8) larger than its shape (1, 1, 16, 8)",
        ),
        (
            _with_extra(_huge((LIMIT + 1,), np.int8)),
            "'extra' has chunks of 67,108,865 bytes uncompressed, more than 67,108,864",
        ),
        (
            _replace("CNN/b_cnn_0", _huge((20_000_000,), np.float32)),
            "'CNN/b_cnn_0' has chunks of 80,000,000 bytes uncompressed, more than 67,108,864",
        ),
        (
            _replace("CNN/b_cnn_0", _plugin_filter),
            "'CNN/b_cnn_0' is stored with HDF5 filter 32001, not one that h5py ships",
        ),
    ],
)  # fmt: skip
def test_storage_that_costs_more_than_the_file_or_needs_a_plugin_is_refused(
    tiny, tmp_path, dataset_reads, edit, problem
):
    path = _tiny_file(tmp_path, edit)
    assert path.stat().st_size < 10**6
    dataset_reads.clear()
    assert _message(weight_file.check_structure, tiny, path) == f"{path}: {problem}"
    assert dataset_reads == []


def test_a_filter_this_hdf5_cannot_decode_is_refused_by_name(tiny, tmp_path, monkeypatch):
    make = _dataset(np.zeros(8, np.float32), chunks=(8,), compression="gzip")
    path = _tiny_file(tmp_path, _replace("CNN/b_cnn_0", make))
    available = h5py.h5z.filter_avail
    monkeypatch.setattr(
        h5py.h5z, "filter_avail", lambda code: code != h5py.h5z.FILTER_DEFLATE and available(code)
    )
    assert _message(weight_file.check_structure, tiny, path) == (
        f"{path}: 'CNN/b_cnn_0' is stored with the gzip filter, which this HDF5 cannot decode"
    )


# Opening the file: one line for anything that is not an HDF5 file.


def test_what_is_not_an_hdf5_file_is_refused_in_one_line(tiny, tmp_path):
    empty, text = tmp_path / "empty.hdf5", tmp_path / "text.hdf5"
    empty.write_bytes(b"")
    text.write_text("this is not HDF5")
    with pytest.raises(OSError) as error:
        h5py.File(text, "r")
    cases = [
        (tmp_path / "absent.hdf5", "weight file not found"),
        (tmp_path, "is a directory, not a weight file"),
        (empty, "weight file is empty"),
        (text, f"not a readable HDF5 weight file ({checks.first_line(error.value)})"),
    ]
    for path, problem in cases:
        assert _message(weight_file.check_structure, tiny, path) == f"{path}: {problem}"
        assert _message(weight_file.open_untrusted, path) == f"{path}: {problem}"


def test_open_untrusted_gives_the_open_file_once_its_links_passed(tmp_path):
    with weight_file.open_untrusted(TINY / "weights.hdf5") as f:
        assert isinstance(f, h5py.File) and f.mode == "r"
        np.testing.assert_array_equal(f["CNN/b_cnn_0"][...], _tiny_arrays()["CNN/b_cnn_0"])
    edit, problem = _soft_link(tmp_path)
    path = _tiny_file(tmp_path, edit)
    assert _message(weight_file.open_untrusted, os.fspath(path)) == f"{path}: {problem}"
    with h5py.File(path, "a"):  # the refused file was closed: it opens for writing
        pass


def test_the_bytes_of_a_file_that_is_not_hdf5_are_refused_in_one_line(tiny):
    data = (TINY / "weights.hdf5").read_bytes()[:1000]
    with pytest.raises(OSError) as error:
        h5py.File(io.BytesIO(data), "r")
    expected = f"not a readable HDF5 weight file ({checks.first_line(error.value)})"
    assert _message(weight_file.parse_weight_file, tiny, data) == f"weight file: {expected}"
    assert _message(weight_file.parse_weight_file, tiny, data, "upload") == f"upload: {expected}"


# A code-point model's vocabulary datasets: bounded by the options before anything is read.


def test_a_code_point_models_file_passes_with_its_vocabulary(efml, tmp_path, dataset_reads):
    config, arrays = efml
    path = _write(tmp_path / "weights.hdf5", arrays)
    dataset_reads.clear()
    assert weight_file.check_structure(config, path) is None
    assert dataset_reads == []
    assert weight_file.check_file(config, path) is None
    assert "/vocabulary/char_codepoints" in dataset_reads
    read, vocabulary = weight_file.parse_weight_file(config, path.read_bytes())
    np.testing.assert_array_equal(vocabulary.word_offsets, arrays["vocabulary/word_offsets"])
    assert set(read) == set(weight_file.expected_datasets(config))


@pytest.mark.parametrize(
    "name, value, problem",
    [
        ("vocabulary/words", None,
         "missing dataset 'vocabulary/words' (a code-point model's table)"),
        ("vocabulary/char_codepoints", h5py.Empty("i4"),
         "dataset 'vocabulary/char_codepoints' has shape None, expected one axis of at most 127"),
        ("vocabulary/char_codepoints", np.zeros([2, 3], np.int32),
         "dataset 'vocabulary/char_codepoints' has shape (2, 3), expected one axis of at most 127"),
        ("vocabulary/char_codepoints", np.zeros([128], np.int32),
         "dataset 'vocabulary/char_codepoints' has shape (128,), expected one axis of at most 127"),
        ("vocabulary/word_offsets", np.zeros([35], np.int64),
         "dataset 'vocabulary/word_offsets' has shape (35,), expected one axis of at most 34"),
        ("vocabulary/words", np.zeros([8449], np.uint8),
         "dataset 'vocabulary/words' has shape (8449,), expected one axis of at most 8448"),
        ("vocabulary/char_codepoints", np.zeros([127], np.float32),
         "dataset 'vocabulary/char_codepoints' has dtype float32, expected integers"),
    ],
)  # fmt: skip
def test_a_vocabulary_dataset_of_another_kind_or_size_is_refused(
    efml, tmp_path, dataset_reads, name, value, problem
):
    config, arrays = efml
    arrays = {k: v for k, v in arrays.items() if k != name}
    path = _write(tmp_path / "weights.hdf5", arrays)
    if value is not None:
        with h5py.File(path, "a") as f:
            f.create_dataset(name, data=value)
    dataset_reads.clear()
    assert _message(weight_file.check_structure, config, path) == f"{path}: {problem}"
    assert dataset_reads == []
    message = _message(weight_file.parse_weight_file, config, path.read_bytes(), "upload")
    assert message == f"upload: {problem}"


def test_a_vocabulary_dataset_that_is_a_group_is_missing(efml, tmp_path):
    config, arrays = efml
    edit = _replace("vocabulary/words", lambda f, name: f.create_group(name))
    path = _write(tmp_path / "weights.hdf5", arrays, edit)
    assert _message(weight_file.check_structure, config, path) == (
        f"{path}: missing dataset 'vocabulary/words' (a code-point model's table)"
    )


def test_the_vocabulary_values_are_checked_by_check_file_only(efml, tmp_path):
    config, arrays = efml
    codes = np.full([127], 65, np.int32)  # id 0 and the specials given a code point
    path = _write(tmp_path / "weights.hdf5", {**arrays, "vocabulary/char_codepoints": codes})
    assert weight_file.check_structure(config, path) is None
    broken = {**arrays, "vocabulary/char_codepoints": codes}
    expected = _message(codepoints.CodepointVocabulary.from_arrays, config, broken, str(path))
    assert expected.startswith(f"{path}: dataset 'vocabulary/char_codepoints' ")
    assert _message(weight_file.check_file, config, path) == expected


def test_vocabulary_data_that_fails_its_checksum_is_refused_naming_the_dataset(efml, tmp_path):
    config, arrays = efml
    name = "vocabulary/char_codepoints"

    def edit(f):
        del f[name]
        f.create_dataset(name, data=arrays[name], chunks=(127,), fletcher32=True)

    path = _flip_first_stored_byte(_write(tmp_path / "weights.hdf5", arrays, edit), name)
    assert weight_file.check_structure(config, path) is None
    assert _message(weight_file.check_file, config, path) == (
        f"{path}: corrupt HDF5 weight file, cannot read dataset '{name}' "
        f"({_read_error(path, name)})"
    )


def test_a_model_without_words_allows_no_word_offsets(efml, tmp_path):
    config, arrays = efml
    config = dataclasses.replace(config, word_embedding_dim=0, n_words=0, special_words=None)
    weights = {name: np.zeros(shape, np.float32)
               for name, shape in weight_file.expected_datasets(config).items()}  # fmt: skip
    vocabulary = {
        "vocabulary/char_codepoints": arrays["vocabulary/char_codepoints"],
        "vocabulary/words": np.zeros([0], np.uint8),
        "vocabulary/word_offsets": np.zeros([0], np.int64),
    }
    path = _write(tmp_path / "weights.hdf5", {**weights, **vocabulary})
    assert weight_file.check_file(config, path) is None
    vocabulary["vocabulary/word_offsets"] = np.zeros([1], np.int64)
    path = _write(tmp_path / "weights.hdf5", {**weights, **vocabulary})
    assert _message(weight_file.check_structure, config, path) == (
        f"{path}: dataset 'vocabulary/word_offsets' has shape (1,), expected one axis of at most 0"
    )


# Writing: every entry's value as float32 in the file's layout, and a code-point model's tables.


class _Variable:
    def __init__(self, value):
        self.value = value

    def numpy(self):
        return self.value


def _model(uses_codepoints, vocabulary=None):
    """What ``save_weights`` uses of a model: its table (``weight_table``, replaced), its
    config and its token mapper."""
    table = [
        weight_file.WeightEntry(
            "char_embed", _Variable(np.arange(6.0).reshape(3, 2)), (2, 2),
            weight_file._with_zero_row, weight_file._without_zero_row,
        ),
        weight_file.WeightEntry(
            "CNN/W_cnn_0", _Variable(np.ones([1, 2], np.float16)), (1, 1, 2), weight_file._same,
            lambda v: v[None],
        ),
    ]  # fmt: skip
    return types.SimpleNamespace(
        table=table,
        config=types.SimpleNamespace(uses_codepoints=uses_codepoints),
        token_mapper=types.SimpleNamespace(vocabulary=vocabulary),
    )


def _saved(path):
    with h5py.File(path, "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        return {name: f[name][...] for name in names}


def test_save_weights_writes_every_entry_as_float32_in_the_files_layout(tmp_path, monkeypatch):
    monkeypatch.setattr(weight_file, "weight_table", lambda model: model.table)
    weight_file.save_weights(_model(False), tmp_path / "weights.hdf5")
    saved = _saved(tmp_path / "weights.hdf5")
    assert sorted(saved) == ["CNN/W_cnn_0", "char_embed"]
    assert all(value.dtype == np.float32 for value in saved.values())
    np.testing.assert_array_equal(saved["char_embed"], [[2, 3], [4, 5]])  # id 0's row dropped
    np.testing.assert_array_equal(saved["CNN/W_cnn_0"], np.ones([1, 1, 2]))


def test_save_weights_writes_a_code_point_models_vocabulary(tmp_path, monkeypatch):
    monkeypatch.setattr(weight_file, "weight_table", lambda model: model.table)
    codes = np.array([-1, 97, 98], np.int32)
    vocabulary = types.SimpleNamespace(arrays=lambda: {"vocabulary/char_codepoints": codes})
    weight_file.save_weights(_model(True, vocabulary), tmp_path / "weights.hdf5")
    saved = _saved(tmp_path / "weights.hdf5")
    assert sorted(saved) == ["CNN/W_cnn_0", "char_embed", "vocabulary/char_codepoints"]
    np.testing.assert_array_equal(saved["vocabulary/char_codepoints"], codes)
    assert saved["vocabulary/char_codepoints"].dtype == np.int32


def test_a_code_point_model_without_its_character_table_is_not_written(tmp_path, monkeypatch):
    monkeypatch.setattr(weight_file, "weight_table", lambda model: model.table)
    path = tmp_path / "weights.hdf5"
    assert _message(weight_file.save_weights, _model(True), path) == (
        f"{path}: not written: this code-point model has no character table (load its weights "
        "first)"
    )
    assert list(tmp_path.iterdir()) == []
