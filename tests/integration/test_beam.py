"""``elmo_tf.beam``: the model handlers and ``python -m elmo_tf.beam`` on the tiny model.

The pipeline runs on ``FnApiRunner``, once per handler and output format, over three files
holding blank, CRLF, non-ASCII, undecodable, NUL and over-long lines. Its records are compared
with what ``elmo-tf embed`` writes for the same files. The Keras handler's job and the job
whose workers fail run in ``multi_processing`` mode with two worker processes (a real
multi-process Beam job, as on one machine of a cluster); the others in this process
(``in_memory``), which runs the same transforms without starting workers.
"""

import codecs
import glob
import json
import os
import pathlib

import h5py
import numpy as np
import pytest
from support.beam_corpus import FILES, MAX_TOKENS, N_LINES, RUNNER, write_corpus
from support.numerics import assert_reordered
from support.paths import ROOT

from elmo_tf.beam import ElmoModelHandler, ElmoSavedModelHandler, records
from elmo_tf.cli import beam as beam_command
from elmo_tf.cli.beam import run_job as run_beam_job
from elmo_tf.cli.main import main as elmo_tf_main
from elmo_tf.formats.embedding_file import layer_stack, select_layers
from elmo_tf.models import length_batches

IN_PROCESS = ["--runner=FnApiRunner", "--direct_running_mode=in_memory"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory, tiny_files):
    options, weights = tiny_files
    model = ["--options", str(options), "--weights", str(weights)]
    return embed_reference(tmp_path_factory.mktemp("embed"), model)


def embed_reference(out, model_flags):
    """``elmo-tf embed``'s HDF5 datasets per (file, line, layers), bad lines blanked first.

    ``elmo-tf embed`` stops on a bad line, so its input is each file with the dead-letter
    lines made empty: the line numbers stay those of the original file.
    """
    result = {}
    for name, (data, dead) in FILES.items():
        lines = data.removeprefix(codecs.BOM_UTF8).splitlines()
        clean = out / name
        clean.write_bytes(b"\n".join(b"" if i in dead else line for i, line in enumerate(lines)))
        for layers in ("all", "average"):
            h5 = out / f"{name}.{layers}.hdf5"
            argv = ["embed", str(clean), str(h5), f"--{layers}"]
            assert elmo_tf_main(argv + model_flags) == 0
            with h5py.File(h5, "r") as f:
                for i in range(len(lines)):
                    if i not in dead:
                        result[name, i, layers] = f[str(i)][...]
                        result[name, i, "tokens"] = lines[i].decode("utf-8").split()
    return result


