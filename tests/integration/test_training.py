"""Training the biLM: vocabulary, data streams, objective, checkpoints, CLI commands."""

import json
import math
import os
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
from support.numerics import assert_reordered, assert_same
from support.paths import BILM
from support.training import (
    ARCH,
    FAST,
    WORDS,
    checkpoint_values,
    make_corpus,
    make_trainer,
    options,
    run_cli,
)

import elmo_tf
from elmo_tf.training import checkpoints
from elmo_tf.training.corpus import read_corpus
from elmo_tf.training.evaluation import evaluate


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


# Cyrillic, CJK (three UTF-8 bytes a character: 20 of them are 60 bytes) and Arabic words,
# with diacritics and a token longer than the 48 bytes a token keeps.
SCRIPTS = ["собака", "кошка", "сидела", "猫", "狗", "坐在", "垫子上", "قطة", "كلب", "جلس", "على",
           "中华人民共和国国务院总理办公室秘书处", "Ελλάδα", "naïve", "café"]  # fmt: skip


def test_training_on_cyrillic_cjk_and_arabic_text(tmp_path):
    """Any script trains: each token's first 48 UTF-8 bytes are its characters (bilm-tf's
    cut: 16 CJK characters), the whole token is its softmax word."""
    corpus_file = make_corpus(tmp_path / "corpus.txt", n=60, words=SCRIPTS)
    trainer, corpus, vocab = make_trainer(corpus_file, tmp_path / "ckpt", options(dropout=0.0))
    longest = max(SCRIPTS, key=lambda w: len(w.encode()))
    assert len(longest.encode()) > 48 and longest in vocab
    losses = []
    trainer.train(20, lambda m: losses.append(m["loss"]))
    assert np.isfinite(losses).all() and np.mean(losses[-5:]) < np.mean(losses[:5])
    ids = elmo_tf.batch_to_ids([[longest]])[0, 0]
    assert (ids[1:49] - 1).astype(np.uint8).tobytes() == longest.encode()[:48]
    assert np.isfinite(
        evaluate(trainer.model, corpus, vocab, batch_size=4, unroll_steps=5)["perplexity"]
    )


@pytest.mark.stress
@pytest.mark.numerics
@pytest.mark.parametrize("optimizer,slot", [("adagrad", "accumulator"), ("adam", "momentum")])
def test_resume_is_exact(corpus_file, tmp_path, optimizer, slot):
    """Each optimizer's slots restore exactly, through the library (the command's resume is
    checked on the shared run: test_training_resume.py)."""
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


def test_a_run_records_its_settings_and_logs_and_refuses_what_does_not_fit(
    trained_run, tmp_path, capsys
):
    """What ``elmo-tf train`` leaves besides checkpoints (the settings a resume reads,
    TensorBoard's scalars), and what it refuses on a run that exists, before any training."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(trained_run, ckpt)
    saved = json.loads((ckpt / "training_options.json").read_text())
    assert saved["training"]["batch_size"] == 4 and saved["vocab_size"] == len(WORDS) + 3
    assert sorted(p.name for p in ckpt.glob("ckpt-*.index")) == [
        "ckpt-2.index",
        "ckpt-4.index",
        "ckpt-6.index",
    ]
    events = list(ckpt.glob("logs/events.out.tfevents.*"))
    tags = set()
    for record in tf.data.TFRecordDataset([str(e) for e in events]):
        event = tf.compat.v1.Event.FromString(record.numpy())
        tags |= {v.tag for v in event.summary.value}
    assert {"loss", "perplexity", "tokens_per_second", "learning_rate"} <= tags

    corpus = trained_run.parent / "train.txt"
    base = ["train", corpus, "--checkpoint-dir", ckpt, *ARCH, *FAST]
    status, _, err = run_cli(base + ["--max-steps", "8"], capsys)
    assert status == 1 and "already holds checkpoints; set resume" in err
    status, _, err = run_cli(
        ["train", "--checkpoint-dir", ckpt, "--resume", "--batch-size", "8"], capsys
    )
    assert status == 1 and "batch_size 8 differs from the run being resumed (4)" in err
    # a run already past --max-steps: said, nothing trained (it used to print "loss nan")
    status, _, err = run_cli(
        ["train", "--checkpoint-dir", ckpt, "--resume", "--max-steps", "2"], capsys
    )
    assert status == 0 and "nan" not in err
    assert "the run is at step 6, already past --max-steps 2: nothing to train" in err
    assert err.strip().endswith(f"saved ckpt-6 in {ckpt}")
    assert max(int(p.name[5:-6]) for p in ckpt.glob("ckpt-*.index")) == 6  # none added


@pytest.mark.numerics
@pytest.mark.parametrize("per_sentence", [False, True], ids=["bilm-tf", "per-sentence-fp16"])
def test_dump_weights_loads_with_load_pretrained(trained_run, tmp_path, capsys, per_sentence):
    """dump-weights writes files that load_pretrained and evaluate read back; with
    --reset-state-per-sentence and --softmax-float16 evaluate still reads the text as the
    run did (the flag travels in softmax.hdf5) and the float16 softmax changes the
    perplexity by rounding only."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    shutil.copytree(trained_run, ckpt)
    if per_sentence:  # a run trained with --reset-state-per-sentence: the same variables
        settings = json.loads((ckpt / "training_options.json").read_text())
        settings["training"]["reset_state_per_sentence"] = True
        (ckpt / "training_options.json").write_text(json.dumps(settings))
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
    assert step == 6 and trained.reset_state_per_sentence is per_sentence
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


