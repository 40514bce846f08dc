"""The official HDF5 layout: loading, shape checks, and writing back."""

import json
import os
import time

import h5py
import numpy as np
import pytest
from support.paths import FIXTURES, TINY

import elmo_tf
from elmo_tf.config import ElmoConfig
from elmo_tf.formats.weight_file import WeightFileError, weight_table

SECRET = np.float32(1234.5)  # what a crafted file tries to smuggle in from elsewhere


def _copy_weights(tmp_path, edit):
    path = tmp_path / "weights.hdf5"
    with h5py.File(TINY / "weights.hdf5", "r") as src, h5py.File(path, "w") as dst:
        for name in _datasets(src):
            dst.create_dataset(name, data=src[name][...])
        edit(dst)
    return path


def _datasets(f):
    names = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def test_table_covers_every_dataset_once(tiny_model):
    with h5py.File(TINY / "weights.hdf5", "r") as f:
        names = sorted(_datasets(f))
    table = weight_table(tiny_model)
    assert sorted(e.dataset for e in table) == names
    assert len({id(e.variable) for e in table}) == len(table) == len(tiny_model.weights) - 2


def test_loaded_values(tiny_model):
    with h5py.File(TINY / "weights.hdf5", "r") as f:
        char_embed = f["char_embed"][...]
        w_cnn = f["CNN/W_cnn_2"][...]
        w0 = f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"][...]
    encoder = tiny_model.character_encoder
    embeddings = encoder.char_embedding.embeddings.numpy()
    assert not embeddings[0].any()  # id 0: padded token position
    np.testing.assert_array_equal(embeddings[1:], char_embed)
    np.testing.assert_array_equal(encoder.cnn.kernels[2].numpy(), w_cnn[0])
    np.testing.assert_array_equal(tiny_model.bilstm.backward_cells[1].kernel.numpy(), w0)


