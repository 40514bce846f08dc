"""Training the biLM: vocabulary, data streams, objective, checkpoints, CLI commands."""

import json
import math
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import tensorflow as tf
from numerics import assert_reordered, assert_same

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.config import ElmoConfig
from elmo_tf.training import checkpoints, data
from elmo_tf.training.bidirectional_language_model import BidirectionalLanguageModel
from elmo_tf.training.corpus import CorpusError, read_corpus
from elmo_tf.training.evaluation import evaluate
from elmo_tf.training.log_uniform_sampler import LogUniformSampler
from elmo_tf.training.trainer import Trainer, new_model
from elmo_tf.training.training_options import TrainingOptions
from elmo_tf.training.vocabulary import Vocabulary, VocabularyError

BILM = pathlib.Path(__file__).parent / "fixtures" / "bilm_fixture"
REPO = pathlib.Path(__file__).parent.parent

TINY_OPTIONS = {
    "lstm": {"projection_dim": 8, "dim": 16, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
    "char_cnn": {
        "activation": "relu",
        "filters": [[1, 4], [2, 4]],
        "n_highway": 1,
        "embedding": {"dim": 4},
        "n_characters": 262,
    },
}
TINY_CONFIG = ElmoConfig.from_options(TINY_OPTIONS)
# The tiny architecture as `elmo-tf train` flags.
ARCH = ["--filters", "1:4,2:4", "--char-embedding-dim", "4", "--projection-dim", "8"]
ARCH += ["--lstm-dim", "16"]
FAST = ["--batch-size", "4", "--unroll-steps", "5", "--num-sampled", "8", "--log-every", "1"]

WORDS = "the a cat dog sat ran on under mat house big small red old new".split()


def make_corpus(path, n=50, seed=0, words=WORDS):
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 8))) for _ in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def corpus_file(tmp_path):
    return make_corpus(tmp_path / "train.txt")


def options(**changes):
    base = dict(batch_size=4, unroll_steps=5, num_sampled=8, checkpoint_every=1000)
    return TrainingOptions(**{**base, **changes})


def make_trainer(corpus_file, directory, opts):
    corpus = read_corpus([corpus_file])
    vocabulary = Vocabulary.from_counts(corpus.counts())
    tables = data.StreamTables(corpus, corpus.type_targets(vocabulary))
    build = new_model(TINY_CONFIG, len(vocabulary), opts)
    return Trainer(build, tables, opts, str(directory), logdir=""), corpus, vocabulary


def run_cli(argv, capsys):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def checkpoint_values(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    names = [n for n in reader.get_variable_to_shape_map() if not n.startswith("_")]
    return {n: reader.get_tensor(n) for n in names}


# --------------------------------------------------------------------------- vocabulary


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


# --------------------------------------------------------------------------- bad input


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


# --------------------------------------------------------------------------- data streams


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


@pytest.mark.slow
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


# --------------------------------------------------------------------------- objective


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


def _window(model_vocab_size=12, rows=2, steps=6, seed=0):
    rng = np.random.default_rng(seed)
    words = [[f"w{rng.integers(20)}" for _ in range(steps)] for _ in range(rows)]
    return {
        "forward_char_ids": elmo_tf.batch_to_ids(words),
        "backward_char_ids": elmo_tf.batch_to_ids([w[::-1] for w in words]),
        "forward_targets": rng.integers(model_vocab_size, size=[rows, steps]).astype(np.int32),
        "backward_targets": rng.integers(model_vocab_size, size=[rows, steps]).astype(np.int32),
    }


@pytest.mark.numerics
def test_sampled_loss_with_every_candidate_equals_full_softmax():
    model = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12, num_sampled=50)
    batch = _window()
    out = model(batch)
    mask = tf.ones_like(batch["forward_targets"], tf.bool)
    sampled = model.sampled_loss(out["forward"], batch["forward_targets"], mask, [4, 5])
    total, count = model.full_loss(out["forward"], batch["forward_targets"], mask)
    assert_reordered(sampled, total / count)


