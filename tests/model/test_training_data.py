"""Training's data: the vocabulary, the corpus reader's refusals, the framed sentence streams,
evaluation windows and the candidate sampler."""

import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_reordered
from support.paths import BILM
from support.training import (
    FAST,
    make_corpus,
    run_cli,
)

import elmo_tf
from elmo_tf.training import data
from elmo_tf.training.corpus import CorpusError, read_corpus
from elmo_tf.training.log_uniform_sampler import LogUniformSampler
from elmo_tf.training.vocabulary import Vocabulary, VocabularyError


def test_vocabulary_order_min_count_and_round_trip(tmp_path):
    counts = {"b": 3, "a": 3, "c": 5, "rare": 1, "<S>": 9}
    vocab = Vocabulary.from_counts(counts, min_count=2)
    # specials first, then by count, ties in code-point order; rare tokens and literal
    # specials not listed
    assert vocab.tokens == ("<S>", "</S>", "<UNK>", "c", "a", "b")
    assert vocab.ids(["a", "rare"]) == [4, vocab.unk_id]
    path = tmp_path / "vocab.txt"
    vocab.save(path)
    assert path.read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\nc\na\nb\n"
    assert Vocabulary.from_file(path).tokens == vocab.tokens


def test_build_vocab_command(tmp_path, capsys):
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "1.txt").write_text("x y y\nz y\n", encoding="utf-8")
    (tmp_path / "shards" / "2.txt").write_text("x q\n", encoding="utf-8")
    out = tmp_path / "vocab.txt"
    status, _, err = run_cli(
        ["build-vocab", tmp_path / "shards", "-o", out, "--min-count", "2"], capsys
    )
    assert status == 0, err
    assert out.read_text(encoding="utf-8").split() == ["<S>", "</S>", "<UNK>", "y", "x"]
    assert "from 7 tokens" in err and "rate 0.2857" in err  # q and z: 2 of 7 tokens

    # its own input as output (directly, inside a directory, or through a link): refused
    # before it is read, the corpus left as it was
    (tmp_path / "link.txt").symlink_to(tmp_path / "shards" / "2.txt")
    for output in (tmp_path / "shards" / "1.txt", tmp_path / "link.txt"):
        status, _, err = run_cli(["build-vocab", tmp_path / "shards", "-o", output], capsys)
        refusal = f"{output}: is an input file; choose another output name"
        assert status == 1 and err == f"elmo-tf build-vocab: error: {refusal}\n"
    assert (tmp_path / "shards" / "1.txt").read_text(encoding="utf-8") == "x y y\nz y\n"
    assert (tmp_path / "shards" / "2.txt").read_text(encoding="utf-8") == "x q\n"