def test_save_then_load_is_identical(tiny_model, tiny_files, tmp_path):
    out = tmp_path / "saved.hdf5"
    elmo_tf.save_weights(tiny_model, out)
    with h5py.File(TINY / "weights.hdf5", "r") as a, h5py.File(out, "r") as b:
        assert sorted(_datasets(a)) == sorted(_datasets(b))
        for name in _datasets(a):
            np.testing.assert_array_equal(a[name][...], b[name][...], err_msg=name)
    reloaded = elmo_tf.load_pretrained(tiny_files[0], out)
    for x, y in zip(tiny_model.weights, reloaded.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert [p.name for p in tmp_path.iterdir()] == ["saved.hdf5"]  # no temp file left


def test_char_embed_with_262_rows_is_accepted(tiny_files, tmp_path):
    def add_zero_row(f):
        rows = f["char_embed"][...]
        del f["char_embed"]
        f.create_dataset("char_embed", data=np.concatenate([np.zeros_like(rows[:1]), rows]))

    model = elmo_tf.load_pretrained(tiny_files[0], _copy_weights(tmp_path, add_zero_row))
    reference = elmo_tf.load_pretrained(*tiny_files)
    np.testing.assert_array_equal(
        model.character_encoder.char_embedding.embeddings.numpy(),
        reference.character_encoder.char_embedding.embeddings.numpy(),
    )


def test_missing_dataset(tiny_files, tmp_path):
    def drop(f):
        del f["RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"]

    path = _copy_weights(tmp_path, drop)
    with pytest.raises(WeightFileError, match="missing dataset 'RNN_0/RNN/MultiRNNCell/Cell1/"):
        elmo_tf.load_pretrained(tiny_files[0], path)


def test_wrong_shape_names_dataset_expected_and_found(tiny_files, tmp_path):
    def reshape(f):
        del f["CNN_high_0/W_carry"]
        f.create_dataset("CNN_high_0/W_carry", data=np.zeros([48, 40], np.float32))

    path = _copy_weights(tmp_path, reshape)
    with pytest.raises(WeightFileError) as info:
        elmo_tf.load_pretrained(tiny_files[0], path)
    message = str(info.value)
    assert "'CNN_high_0/W_carry'" in message and "(48, 40)" in message and "(48, 48)" in message
    assert str(path) in message


def test_mismatched_options_and_weights(tmp_path):
    """The bilm fixture's options with the tiny weights: a clear shape error, model untouched."""
    with pytest.raises(WeightFileError, match=r"'char_embed' has shape \(261, 16\), expected"):
        elmo_tf.load_pretrained(FIXTURES / "bilm_fixture" / "options.json", TINY / "weights.hdf5")


def test_bad_load_leaves_model_unchanged(tiny_model, tmp_path):
    before = [w.numpy().copy() for w in tiny_model.weights]

    def break_last(f):
        del f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"]
        f.create_dataset("RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B", data=np.zeros([7]))

    with pytest.raises(WeightFileError):
        elmo_tf.load_weights(tiny_model, _copy_weights(tmp_path, break_last))
    for x, w in zip(before, tiny_model.weights):
        np.testing.assert_array_equal(x, w.numpy())


def test_non_finite_and_unreadable_files(tiny_files, tmp_path):
    def poison(f):
        f["CNN/b_cnn_0"][0] = np.nan

    with pytest.raises(WeightFileError, match="'CNN/b_cnn_0' holds NaN"):
        elmo_tf.load_pretrained(tiny_files[0], _copy_weights(tmp_path, poison))
    with pytest.raises(WeightFileError, match="weight file not found"):
        elmo_tf.load_pretrained(tiny_files[0], tmp_path / "absent.hdf5")
    text = tmp_path / "text.hdf5"
    text.write_text("this is not HDF5")
    with pytest.raises(WeightFileError, match="not a readable HDF5 weight file"):
        elmo_tf.load_pretrained(tiny_files[0], text)
    truncated = tmp_path / "truncated.hdf5"
    truncated.write_bytes((TINY / "weights.hdf5").read_bytes()[:5000])
    with pytest.raises(WeightFileError, match=str(truncated)):
        elmo_tf.load_pretrained(tiny_files[0], truncated)


def test_loader_at_published_small_shapes(small_official_files):
    """Random weights at the real 2x1024_128_2048cnn_1xhighway shapes, made by the reference
    generator: every dataset lands in its variable, and saving gives the same file back."""
    options, weights = small_official_files
    assert elmo_tf.ElmoConfig.from_file(options) == elmo_tf.preset("small")
    model = elmo_tf.load_pretrained(options, weights)
    with h5py.File(weights, "r") as f:
        for entry in weight_table(model):
            np.testing.assert_array_equal(
                entry.to_file(entry.variable.numpy()), f[entry.dataset][...], err_msg=entry.dataset
            )
    out = model.embed([["A", "small", "test", "."]])
    assert out["elmo"].shape == (1, 4, 256) and out["word_emb"].shape == (1, 4, 128)
    assert np.isfinite(out["elmo"]).all()
    assert json.loads(options.read_text())["lstm"]["dim"] == 1024


# Files are untrusted input: a crafted weight file must not make HDF5 read another file (or
# another dataset), and nothing may be read before its structure and every shape pass.


def _secret_hdf5(tmp_path):
    """Another HDF5 file whose '/secret' has the shape of 'CNN/b_cnn_0' (8,)."""
    other = tmp_path / "other.hdf5"
    with h5py.File(other, "w") as f:
        f["secret"] = np.full([8], SECRET)
        group = f.create_group("high")
        for name, shape in [("W_carry", (48, 48)), ("W_transform", (48, 48))]:
            group[name] = np.full(shape, SECRET)
        for name in ("b_carry", "b_transform"):
            group[name] = np.full([48], SECRET)
    return other


def _replace(name, make):
    def edit(f):
        del f[name]
        make(f, name)

    return edit


def _external_link(tmp_path):
    other = _secret_hdf5(tmp_path)
    return _replace(
        "CNN/b_cnn_0", lambda f, n: f.__setitem__(n, h5py.ExternalLink(other, "/secret"))
    )


def _external_group_link(tmp_path):
    other = _secret_hdf5(tmp_path)
    return _replace("CNN_high_0", lambda f, n: f.__setitem__(n, h5py.ExternalLink(other, "/high")))


def _soft_link(tmp_path):
    return _replace("CNN/b_cnn_0", lambda f, n: f.__setitem__(n, h5py.SoftLink("/CNN/b_cnn_1")))


def _external_storage(tmp_path):
    secret = tmp_path / "secret.bin"  # stands for /etc/passwd: raw bytes of another file
    secret.write_bytes(np.full([8], SECRET).tobytes())

    def make(f, name):
        f.create_dataset(name, shape=(8,), dtype=np.float32, external=[(str(secret), 0, 32)])

    return _replace("CNN/b_cnn_0", make)


def _virtual_dataset(tmp_path):
    other = _secret_hdf5(tmp_path)

    def make(f, name):
        layout = h5py.VirtualLayout(shape=(8,), dtype=np.float32)
        layout[:] = h5py.VirtualSource(str(other), "secret", shape=(8,))
        f.create_virtual_dataset(name, layout)

    return _replace("CNN/b_cnn_0", make)


def _chunks_larger_than_the_dataset(tmp_path):
    def make(f, name):
        f.create_dataset(
            name, data=np.zeros(8, np.float32), maxshape=(None,), chunks=(1 << 20,),
            compression="gzip",
        )  # fmt: skip

    return _replace("CNN/b_cnn_0", make)


def _huge_chunks(tmp_path):
    def make(f, name):  # 80 MB of zeros in one gzip chunk: a few hundred bytes on disk
        f.create_dataset(
            name, shape=(20_000_000,), dtype=np.float32, chunks=(20_000_000,),
            compression="gzip", fillvalue=0.0,
        )  # fmt: skip

    return _replace("CNN/b_cnn_0", make)


def _plugin_filter(tmp_path):
    def make(f, name):  # Blosc (32001), a plugin: optional, so HDF5 writes without it
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_chunk((8,))
        plist.set_filter(32001, h5py.h5z.FLAG_OPTIONAL, ())
        space = h5py.h5s.create_simple((8,))
        h5py.h5d.create(f.id, name.encode(), h5py.h5t.NATIVE_FLOAT, space, plist)
        f[name][...] = np.zeros(8, np.float32)

    return _replace("CNN/b_cnn_0", make)


@pytest.mark.parametrize(
    "craft, message",
    [
        (_chunks_larger_than_the_dataset, "'CNN/b_cnn_0' has chunks \\(1048576,\\) larger than"),
        (_huge_chunks, "'CNN/b_cnn_0' has chunks of 80,000,000 bytes uncompressed, more than"),
        (_plugin_filter, "'CNN/b_cnn_0' is stored with HDF5 filter 32001, not one that h5py"),
        (_external_link, "'CNN/b_cnn_0' is an external link \\(to '/secret' in .*other.hdf5\\)"),
        (_external_group_link, "'CNN_high_0' is an external link \\(to '/high' in"),
        (_soft_link, "'CNN/b_cnn_0' is a soft link \\(to '/CNN/b_cnn_1'\\)"),
        (_external_storage, "'CNN/b_cnn_0' has external storage"),
        (_virtual_dataset, "'CNN/b_cnn_0' is a virtual dataset"),
    ],
)
def test_links_and_foreign_storage_are_refused_before_any_read(
    tiny_model, tmp_path, dataset_reads, craft, message
):
    path = _copy_weights(tmp_path, craft(tmp_path))
    name = "CNN_high_0/W_carry" if craft is _external_group_link else "CNN/b_cnn_0"
    storage = (_chunks_larger_than_the_dataset, _huge_chunks, _plugin_filter)
    with h5py.File(path, "r") as f:  # the crafted file does lead plain h5py to the secret
        expected = 0.0 if craft in storage else SECRET
        expected = f["CNN/b_cnn_1"][0] if craft is _soft_link else expected
        assert f[name][(0,) * f[name].ndim] == expected
    dataset_reads.clear()
    before = [w.numpy().copy() for w in tiny_model.weights]
    with pytest.raises(WeightFileError, match=message) as info:
        elmo_tf.load_weights(tiny_model, path)
    assert str(info.value).startswith(f"{path}: ")
    assert dataset_reads == []  # refused from the structure alone: no data was read
    for x, w in zip(before, tiny_model.weights):
        np.testing.assert_array_equal(x, w.numpy())
    assert not any((w.numpy() == SECRET).any() for w in tiny_model.weights)


@pytest.mark.parametrize(
    "path", [TINY / "weights.hdf5", FIXTURES / "bilm_fixture" / "lm_weights.hdf5"]
)
def test_official_files_hold_hard_links_to_plain_datasets_only(path):
    links = []
    with h5py.File(path, "r") as f:
        f.visit_links(lambda name: links.append((name, type(f.get(name, getlink=True)))))
        datasets = [f[name] for name in _datasets(f)]
        assert all(not d.is_virtual for d in datasets)
        assert all(d.id.get_create_plist().get_external_count() == 0 for d in datasets)
    assert links and {kind for _, kind in links} == {h5py.HardLink}


def test_no_data_is_read_before_every_dataset_is_checked(tiny_model, tmp_path, dataset_reads):
    """The last dataset in the table has the wrong shape: nothing before it was read."""
    last = weight_table(tiny_model)[-1].dataset
    path = _copy_weights(tmp_path, _replace(last, lambda f, n: f.create_dataset(n, data=[1.0])))
    dataset_reads.clear()
    with pytest.raises(WeightFileError, match=f"'{last}' has shape \\(1,\\)"):
        elmo_tf.load_weights(tiny_model, path)
    assert dataset_reads == []


def test_absurd_declared_size_is_refused_without_allocating(tiny_model, tmp_path, dataset_reads):
    def huge(f, name):  # 4 TiB declared, nothing written: the file stays small
        f.create_dataset(name, shape=(2**40,), dtype=np.float32, chunks=(1024,))

    path = _copy_weights(tmp_path, _replace("CNN/b_cnn_0", huge))
    assert path.stat().st_size < 10**6
    dataset_reads.clear()
    start = time.perf_counter()
    with pytest.raises(WeightFileError, match="'CNN/b_cnn_0' has shape \\(1099511627776,\\)"):
        elmo_tf.load_weights(tiny_model, path)
    assert time.perf_counter() - start < 5 and dataset_reads == []


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda f, n: f.create_dataset(n, data=np.arange(8, dtype=np.int32)), "dtype int32"),
        (lambda f, n: f.create_dataset(n, data=np.array([b"x"] * 8)), "dtype \\|S1"),
        (lambda f, n: f.create_dataset(n, data=h5py.Empty("f4")), "has shape None, expected"),
        (
            lambda f, n: f.create_dataset(n, data=np.float32(1)),
            "has shape \\(\\), expected \\(8,\\)",
        ),
        (lambda f, n: f.create_dataset(n, data=np.full([8], 1e39)), "holds NaN or inf"),
        (lambda f, n: f.create_group(n), "missing dataset 'CNN/b_cnn_0'"),
    ],
)
def test_dataset_kind_dtype_and_range(tiny_model, tmp_path, make, message):
    path = _copy_weights(tmp_path, _replace("CNN/b_cnn_0", make))
    with pytest.raises(WeightFileError, match=message) as info:
        elmo_tf.load_weights(tiny_model, path)
    assert str(path) in str(info.value) and "'CNN/b_cnn_0'" in str(info.value)