@pytest.mark.numerics
@pytest.mark.slow
def test_language_model_directions_match_elmo_bilm(bilm_model):
    """The forward stream of a sentence (<S> w1..wn) and its backward stream (</S> wn..w1)
    give exactly the activations of ELMo.bilm, whose backward layer reads right to left."""
    model = BidirectionalLanguageModel(bilm_model.config, vocab_size=5)
    model.elmo.set_weights(bilm_model.get_weights())
    tokens = ["The", "cat", "sat", "on", "the", "mat", "."]
    n, p = len(tokens), bilm_model.config.projection_dim
    out = model(
        {
            "forward_char_ids": elmo_tf.batch_to_ids([["<S>", *tokens]]),
            "backward_char_ids": elmo_tf.batch_to_ids([["</S>", *tokens[::-1]]]),
        }
    )
    top = bilm_model.bilm(elmo_tf.batch_to_ids([tokens]))["activations"][-1][0]  # (n + 2, 2P)
    assert_reordered(out["forward"][0], top[: n + 1, :p])
    assert_reordered(out["backward"][0], top[1:, p:][::-1])


@pytest.mark.numerics
def test_carried_state_equals_one_long_window():
    model = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12)
    batch = _window(steps=8)
    whole = model(batch)
    first = model({k: v[:, :3] for k, v in batch.items()})
    second = model({k: v[:, 3:] for k, v in batch.items()}, initial_state=first["state"])
    for key in ("forward", "backward"):
        joined = np.concatenate([first[key], second[key]], axis=1)
        assert_reordered(joined, whole[key])
    for a, b in zip(second["state"], whole["state"]):
        assert_reordered(a, b)


@pytest.mark.numerics
@pytest.mark.slow
def test_reset_state_per_sentence_runs_each_sentence_from_zero():
    """With ``reset_state_per_sentence`` a window holding two sentences gives what each
    sentence gives alone from the zero state, whatever state the window starts from; without
    it the second sentence sees the first."""
    first, second = ["a", "cat", "sat"], ["the", "dog"]

    def streams(*sentences):
        forward = [t for s in sentences for t in ["<S>", *s]]
        backward = [t for s in sentences for t in ["</S>", *s[::-1]]]
        return {
            "forward_char_ids": elmo_tf.batch_to_ids([forward]),
            "backward_char_ids": elmo_tf.batch_to_ids([backward]),
        }

    rng = np.random.default_rng(0)
    carried = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12)
    model = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12, reset_state_per_sentence=True)
    model.set_weights(carried.get_weights())
    start = [rng.normal(size=s.shape).astype(np.float32) for s in model.zero_state(1)]
    both = model(streams(first, second), initial_state=start)
    alone = [model(streams(s)) for s in (first, second)]
    for key in ("forward", "backward"):
        joined = np.concatenate([alone[0][key], alone[1][key]], axis=1)
        assert_reordered(both[key], joined)
    for a, b in zip(both["state"], alone[1]["state"]):
        assert_reordered(a, b)
    flowing = carried(streams(first, second))
    assert not np.allclose(flowing["forward"][:, 4:], alone[1]["forward"], atol=1e-3)
    assert model.get_config()["reset_state_per_sentence"] is True


# --------------------------------------------------------------------------- training


@pytest.mark.slow
def test_loss_goes_down(corpus_file, tmp_path):
    trainer, corpus, vocab = make_trainer(corpus_file, tmp_path / "ckpt", options(dropout=0.0))
    before = evaluate(trainer.model, corpus, vocab, batch_size=4, unroll_steps=5)
    losses = []
    trainer.train(30, lambda m: losses.append(m["loss"]))
    after = evaluate(trainer.model, corpus, vocab, batch_size=4, unroll_steps=5)
    assert len(losses) == 30
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    assert after["perplexity"] < 0.9 * before["perplexity"]
    assert before["perplexity"] == pytest.approx(
        math.exp(0.5 * (before["forward_loss"] + before["backward_loss"]))
    )