@pytest.fixture(scope="module")
def workers_import_this_tree():
    """Beam's worker processes import ``elmo_tf`` from this checkout, like the test does."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        yield


def run_job(corpus, output, *flags, runner=RUNNER):
    argv = ["--input", str(corpus / "*.txt"), "--output", str(output)]
    argv += ["--max-tokens-per-line", str(MAX_TOKENS), *flags, *runner]
    return run_beam_job(argv)


@pytest.fixture(scope="module")
def keras_parquet(corpus, tiny_files, tmp_path_factory, workers_import_this_tree):
    options, weights = tiny_files
    output = tmp_path_factory.mktemp("keras_parquet") / "elmo"
    counts = run_job(corpus, output, "--options", str(options), "--weights", str(weights))
    return output, counts


@pytest.fixture(scope="module")
def saved_model_dir(tiny_export):
    return tiny_export  # holds version 1; the handler picks it


@pytest.fixture(scope="module")
def saved_model_tfrecord(corpus, saved_model_dir, tmp_path_factory, workers_import_this_tree):
    output = tmp_path_factory.mktemp("saved_model_tfrecord") / "elmo"
    flags = ["--saved-model", str(saved_model_dir), "--layers", "average"]
    counts = run_job(
        corpus, output, *flags, "--format", "tfrecord", "--num-shards", "3", runner=IN_PROCESS
    )
    return output, counts


@pytest.fixture(scope="module")
def int8_file(request):
    pytest.importorskip("onnxruntime")  # the [onnx] extra
    return request.getfixturevalue("tiny_int8_onnx")


@pytest.fixture(scope="module")
def onnx_reference(int8_file, tmp_path_factory):
    """``elmo-tf embed --onnx`` on the int8 file, a sentence per call (``--batch-size 1``)."""
    flags = ["--onnx", str(int8_file), "--batch-size", "1"]
    return embed_reference(tmp_path_factory.mktemp("embed_onnx"), flags)


def read_parquet(output):
    import pyarrow.parquet as pq

    paths = sorted(glob.glob(f"{output}-*-of-*.parquet"))
    assert paths, "no Parquet shard written"
    table = pq.read_table(paths)
    assert table.schema.equals(records.parquet_schema())
    return table.to_pylist()


def read_tfrecord(output):
    import tensorflow as tf

    paths = sorted(glob.glob(f"{output}-*-of-*.tfrecord"))
    assert len(paths) == 3  # --num-shards 3

    def parse(serialized):
        features = tf.io.parse_single_example(serialized, records.tfrecord_features())
        shape = tf.sparse.to_dense(features["shape"])
        vectors = tf.reshape(tf.io.decode_raw(features["embeddings"], tf.float32), shape)
        tokens = tf.sparse.to_dense(features["tokens"], default_value="")
        return features["source"], features["line"], tokens, vectors

    rows = []
    for source, line, tokens, vectors in tf.data.TFRecordDataset(paths).map(parse):
        rows.append(
            {
                "source": source.numpy().decode(),
                "line": int(line),
                "tokens": [t.decode() for t in tokens.numpy()],
                "embeddings": vectors.numpy(),
            }
        )
    return rows


def read_dead_letters(output):
    letters = []
    for path in glob.glob(f"{output}-dead-letters-*-of-*.jsonl"):
        with open(path, encoding="utf-8") as f:
            letters += [json.loads(line) for line in f]
    return letters


def check_job(rows, output, counts, corpus, reference, layers):
    """Every (source, line) once, in records or dead letters, with embed's numbers."""
    letters = read_dead_letters(output)
    keys = [(os.path.basename(r["source"]), r["line"]) for r in rows]
    dead = [(os.path.basename(d["source"]), d["line"]) for d in letters]
    assert len(set(keys)) == len(keys) and len(set(dead)) == len(dead)
    assert sorted(keys + dead) == sorted((n, i) for n in FILES for i in range(N_LINES[n]))
    assert {r["source"] for r in rows} == {str(corpus / name) for name in FILES}
    expected_dead = {(n, i): why for n, (_, d) in FILES.items() for i, why in d.items()}
    assert sorted(dead) == sorted(expected_dead)
    for letter in letters:
        assert expected_dead[os.path.basename(letter["source"]), letter["line"]] in letter["reason"]
    n_tokens = 0
    for row in rows:
        name = os.path.basename(row["source"])
        assert row["tokens"] == reference[name, row["line"], "tokens"]
        expected = reference[name, row["line"], layers]
        vectors = np.asarray(row["embeddings"], np.float32).reshape(expected.shape)
        if "shape" in row:
            assert list(row["shape"]) == list(expected.shape)
        assert_reordered(vectors, expected, err_msg=f"{name}:{row['line']}")
        n_tokens += len(row["tokens"])
    assert counts == {
        "embedded_lines": len(rows),
        "embedded_tokens": n_tokens,
        "dead_letters": len(expected_dead),
    }


@pytest.mark.numerics
def test_keras_handler_parquet(keras_parquet, corpus, reference):
    output, counts = keras_parquet
    rows = read_parquet(output)
    check_job(rows, output, counts, corpus, reference, "all")
    blank = [r for r in rows if os.path.basename(r["source"]) == "a.txt" and r["line"] == 1]
    assert blank[0]["tokens"] == [] and blank[0]["shape"] == [3, 0, 32]


@pytest.mark.numerics
def test_saved_model_handler_tfrecord(saved_model_tfrecord, corpus, reference):
    output, counts = saved_model_tfrecord
    check_job(read_tfrecord(output), output, counts, corpus, reference, "average")