def test_vocabulary_loader_accepts_bilm_fixture_and_rejects_missing_specials(tmp_path):
    vocab = Vocabulary.from_file(BILM / "vocab_test.txt")
    assert (vocab.bos_id, vocab.unk_id, vocab.eos_id) == (20, 117, 224)
    bad = tmp_path / "bad_vocab.txt"
    bad.write_text("<S>\n</S>\nthe\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"bad_vocab.txt: missing the special .*<UNK>"):
        Vocabulary.from_file(bad)
    duplicate = tmp_path / "dup.txt"
    duplicate.write_text("<S>\n</S>\n<UNK>\nthe\nthe\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="dup.txt: token 'the' appears twice"):
        Vocabulary.from_file(duplicate)
    # a vocabulary line of 1,300 characters holding a tab: shown cut, the line stays short
    # (found by fuzz/training_run.py, the line was 1,404 characters)
    long = tmp_path / "long.txt"
    long.write_text("<S>\n</S>\n<UNK>\n" + "x" * 650 + "\t" + "y" * 650 + "\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"long.txt: entry 4 \('x{50,}\.\.\. \(1301 ") as e:
        Vocabulary.from_file(long)
    assert len(str(e.value)) < 300


def _bad_inputs(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"the cat\n\x00\x01\x02 sat\n")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("the cat\ncaf\xe9 au lait\n".encode("latin-1"))
    novocab = tmp_path / "novocab.txt"
    novocab.write_text("<S>\n</S>\nthe\n", encoding="utf-8")
    good = make_corpus(tmp_path / "good.txt")
    return {
        "empty": ([empty], [], f"{empty}: the training file is empty"),
        "binary": ([binary], [], f"{binary}: binary file (NUL byte at byte offset 8)"),
        "utf8": ([latin1], [], f"{latin1}: line 2 is not valid UTF-8 (byte 0xe9"),
        "missing dir": (
            [tmp_path / "no_such_dir"],
            [],
            f"{tmp_path / 'no_such_dir'}: training file or directory not found",
        ),
        "vocab": ([good], ["--vocab", novocab], f"{novocab}: missing the special token(s) <UNK>"),
    }


@pytest.mark.parametrize("case", ["empty", "binary", "utf8", "missing dir", "vocab"])
def test_bad_training_input_stops_with_one_line(tmp_path, capsys, case):
    files, extra, message = _bad_inputs(tmp_path)[case]
    ckpt = tmp_path / "ckpt"
    status, out, err = run_cli(["train", *files, "--checkpoint-dir", ckpt, *extra], capsys)
    assert status == 1
    assert err.count("\n") == 1 and err.startswith("elmo-tf train: error: ")
    assert message in err
    assert not ckpt.exists()  # stopped before anything was written, let alone trained


def test_empty_directory_and_too_few_sentences(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    with pytest.raises(CorpusError, match="holds no files"):
        read_corpus([tmp_path / "d"])
    make_corpus(tmp_path / "small.txt", n=3)
    status, _, err = run_cli(
        ["train", tmp_path / "small.txt", "--checkpoint-dir", tmp_path / "c", *FAST], capsys
    )
    assert status == 1 and "3 sentences, fewer than batch_size 4" in err


def test_frame_sentences_forward_and_backward():
    # Type ids: 0 <S>, 1 </S>; sentences [5 6 7] and [8].
    sentences = tf.RaggedTensor.from_row_splits([5, 6, 7, 8], [0, 3, 4])
    out = {k: v.numpy().tolist() for k, v in data.frame_sentences(sentences).items()}
    assert out == {
        "forward_inputs": [0, 5, 6, 7, 0, 8],
        "forward_targets": [5, 6, 7, 1, 8, 1],
        "backward_inputs": [1, 7, 6, 5, 1, 8],
        "backward_targets": [7, 6, 5, 0, 8, 0],
    }


def test_training_stream_is_continuous_and_resumes_at_any_step(corpus_file):
    corpus = read_corpus([corpus_file])
    vocab = Vocabulary.from_counts(corpus.counts())
    tables = data.StreamTables(corpus, corpus.type_targets(vocab))
    batches = list(data.training_dataset(tables, 4, 5, seed=3).take(40).as_numpy_iterator())
    joined = {k: np.concatenate([b[k] for b in batches], axis=1) for k in batches[0]}
    assert joined["forward_targets"].shape == (4, 200)  # > 2 epochs of this corpus
    # Across windows each row reads on: the next forward input is the current target
    # (<S> after </S>), and the next backward input is the current backward target
    # (</S> after <S>).
    chars = np.stack([elmo_tf.batch_to_ids([[t]])[0, 0] for t in vocab.tokens])
    after_eos, after_bos = chars.copy(), chars.copy()
    after_eos[vocab.eos_id] = chars[vocab.bos_id]
    after_bos[vocab.bos_id] = chars[vocab.eos_id]
    np.testing.assert_array_equal(
        joined["forward_char_ids"][:, 1:], after_eos[joined["forward_targets"][:, :-1]]
    )
    np.testing.assert_array_equal(
        joined["backward_char_ids"][:, 1:], after_bos[joined["backward_targets"][:, :-1]]
    )
    # Sentence boundaries sit at the same positions in both directions.
    np.testing.assert_array_equal(
        joined["forward_targets"] == vocab.eos_id, joined["backward_targets"] == vocab.bos_id
    )
    resumed = data.training_dataset(tables, 4, 5, seed=3, start_step=23)
    for expected, got in zip(batches[23:], resumed.take(17).as_numpy_iterator()):
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])


def test_evaluation_windows_cover_each_position_once(corpus_file):
    corpus = read_corpus([corpus_file])
    vocab = Vocabulary.from_counts(corpus.counts())
    tables = data.StreamTables(corpus, corpus.type_targets(vocab))
    windows = data.evaluation_windows(tables, 3, 7)
    mask = np.concatenate([w["mask"] for w in windows], axis=1)
    assert mask.sum() == corpus.n_positions
    for row in mask:  # each row is a prefix
        assert not np.any(row[np.argmin(row) :]) or row.all()
    inputs = np.concatenate([w["forward_inputs"] for w in windows], axis=1)[mask]
    expected = data.frame_sentences(tables.sentences(tf.range(corpus.n_sentences)))
    np.testing.assert_array_equal(inputs, expected["forward_inputs"].numpy())


def test_sampler_draws_distinct_frequent_ids_deterministically():
    sampler = LogUniformSampler(1000, 100)
    labels = tf.constant([[0], [999]], tf.int64)
    ids, true_count, sampled_count = sampler.sample(labels, tf.constant([1, 2], tf.int64))
    again, _, _ = sampler.sample(labels, tf.constant([1, 2], tf.int64))
    ids = ids.numpy()
    np.testing.assert_array_equal(ids, again.numpy())
    assert len(set(ids)) == 100 and ids.min() >= 0 and ids.max() < 1000
    # expected counts sum to the number drawn; the most frequent id is nearly always drawn
    assert abs(float(tf.reduce_sum(sampler.expected_counts)) - 100) < 1e-2
    assert true_count.numpy()[0, 0] > 0.99 > 0.1 > true_count.numpy()[1, 0]
    assert_reordered(sampled_count, tf.gather(sampler.expected_counts, ids))
    assert np.mean(ids < 500) > 0.7  # log-uniform: mostly the frequent half