def _set(index, value):
    def poison(rows):
        rows[index] = value
        return rows

    return poison


@pytest.mark.parametrize(
    "poison, message",
    [
        (_set((5, 3), np.nan), "'char_embed' holds NaN or inf"),
        (_set((0, 0), np.inf), "'char_embed' holds NaN or inf"),
        (lambda rows: rows.astype(np.int64), "'char_embed' has dtype int64, expected float"),
    ],
)
def test_char_embed_with_262_rows_is_checked_like_261(tiny_model, tmp_path, poison, message):
    """One validation path: the 262-row variant gets the dtype and NaN checks too."""

    def add_zero_row(f):
        rows = f["char_embed"][...]
        del f["char_embed"]
        f.create_dataset("char_embed", data=poison(np.concatenate([rows[:1] * 0, rows])))

    path = _copy_weights(tmp_path, add_zero_row)
    with h5py.File(path, "r") as f:
        assert f["char_embed"].shape == (262, 16)
    before = tiny_model.character_encoder.char_embedding.embeddings.numpy().copy()
    with pytest.raises(WeightFileError, match=message) as info:
        elmo_tf.load_weights(tiny_model, path)
    assert str(path) in str(info.value)
    np.testing.assert_array_equal(
        before, tiny_model.character_encoder.char_embedding.embeddings.numpy()
    )