@pytest.mark.numerics
def test_onnx_handler_writes_what_embed_onnx_writes(int8_file, onnx_reference, corpus, tmp_path):
    """``--onnx`` on the int8 file, a sentence per ONNX Runtime call as in the reference: the
    same rows, so the same numbers (an int8 file quantises a call's activations from their
    own range, so the sentences sharing a call move its numbers within the file's fidelity)."""
    output = tmp_path / "elmo"
    flags = ["--onnx", str(int8_file), "--inner-batch-size", "1"]
    counts = run_job(corpus, output, *flags, runner=IN_PROCESS)
    rows = read_parquet(output)
    check_job(rows, output, counts, corpus, onnx_reference, "all")
    for row in rows:
        expected = onnx_reference[os.path.basename(row["source"]), row["line"], "all"]
        vectors = np.asarray(row["embeddings"], np.float32).reshape(expected.shape)
        np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


SENTENCES = [["The", "cat", "sat", "."], [], ["Zürich", "café"], ["a"] * 9]


@pytest.fixture(scope="module")
def embedded(tiny_model):
    return tiny_model.embed(SENTENCES)


def keyed_run(handler):
    from apache_beam.ml.inference.base import KeyedModelHandler

    keyed = KeyedModelHandler(handler)
    batch = [(f"key{i}", tokens) for i, tokens in enumerate(SENTENCES)]
    return keyed.run_inference(batch, keyed.load_model())


@pytest.mark.numerics
@pytest.mark.parametrize("signature", [None, "tokens", "default"])
def test_handlers_give_embed_outputs(signature, tiny_files, saved_model_dir, embedded, monkeypatch):
    """Under KeyedModelHandler, each key gets its sentence's outputs of ``model.embed``."""
    real_batches, sizes = length_batches.length_batches, []

    def recorded(*args, **kwargs):
        batches = real_batches(*args, **kwargs)
        sizes.extend(len(b) for b in batches)
        return batches

    monkeypatch.setattr(length_batches, "length_batches", recorded)
    options, weights = tiny_files
    if signature is None:
        # A budget of 4 padded tokens: [9] and [4] alone, then [2, 0] (inner_batch_size 2).
        handler = ElmoModelHandler(
            options_file=options, weight_file=weights, inner_batch_size=2, max_batch_tokens=4
        )
    else:
        handler = ElmoSavedModelHandler(
            saved_model_dir, signature=signature, inner_batch_size=2, max_batch_tokens=4
        )
    results = keyed_run(handler)
    assert sizes == [1, 1, 2]  # the budget reached the batching
    assert [key for key, _ in results] == [f"key{i}" for i in range(len(SENTENCES))]
    for i, (_, prediction) in enumerate(results):
        n = len(SENTENCES[i])
        assert prediction.example == SENTENCES[i]
        outputs = prediction.inference
        assert outputs["sequence_len"] == n
        assert sorted(outputs) == sorted(embedded)
        for key, value in embedded.items():
            if key != "sequence_len":
                assert_reordered(outputs[key], value[i] if value.ndim == 2 else value[i, :n])


@pytest.mark.numerics
def test_onnx_handler_gives_the_files_outputs(int8_file):
    """Under KeyedModelHandler, each key gets its sentence's outputs of ``OnnxModel.embed``
    on the same file, bit for bit (the same calls on the same rows)."""
    from elmo_tf.beam import ElmoOnnxModelHandler
    from elmo_tf.export.onnx import OnnxModel

    expected = OnnxModel(int8_file).embed(SENTENCES)
    for i, (key, prediction) in enumerate(keyed_run(ElmoOnnxModelHandler(int8_file))):
        n = len(SENTENCES[i])
        assert key == f"key{i}" and prediction.inference["sequence_len"] == n
        for name, value in expected.items():
            if name != "sequence_len":
                row = value[i] if value.ndim == 2 else value[i, :n]
                np.testing.assert_array_equal(prediction.inference[name], row, err_msg=name)


def test_a_bad_onnx_file_fails_the_command_before_the_job(int8_file, corpus, tmp_path):
    from elmo_tf.errors import ModelFileError

    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(int8_file.read_bytes()[:1000])
    argv = ["--input", str(corpus / "*.txt"), "--output", str(tmp_path / "out")]
    args, _ = beam_command.build_parser().parse_known_args([*argv, "--onnx", str(truncated)])
    with pytest.raises(ModelFileError, match="ONNX Runtime cannot load it"):
        beam_command.model_handler(args, beam_command.check_flags(args))