@pytest.mark.stress
@pytest.mark.numerics
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


# A command started by a shell in the background (`... &`, nohup) ignores SIGINT, and so does
# every process it starts, as a terminal's foreground command does not: the commands that
# take the test's signals start with SIGINT's default, as a user's do.
IN_THE_FOREGROUND = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]  # fmt: skip


def _training_process(corpus_file, ckpt, log):
    """``elmo-tf train`` of the tiny model, far from its end and from its next checkpoint,
    once it has printed its first step (its stderr goes to ``log``)."""
    command = [os.path.join(os.path.dirname(sys.executable), "elmo-tf"), "train"]
    argv = [str(corpus_file), "--checkpoint-dir", str(ckpt), *ARCH, *FAST]
    far = ["--max-steps", "100000", "--checkpoint-every", "100000"]
    process = subprocess.Popen(
        [*IN_THE_FOREGROUND, *command, *argv, *far],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    deadline = time.monotonic() + 120
    while "loss" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return process


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stop_signal_saves_the_step_in_flight_and_exits_0(corpus_file, tmp_path, stop):
    """A preemptible machine's notice (SIGTERM) or Ctrl-C: the step finishes, its checkpoint
    is written and named, the command says how to continue and exits 0; --resume goes on from
    that step."""
    ckpt, log = tmp_path / "ckpt", tmp_path / "stderr.txt"
    process = _training_process(corpus_file, ckpt, log)
    try:
        process.send_signal(stop)
        assert process.wait(timeout=120) == 0, log.read_text()[-2000:]
    finally:
        process.kill()
    last = log.read_text().strip().splitlines()[-1]
    step = int(re.search(r"saved ckpt-(\d+) in ", last).group(1))
    assert last.startswith(f"stopped by {stop.name}: step {step}, loss ")
    assert last.endswith(f"continue with elmo-tf train --checkpoint-dir {ckpt} --resume")
    assert step >= 1 and tf.train.latest_checkpoint(str(ckpt)).endswith(f"ckpt-{step}")
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "elmo-tf"), "train", "--checkpoint-dir",
         str(ckpt), "--resume", "--max-steps", str(step + 2)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resumed from step {step} of {ckpt} (ckpt-{step})" in done.stderr


def test_a_second_stop_signal_ends_training_at_once(corpus_file, tmp_path):
    ckpt, log = tmp_path / "ckpt", tmp_path / "stderr.txt"
    process = _training_process(corpus_file, ckpt, log)
    try:
        process.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGINT)
        status = process.wait(timeout=120)
    finally:
        process.kill()
    assert status in (130, 143), log.read_text()[-2000:]
    assert "stopped by" not in log.read_text()
    assert tf.train.latest_checkpoint(str(ckpt)) is None  # nothing was saved


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
    # only the command's own lines: no native log line of TensorFlow's restore
    assert [line for line in done.stderr.splitlines() if re.match(r"[IWEF]\d{4} ", line)] == []
    assert tf.train.latest_checkpoint(str(ckpt)).endswith(f"ckpt-{final}")
    assert not [p.name for p in ckpt.iterdir() if p.name.endswith("_temp")]