def _corrupt(path):
    data = (TINY / "weights.hdf5").read_bytes().replace(b"HEAP", b"JUNK")  # local heap headers
    path.write_bytes(data)
    return path


def test_weight_file_faults_are_one_line_naming_the_file(tiny_model, tmp_path):
    text = tmp_path / "text.hdf5"
    text.write_text("this is not HDF5")
    empty = tmp_path / "empty.hdf5"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.hdf5"
    truncated.write_bytes((TINY / "weights.hdf5").read_bytes()[:100_000])
    cases = [
        (tmp_path / "absent.hdf5", "weight file not found"),
        (tmp_path, "is a directory, not a weight file"),
        (empty, "weight file is empty"),
        (text, "not a readable HDF5 weight file \\(.*file signature not found"),
        (TINY / "options.json", "not a readable HDF5 weight file"),
        (truncated, "not a readable HDF5 weight file \\(.*truncated file"),
        (
            _corrupt(tmp_path / "corrupt.hdf5"),
            "corrupt HDF5 weight file, cannot read its structure",
        ),
    ]
    for path, message in cases:
        with pytest.raises(WeightFileError, match=message) as info:
            elmo_tf.load_weights(tiny_model, path)
        assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value), path


def test_load_pretrained_passes_size_limits(tiny_files):
    with pytest.raises(
        elmo_tf.errors.OptionsError, match="'lstm.dim' is 32, above the dimension limit of 31"
    ):
        elmo_tf.load_pretrained(*tiny_files, size_limits={"dimension": 31})
    model = elmo_tf.load_pretrained(*tiny_files, size_limits={"parameters": 30_848})
    assert model.config.parameter_count == 30_848


