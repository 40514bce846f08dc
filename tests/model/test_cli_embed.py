"""``elmo-tf embed``, run in-process through ``elmo_tf.cli.main.main`` on the tiny model."""

import json
import os

import h5py
import numpy as np
import pytest
from support.numerics import assert_reordered

import elmo_tf
from elmo_tf.cli import embed
from elmo_tf.cli.main import main

# A normal line with extra spaces, an empty line, a non-ASCII line.
LINES = ["The  cat sat on the mat .  ", "", "Zürich café 中文 😀"]


SENTENCES = [line.split() for line in LINES]


TWO_P = 32


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "sentences.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def expected(tiny_model):
    """The library's outputs for ``SENTENCES``: the reference for every format."""
    return tiny_model.embed(SENTENCES)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, input_file, tiny_files):
    """Runs the CLI once per format (batch size 2: several batches, one all empty)."""

    def run(output_format):
        out_dir = tmp_path_factory.mktemp(f"out_{output_format}")
        output = out_dir / "elmo.hdf5"
        options, weights = tiny_files
        argv = ["embed", str(input_file), str(output), f"--{output_format}"]
        status = main(argv + ["--options", str(options), "--weights", str(weights)])
        assert status == 0
        assert os.listdir(out_dir) == ["elmo.hdf5"]  # no temp file left behind
        with h5py.File(output, "r") as f:
            return {key: f[key][...] for key in f} | {
                "sentence_to_index": f["sentence_to_index"].asstr()[...]
            }

    return {fmt: run(fmt) for fmt in embed.FORMATS}


def expected_layers(expected, i):
    n = len(SENTENCES[i])
    word_emb = expected["word_emb"][i, :n]
    lstm = [expected[f"lstm_outputs{k}"][i, :n] for k in (1, 2)]
    return np.stack([np.concatenate([word_emb, word_emb], axis=-1), *lstm])


@pytest.mark.numerics
def test_all_writes_every_layer(embedded, expected):
    data = embedded["all"]
    assert set(data) == {"0", "1", "2", "sentence_to_index"}
    assert data["0"].shape == (3, 7, TWO_P)
    assert data["1"].shape == (3, 0, TWO_P)
    assert data["2"].shape == (3, 4, TWO_P)
    for i in range(3):
        assert data[str(i)].dtype == np.float32
        assert_reordered(data[str(i)], expected_layers(expected, i))
    # Layer 0 is the token layer duplicated, as AllenNLP wrote it.
    np.testing.assert_array_equal(data["2"][0, :, :16], data["2"][0, :, 16:])
    assert np.abs(data["2"]).max() > 0


@pytest.mark.numerics
def test_top_writes_last_lstm_layer(embedded, expected):
    data = embedded["top"]
    assert [data[k].shape for k in "012"] == [(7, TWO_P), (0, TWO_P), (4, TWO_P)]
    for i in range(3):
        assert_reordered(data[str(i)], expected_layers(expected, i)[2])


@pytest.mark.numerics
def test_average_writes_mean_of_layers(embedded, expected):
    data = embedded["average"]
    assert [data[k].shape for k in "012"] == [(7, TWO_P), (0, TWO_P), (4, TWO_P)]
    for i in range(3):
        mean = expected_layers(expected, i).mean(axis=0)
        assert_reordered(data[str(i)], mean)


def test_sentence_to_index(embedded):
    # Each line as written, only its leading and trailing whitespace dropped: the key of
    # AllenNLP's command (line.strip()), which README promises ("the sentence as written").
    for data in embedded.values():
        assert data["sentence_to_index"].shape == (1,)
        assert json.loads(data["sentence_to_index"][0]) == {
            "The  cat sat on the mat .": "0",
            "": "1",
            "Zürich café 中文 😀": "2",
        }


def test_sentence_to_index_of_token_lists_joins_them_by_one_space(tmp_path, tiny_model):
    from elmo_tf.formats.embedding_file import write_embeddings

    path = tmp_path / "out.hdf5"
    write_embeddings(tiny_model, [["a", "b"], " a\u3000b  c\t"], path)
    with h5py.File(path) as f:
        index = json.loads(f["sentence_to_index"].asstr()[0])
        assert index == {"a b": "0", "a\u3000b  c": "1"}
        assert f["1"].shape == (3, 3, TWO_P)  # the line split on every whitespace


def test_default_format_is_all(tmp_path, input_file, tiny_files):
    output = tmp_path / "out.hdf5"
    options, weights = tiny_files
    argv = ["embed", str(input_file), str(output), "--options", str(options)]
    assert main(argv + ["--weights", str(weights), "--batch-size", "1"]) == 0
    with h5py.File(output, "r") as f:
        assert f["0"].shape == (3, 7, TWO_P)


def error_line(capsys):
    """The single stderr line of a failed run."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("elmo-tf embed: error: ")
    return err[0]


@pytest.mark.numerics
@pytest.mark.parametrize(
    ("budget", "batches"),
    [("8", [(1, 7), (2, 4)]), ("0", [(3, 7)])],  # 7 tokens alone, then 4 and 0; 0: no budget
)
def test_max_batch_tokens_reaches_the_batches(
    budget, batches, tmp_path, input_file, tiny_files, expected, monkeypatch
):
    real = elmo_tf.ELMo.embed_batches
    seen = []

    def recorded(self, *args, **kwargs):
        for indices, outputs in real(self, *args, **kwargs):
            seen.append((len(indices), outputs["sequence_len"].max(initial=0)))
            yield indices, outputs

    monkeypatch.setattr(elmo_tf.ELMo, "embed_batches", recorded)
    options, weights = tiny_files
    output = tmp_path / "o.hdf5"
    argv = ["embed", str(input_file), str(output), "--options", str(options)]
    argv += ["--weights", str(weights), "--batch-size", "3", "--max-batch-tokens", budget]
    assert main(argv) == 0
    assert seen == batches
    with h5py.File(output, "r") as f:
        for i in range(len(SENTENCES)):
            assert_reordered(f[str(i)][...], expected_layers(expected, i))


def test_interrupted_run_leaves_no_file(tmp_path, input_file, tiny_files, capsys, monkeypatch):
    real = elmo_tf.ELMo.embed_batches

    def interrupted(self, *args, **kwargs):
        batches = real(self, *args, **kwargs)
        yield next(batches)
        raise KeyboardInterrupt

    monkeypatch.setattr(elmo_tf.ELMo, "embed_batches", interrupted)
    options, weights = tiny_files
    argv = ["embed", str(input_file), str(tmp_path / "o.hdf5"), "--options", str(options)]
    assert main(argv + ["--weights", str(weights), "--batch-size", "1"]) == 130
    assert error_line(capsys) == "elmo-tf embed: error: interrupted"
    assert os.listdir(tmp_path) == []