@pytest.mark.numerics
@pytest.mark.slow
@pytest.mark.parametrize("optimizer,slot", [("adagrad", "accumulator"), ("adam", "momentum")])
def test_resume_is_exact(corpus_file, tmp_path, optimizer, slot):
    opts = options(dropout=0.1, checkpoint_every=5, optimizer=optimizer)
    straight, _, _ = make_trainer(corpus_file, tmp_path / "a", opts)
    straight.train(10)
    first, _, _ = make_trainer(corpus_file, tmp_path / "b", opts)
    first.train(5)
    resumed, _, _ = make_trainer(corpus_file, tmp_path / "b", opts)
    assert resumed.restore().step == 5
    resumed.train(10)
    assert int(resumed.step.numpy()) == 10
    a, b = (
        checkpoint_values(tmp_path / "a" / "ckpt-10"),
        checkpoint_values(tmp_path / "b" / "ckpt-10"),
    )
    assert (
        set(a) == set(b)
        and any(slot in n for n in a)
        and "lstm_cell/.ATTRIBUTES/VARIABLE_VALUE" in a
    )
    for name in a:
        assert_same(a[name], b[name], err_msg=name)
    # the run did move the weights
    c = checkpoint_values(tmp_path / "b" / "ckpt-5")
    assert not np.allclose(
        c["model/elmo..bilstm..forward_0..kernel/.ATTRIBUTES/VARIABLE_VALUE"],
        a["model/elmo..bilstm..forward_0..kernel/.ATTRIBUTES/VARIABLE_VALUE"],
    )