def test_embed_refuses_a_weight_file_that_points_at_another_file(tiny_files, tmp_path, capsys):
    """The issue's case: `elmo-tf embed` with external storage naming a secret file."""
    from elmo_tf.cli.main import main

    weights = _copy_weights(tmp_path, _external_storage(tmp_path))
    source, output = tmp_path / "in.txt", tmp_path / "out.hdf5"
    source.write_text("A sentence .\n")
    argv = ["embed", str(source), str(output), "--options", str(tiny_files[0])]
    assert main(argv + ["--weights", str(weights)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"elmo-tf embed: error: {weights}: 'CNN/b_cnn_0' has external storage (its data is "
        "read from another file); a weight file must hold its data itself"
    ]
    assert not output.exists()


@pytest.mark.parametrize("craft", ["external_link", "huge_chunks"])
def test_a_hostile_softmax_file_is_refused_like_weights(tmp_path, capsys, craft):
    """softmax.hdf5 (``elmo-tf evaluate``, ``train --init-from``) goes through the same checks
    as a weight file (``open_untrusted``): a crafted one is one line, nothing of it read."""
    import shutil

    from elmo_tf.cli.main import main
    from elmo_tf.presets.bundled import model_directory

    directory = tmp_path / "model"
    shutil.copytree(model_directory(), directory)
    with h5py.File(directory / "softmax.hdf5", "a") as f:
        bias = f["softmax/b"]
        shape, dtype = bias.shape, bias.dtype
        del f["softmax/b"]
        if craft == "external_link":
            other = tmp_path / "other.hdf5"
            with h5py.File(other, "w") as o:
                o["secret"] = np.full(shape, SECRET, dtype)
            f["softmax/b"] = h5py.ExternalLink(str(other), "/secret")
        else:
            f.create_dataset(
                "softmax/b", shape=(20_000_000,), dtype=np.float32, chunks=(20_000_000,),
                compression="gzip", fillvalue=0.0,
            )  # fmt: skip
    held_out = tmp_path / "held_out.txt"
    held_out.write_text("The Congress passed the bill .\n", encoding="utf-8")
    assert main(["evaluate", str(directory), str(held_out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    expected = "is an external link" if craft == "external_link" else "has chunks of 80,000,000"
    assert len(err) == 1 and expected in err[0] and "softmax/b" in err[0], err


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tiny_model, tmp_path):
    fifo = tmp_path / "weights.hdf5"
    os.mkfifo(fifo)
    with pytest.raises(WeightFileError, match="weights.hdf5: is a named pipe, not a weight file"):
        elmo_tf.load_weights(tiny_model, fifo)


def _as_float64(source, target):
    """A copy of the weight file ``source`` with every dataset stored as float64 (a file
    bilm-tf's tools can write: the loader reads it)."""
    with h5py.File(source) as src, h5py.File(target, "w") as dst:

        def copy(name, item):
            if isinstance(item, h5py.Dataset):
                dst.create_dataset(name, data=item[...].astype(np.float64))

        src.visititems(copy)
    return target


@pytest.mark.parametrize("shape", ["tiny", "small"])
def test_a_float64_weight_file_fits_the_download_bound(shape, tmp_path, small_official_files):
    """A URL's weight file is downloaded up to ``weight_file_bound``: float64 values and
    HDF5's layout fit under it, in a shape whose float64 values alone are past twice the
    float32 size plus the layout allowance (small: 109 MB) as in one under it (tiny)."""
    from elmo_tf.presets import weight_file_bound

    options, weights = (TINY / "options.json", TINY / "weights.hdf5")
    if shape == "small":
        options, weights = small_official_files
    config = ElmoConfig.from_file(options)
    doubled = _as_float64(weights, tmp_path / "weights64.hdf5")
    size = os.path.getsize(doubled)
    assert size > 8 * config.parameter_count  # every value stored as float64
    assert size <= weight_file_bound(config)
    if shape == "tiny":  # and it loads, with the float32 file's values
        model = elmo_tf.load_pretrained(options, doubled)
        reference = elmo_tf.load_pretrained(options, weights)
        for a, b in zip(model.get_weights(), reference.get_weights()):
            np.testing.assert_array_equal(a, b)