@pytest.mark.numerics
@pytest.mark.parametrize("layers", ["all", "top", "average"])
def test_handler_layers_match_embed_file(layers, tiny_files, embedded):
    options, weights = tiny_files
    handler = ElmoModelHandler(options_file=options, weight_file=weights, layers=layers)
    stack = layer_stack(embedded, 2)
    for i, (_, prediction) in enumerate(keyed_run(handler)):
        expected = select_layers(stack[:, i, : len(SENTENCES[i])], layers)
        assert prediction.inference.dtype == np.float32
        assert_reordered(prediction.inference, expected)


@pytest.mark.parametrize("kind", ["keras", "saved_model", "onnx"])
def test_every_flag_reaches_the_model_handler(kind, tiny_files, saved_model_dir, corpus, request):
    """What the command line is told arrives in the handler the workers run (a flag dropped on
    the way would pass silently otherwise)."""
    options, weights = tiny_files
    model = {
        "keras": lambda: ["--options", str(options), "--weights", str(weights)],
        "saved_model": lambda: ["--saved-model", str(saved_model_dir), "--signature", "default"],
        "onnx": lambda: ["--onnx", str(request.getfixturevalue("int8_file"))],
    }[kind]()
    argv = [
        "--input", str(corpus / "*.txt"), "--output", "out", *model, "--layers", "top",
        "--max-batch-tokens", "77", "--inner-batch-size", "5", "--min-batch-size", "3",
        "--max-batch-size", "9",
    ]  # fmt: skip
    args, _ = beam_command.build_parser().parse_known_args(argv)
    handler = beam_command.model_handler(args, beam_command.check_flags(args))
    assert (handler.layers, handler.max_batch_tokens, handler.inner_batch_size) == ("top", 77, 5)
    batching = handler.batch_elements_kwargs()
    assert (batching["min_batch_size"], batching["max_batch_size"]) == (3, 9)
    if kind == "saved_model":
        assert handler.signature == "default"


def test_overlapping_patterns_and_an_earlier_job_under_the_same_output(
    corpus, saved_model_dir, saved_model_tfrecord, tmp_path, capsys, workers_import_this_tree
):
    """A file matched by two patterns is read once; the shards of an earlier job with more
    shards are removed once this job has written its own, and the removal is said."""
    earlier, _ = saved_model_tfrecord  # 3 shards of records
    output = tmp_path / "elmo"
    for path in glob.glob(f"{earlier}-*"):
        target = tmp_path / os.path.basename(path).replace(earlier.name, "elmo", 1)
        target.write_bytes(pathlib.Path(path).read_bytes())
        os.utime(target, (1_000_000_000, 1_000_000_000))  # written long before this job
    unrelated = tmp_path / "elmo-notes.txt"  # not a shard: left alone
    unrelated.write_text("mine\n", encoding="utf-8")
    argv = ["--input", str(corpus / "*.txt"), "--input", str(corpus / "[ab].txt")]
    argv += ["--output", str(output), "--saved-model", str(saved_model_dir)]
    argv += ["--layers", "average", "--format", "tfrecord", "--num-shards", "1"]
    counts = run_beam_job([*argv, "--max-tokens-per-line", str(MAX_TOKENS), *IN_PROCESS])
    dead = sum(len(d) for _, d in FILES.values())
    assert counts["embedded_lines"] == sum(N_LINES.values()) - dead  # a.txt and b.txt once
    shards = sorted(os.path.basename(p) for p in glob.glob(f"{output}-*.tfrecord"))
    assert shards == ["elmo-00000-of-00001.tfrecord"]
    assert "removed 3 shards of an earlier job" in capsys.readouterr().out
    assert unrelated.read_text(encoding="utf-8") == "mine\n"


def test_a_failed_job_leaves_no_temporary_directory(
    corpus, tmp_path, tiny_files, workers_import_this_tree
):
    """A job whose workers fail (a weight file that does not load) ends in an error and
    leaves nothing beside its output prefix."""
    options, _ = tiny_files
    bad = tmp_path / "weights.hdf5"
    bad.write_bytes(b"not hdf5" * 100)
    out = tmp_path / "out"
    out.mkdir()
    argv = ["--input", str(corpus / "*.txt"), "--output", str(out / "elmo"),
            "--options", str(options), "--weights", str(bad), *RUNNER]  # fmt: skip
    with pytest.raises(Exception):  # noqa: B017 - any failure of the job; the point is below
        run_beam_job(argv)
    assert os.listdir(out) == []