@pytest.mark.slow
def test_cli_train_resume_logs_and_refusals(corpus_file, tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    base = ["train", corpus_file, "--checkpoint-dir", ckpt, *ARCH, *FAST]
    status, _, err = run_cli([*base, "--max-steps", "3", "--checkpoint-every", "2"], capsys)
    assert status == 0, err
    assert "step 3, loss" in err
    saved = json.loads((ckpt / "training_options.json").read_text())
    assert saved["training"]["batch_size"] == 4 and saved["vocab_size"] == len(WORDS) + 3
    assert sorted(p.name for p in ckpt.glob("ckpt-*.index")) == ["ckpt-2.index", "ckpt-3.index"]
    # TensorBoard scalars
    events = list(ckpt.glob("logs/events.out.tfevents.*"))
    tags = set()
    for record in tf.data.TFRecordDataset([str(e) for e in events]):
        event = tf.compat.v1.Event.FromString(record.numpy())
        tags |= {v.tag for v in event.summary.value}
    assert {"loss", "perplexity", "tokens_per_second", "learning_rate"} <= tags

    status, _, err = run_cli(base + ["--max-steps", "4"], capsys)
    assert status == 1 and "already holds checkpoints; set resume" in err
    status, _, err = run_cli(
        ["train", "--checkpoint-dir", ckpt, "--resume", "--batch-size", "8"], capsys
    )
    assert status == 1 and "batch_size 8 differs from the run being resumed (4)" in err
    status, _, err = run_cli(
        ["train", "--checkpoint-dir", ckpt, "--resume", "--max-steps", "4"], capsys
    )
    assert status == 0, err
    assert "resumed from step 3" in err and "step 4, loss" in err
    assert err.strip().splitlines()[-1].endswith(f"saved ckpt-4 in {ckpt}")  # names it
    # a run already past --max-steps: said, nothing trained (it used to print "loss nan")
    status, _, err = run_cli(
        ["train", "--checkpoint-dir", ckpt, "--resume", "--max-steps", "2"], capsys
    )
    assert status == 0 and "nan" not in err
    assert "the run is at step 4, already past --max-steps 2: nothing to train" in err
    assert err.strip().endswith(f"saved ckpt-4 in {ckpt}")
    assert max(int(p.name[5:-6]) for p in ckpt.glob("ckpt-*.index")) == 4  # none added


@pytest.mark.numerics
@pytest.mark.slow
@pytest.mark.parametrize("per_sentence", [False, True], ids=["bilm-tf", "per-sentence-fp16"])
def test_dump_weights_loads_with_load_pretrained(corpus_file, tmp_path, capsys, per_sentence):
    """dump-weights writes files that load_pretrained and evaluate read back; with
    --reset-state-per-sentence and --softmax-float16 evaluate still reads the text as the
    run did (the flag travels in softmax.hdf5) and the float16 softmax changes the
    perplexity by rounding only."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    argv = ["train", corpus_file, "--checkpoint-dir", ckpt, *ARCH, *FAST, "--max-steps", "2"]
    argv += ["--reset-state-per-sentence"] if per_sentence else []
    assert run_cli(argv, capsys)[0] == 0
    dump = ["dump-weights", ckpt, out] + (["--softmax-float16"] if per_sentence else [])
    status, _, err = run_cli(dump, capsys)
    assert status == 0, err
    with h5py.File(out / "softmax.hdf5") as f:
        assert f["softmax/W"].dtype == (np.float16 if per_sentence else np.float32)
        assert bool(f.attrs["reset_state_per_sentence"]) is per_sentence
    assert json.loads((out / "options.json").read_text())["char_cnn"]["n_characters"] == 262
    assert (out / "vocab.txt").read_text() == (ckpt / "vocab.txt").read_text()
    with h5py.File(out / "weights.hdf5") as f:
        assert f["char_embed"].shape == (261, 4)
    trained, _, step = checkpoints.restore_language_model(ckpt)
    assert step == 2
    loaded = elmo_tf.load_pretrained(out / "options.json", out / "weights.hdf5")
    sentences = [["the", "cat", "sat"], ["unseen", "words", "here", "too"]]
    want, got = trained.elmo.embed(sentences), loaded.embed(sentences)
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2"):
        assert_same(got[key], want[key])
    # evaluate reads the dump (softmax.hdf5 included) and the checkpoint alike
    held_out = make_corpus(tmp_path / "held.txt", n=10, seed=5, words=WORDS + ["zebra"])
    status, from_dump, err = run_cli(["evaluate", out, held_out], capsys)
    assert status == 0, err
    status, from_ckpt, _ = run_cli(["evaluate", ckpt, held_out], capsys)
    result = json.loads(from_dump)
    # float16 rounds each softmax weight by at most 2**-11 of its size
    tolerance = 1e-3 if per_sentence else 1e-5
    assert result["perplexity"] == pytest.approx(json.loads(from_ckpt)["perplexity"], rel=tolerance)
    assert result["perplexity"] == pytest.approx(
        math.exp(0.5 * (result["forward_loss"] + result["backward_loss"]))
    )
    held = read_corpus([held_out])
    zebras = held.type_counts[held.types.index("zebra")] if "zebra" in held.types else 0
    assert result["oov_rate"] == pytest.approx(zebras / held.n_tokens)
    assert result["predictions"] == held.n_positions
    if per_sentence:
        return
    # a dump into the run directory itself would replace its options.json and vocab.txt
    options = (ckpt / "options.json").read_bytes()
    status, _, err = run_cli(["dump-weights", ckpt, ckpt], capsys)
    assert status == 1 and "is a training run directory; dump-weights would replace" in err
    assert (ckpt / "options.json").read_bytes() == options
    assert not (ckpt / "weights.hdf5").exists()
    # a directory holding another model's files: refused unless --overwrite, before any work
    weights = (out / "weights.hdf5").read_bytes()
    (out / "weights.hdf5").write_bytes(b"another model")
    status, _, err = run_cli(["dump-weights", ckpt, out], capsys)
    assert status == 1 and f"{out}: already holds options.json, weights.hdf5, vocab" in err
    assert (out / "weights.hdf5").read_bytes() == b"another model"
    assert run_cli(["dump-weights", ckpt, out, "--overwrite"], capsys)[0] == 0
    assert (out / "weights.hdf5").read_bytes() == weights
    # an OUTDIR (or a --checkpoint-dir) that is a file is named as such, not "File exists"
    status, _, err = run_cli(["dump-weights", ckpt, held_out], capsys)
    assert status == 1 and f"{held_out}: exists and is not a directory" in err
    status, _, err = run_cli(["train", held_out, "--checkpoint-dir", held_out], capsys)
    assert status == 1 and f"{held_out}: exists and is not a directory" in err
    # a run directory holding a dump (copied in by hand): evaluate does not guess which
    shutil.copy(out / "weights.hdf5", ckpt / "weights.hdf5")
    shutil.copy(out / "softmax.hdf5", ckpt / "softmax.hdf5")
    status, stdout, err = run_cli(["evaluate", ckpt, held_out], capsys)
    assert status == 1 and stdout == "" and "holds both training checkpoints and a dump" in err
    for smoothing in ("nan", "inf"):
        argv = ["evaluate", out, held_out, "--unigram-baseline", held_out]
        status, stdout, err = run_cli([*argv, "--unigram-smoothing", smoothing], capsys)
        assert status == 1 and stdout == "", (smoothing, stdout)
        assert f"--unigram-smoothing must be a finite number >= 0, got {smoothing}" in err


@pytest.mark.slow
def test_init_from_official_weights(tmp_path, capsys):
    corpus = make_corpus(tmp_path / "news.txt", words=["the", "swine", "flu", "virus", "."])
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    argv = [
        "train",
        corpus,
        "--checkpoint-dir",
        ckpt,
        "--init-from",
        BILM / "options.json",
        BILM / "lm_weights.hdf5",
        "--vocab",
        BILM / "vocab_test.txt",
        *FAST[:6],
    ]
    status, _, err = run_cli([*argv, "--max-steps", "0"], capsys)
    assert status == 0, err  # a new run at --max-steps 0 keeps its starting weights
    last = err.strip().splitlines()[-1]
    assert last.endswith(
        f"already at --max-steps 0: nothing to train "
        f"(give a larger --max-steps to go on); saved ckpt-0 in {ckpt}"
    )
    assert run_cli(["dump-weights", ckpt, out], capsys)[0] == 0
    with h5py.File(BILM / "lm_weights.hdf5") as ref, h5py.File(out / "weights.hdf5") as got:
        names = []
        ref.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for name in names:
            np.testing.assert_array_equal(got[name][...], ref[name][...], err_msg=name)
    status, _, err = run_cli(
        ["train", "--checkpoint-dir", ckpt, "--resume", "--max-steps", "2"], capsys
    )
    assert status == 0, err
    assert run_cli(["dump-weights", ckpt, tmp_path / "out2"], capsys)[0] == 0
    with h5py.File(BILM / "lm_weights.hdf5") as ref, h5py.File(tmp_path / "out2/weights.hdf5") as f:
        name = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"
        assert not np.array_equal(f[name][...], ref[name][...])  # fine-tuning moved it


# --------------------------------------------------------------------------- distribution


@pytest.mark.numerics
@pytest.mark.slow
def test_mirrored_strategy_on_two_cpu_devices_matches_one_device(corpus_file, tmp_path):
    """Two logical CPU replicas (configured before TF starts: a subprocess) give the weights
    of a one-device run of the same global batch (dropout off: its masks are per replica)."""
    argv = [*ARCH, *FAST, "--dropout", "0", "--max-steps", "4", "--checkpoint-every", "100"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "-m", "elmo_tf.cli.main", "train", str(corpus_file)]
    done = subprocess.run(
        [*command, "--checkpoint-dir", str(tmp_path / "two"), "--devices", "2", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    trainer, _, _ = make_trainer(corpus_file, tmp_path / "one", options(dropout=0.0))
    trainer.train(4)
    one = checkpoint_values(tmp_path / "one" / "ckpt-4")
    two = checkpoint_values(tmp_path / "two" / "ckpt-4")
    assert set(one) == set(two)
    for name in one:
        assert_reordered(two[name], one[name], err_msg=name)


@pytest.mark.slow
def test_sigkill_then_resume_loses_nothing_beyond_the_checkpoint(corpus_file, tmp_path):
    ckpt = tmp_path / "ckpt"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [os.path.join(os.path.dirname(sys.executable), "elmo-tf"), "train"]
    argv = [str(corpus_file), "--checkpoint-dir", str(ckpt), *ARCH, *FAST]
    process = subprocess.Popen(
        [*command, *argv, "--max-steps", "100000", "--checkpoint-every", "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not (ckpt / "checkpoint").exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    killed_at = int(tf.train.latest_checkpoint(str(ckpt)).rsplit("-", 1)[1])
    assert killed_at >= 5 and killed_at % 5 == 0
    # The kill may land after the next checkpoint's files are complete but before the
    # "checkpoint" file names it: the resume then starts from that one.
    final = killed_at + 12
    # a checkpoint the killed run was still writing, as tf.train.Checkpoint names it
    partial = ckpt / f"ckpt-{killed_at + 10}_temp"
    partial.mkdir(exist_ok=True)
    (partial / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"half")
    done = subprocess.run(
        [*command, "--checkpoint-dir", str(ckpt), "--resume", "--max-steps", str(final)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = int(re.search(r"resumed from step (\d+) ", done.stderr).group(1))
    assert resumed in (killed_at, killed_at + 5), done.stderr[-2000:]
    assert f"step {final}, loss" in done.stderr
    assert tf.train.latest_checkpoint(str(ckpt)).endswith(f"ckpt-{final}")
    assert not [p.name for p in ckpt.iterdir() if p.name.endswith("_temp")]
