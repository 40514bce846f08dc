"""Resuming a run whose files are damaged: `elmo-tf train --resume`, plan_training, Trainer.

A run with checkpoints at steps 2, 4 and 6 is trained once per test run (``trained_run``);
every test damages a copy of it. Resuming must continue from the newest checkpoint that
restores completely and say which it skipped and why, or stop with one line naming every
checkpoint tried; it never starts from zero, and never overwrites or deletes a checkpoint it
did not restore. Two damages go through a real ``elmo-tf train --resume`` (a deleted index,
then a bit-flipped shard); the rest of the matrix is checked where the decision is made, at
the plan and restore level, without a training step.
"""

import json
import os
import shutil
import threading

import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_same
from support.special_files import special_file
from support.training import checkpoint_values, make_corpus, make_trainer, options

from elmo_tf.cli.main import main
from elmo_tf.errors import (
    CheckpointError,
    ElmoError,
    OptionsError,
    TrainingPlanError,
    VocabularyError,
)
from elmo_tf.training import checkpoints
from elmo_tf.training.plan import plan_training
from elmo_tf.training.trainer import Trainer

DATA = "data-00000-of-00001"
FORWARD_KERNEL = "model/elmo..bilstm..forward_0..kernel/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture
def run(trained_run, tmp_path):
    """A copy of the shared run (checkpoints at steps 2, 4 and 6) to damage."""
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    return copy


def contents(directory):
    """``{relative path: bytes}`` of every file under ``directory`` but the logs."""
    found = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and "logs" not in path.relative_to(directory).parts:
            found[str(path.relative_to(directory))] = path.read_bytes()
    return found


def resume(run, capsys, max_steps):
    argv = ["train", "--checkpoint-dir", run, "--resume", "--max-steps", max_steps]
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().err


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_bit(path, at=0.5):
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x10
    path.write_bytes(bytes(data))


def weights_of(trainer):
    """The trainer's checkpointed values under the keys of ``checkpoint_values``."""
    values = {}
    for part, variables in [
        ("model", trainer.model.weights),
        ("optimizer", trainer.optimizer.variables),
    ]:
        for key, variable in checkpoints.variable_names(variables).items():
            # a checkpoint key escapes "." as ".."
            escaped = key.replace(".", "..")
            values[f"{part}/{escaped}/.ATTRIBUTES/VARIABLE_VALUE"] = np.asarray(variable.numpy())
    for name in ("step", "lstm_cell", "lstm_hidden"):
        values[f"{name}/.ATTRIBUTES/VARIABLE_VALUE"] = getattr(trainer, name).numpy()
    return values


def assert_holds(trainer, prefix):
    stored = checkpoint_values(prefix)
    mine = weights_of(trainer)
    assert set(mine) == {name for name in stored if not name.startswith("save_counter")}
    for name, value in mine.items():
        np.testing.assert_array_equal(value, stored[name], err_msg=name)


# --------------------------------------------------------------------------- the CLI


def test_deleted_index_resumes_from_the_previous_checkpoint(run, trained_run, capsys):
    """``elmo-tf train --resume`` past a checkpoint whose index is gone: it goes on from the
    one before, says which it skipped and why, and trains steps 5 and 6 again to the very
    values the unbroken run wrote (weights, Adagrad's accumulators, the LSTM state and the
    random state of dropout and sampling all restored exactly)."""
    (run / "ckpt-6.index").unlink()
    before = contents(run)
    status, err = resume(run, capsys, 6)
    assert status == 0, err
    assert (
        f"resumed from step 4 of {run} (ckpt-4); skipped ckpt-6: ckpt-6.index is missing "
        f"(moved to {run / 'damaged' / 'ckpt-6'})\n"
    ) in err
    assert "step 6, loss" in err  # trained steps 5 and 6 from ckpt-4, not from zero
    assert err.strip().splitlines()[-1].endswith(f"saved ckpt-6 in {run}")  # names it
    after = contents(run)
    # the older checkpoints are untouched, the damaged one's file moved aside unchanged
    for name in ("ckpt-2.index", f"ckpt-2.{DATA}", "ckpt-4.index", f"ckpt-4.{DATA}"):
        assert after[name] == before[name], name
    assert after[f"damaged/ckpt-6/ckpt-6.{DATA}"] == before[f"ckpt-6.{DATA}"]
    # the run went on from step 4: its new ckpt-6 holds what the unbroken run's does
    resumed, unbroken = checkpoint_values(run / "ckpt-6"), checkpoint_values(trained_run / "ckpt-6")
    assert set(resumed) == set(unbroken)
    assert any("accumulator" in name for name in unbroken)
    assert "lstm_cell/.ATTRIBUTES/VARIABLE_VALUE" in unbroken
    for name, value in unbroken.items():
        assert_same(resumed[name], value, err_msg=name)
    assert not np.array_equal(
        checkpoint_values(run / "ckpt-4")[FORWARD_KERNEL], unbroken[FORWARD_KERNEL]
    )  # steps 5 and 6 did move the weights
    state = tf.train.get_checkpoint_state(str(run))
    assert state.model_checkpoint_path == str(run / "ckpt-6")
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "ckpt-2",
        "ckpt-4",
        "ckpt-6",
    ]


@pytest.mark.parametrize(
    "state, told",
    [
        (b"\x00\xffmodel_checkpoint_path {{", "was unreadable"),
        (b"", "was unreadable"),
        (b'model_checkpoint_path: "ckpt-99"\n', "named ckpt-99"),
        (b'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n', None),
        (None, "was missing"),
    ],
    ids=["garbled", "empty", "names-a-missing-one", "names-an-older-one", "missing"],
)
def test_a_bad_state_file_resumes_from_the_newest_checkpoint(run, state, told):
    """The ``checkpoint`` state file is a hint: garbled, empty, missing or naming another
    checkpoint, the restore takes the newest that restores and says what it found."""
    if state is None:
        (run / "checkpoint").unlink()
    else:
        (run / "checkpoint").write_bytes(state)
    before = contents(run)
    if state == b'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n':
        told = "named ckpt-2"  # the state file's latest is not trusted over the files
    trainer = Trainer.from_plan(plan_training(run, [], resume=True), run)
    restored = trainer.restored
    assert (restored.name, restored.skipped, restored.state_file) == ("ckpt-6", (), told)
    assert tf.train.latest_checkpoint(str(run)) == str(run / "ckpt-6")
    assert_holds(trainer, run / "ckpt-6")
    after = contents(run)
    for name in ("ckpt-2", "ckpt-4", "ckpt-6"):
        for kind in ("index", DATA):
            assert after[f"{name}.{kind}"] == before[f"{name}.{kind}"]


def test_bit_flipped_shard_and_garbled_state_file_through_the_cli(run, capsys):
    flip_bit(run / f"ckpt-6.{DATA}")
    (run / "checkpoint").write_bytes(b"\x00\xffmodel_checkpoint_path {{")
    damaged = (run / f"ckpt-6.{DATA}").read_bytes()
    status, err = resume(run, capsys, 5)
    assert status == 0, err
    assert f"resumed from step 4 of {run} (ckpt-4); skipped ckpt-6: " in err
    assert "the checkpoint state file was unreadable (rewritten)" in err
    assert "Checksum does not match" in err and "step 5, loss" in err
    assert tf.train.latest_checkpoint(str(run)) == str(run / "ckpt-5")
    assert (run / "damaged" / "ckpt-6" / f"ckpt-6.{DATA}").read_bytes() == damaged
    assert not (run / "ckpt-6.index").exists()


def test_every_checkpoint_damaged_stops_with_one_line(run, capsys):
    truncate(run / f"ckpt-6.{DATA}")
    flip_bit(run / f"ckpt-4.{DATA}")
    (run / "ckpt-2.index").unlink()
    before = contents(run)
    status, err = resume(run, capsys, 8)
    assert status == 1
    assert err.count("\n") == 1 and err.startswith("elmo-tf train: error: ")
    assert f"{run}: no checkpoint restores: ckpt-6: ckpt-6.{DATA} truncated (" in err
    assert "; ckpt-4: TensorBundle at " in err and "Checksum does not match" in err
    assert err.endswith("; ckpt-2: ckpt-2.index is missing\n")
    assert contents(run) == before  # nothing moved, rewritten or trained


@pytest.mark.parametrize(
    "damage, message",
    [
        ("empty", "training_options.json: training options file is empty"),
        ("truncated", "training_options.json: not a valid JSON training options file ("),
    ],
)
def test_damaged_training_options_through_the_cli(run, capsys, damage, message):
    path = run / "training_options.json"
    path.write_bytes(b"" if damage == "empty" else path.read_bytes()[:50])
    before = contents(run)
    status, err = resume(run, capsys, 8)
    assert status == 1
    assert err.count("\n") == 1 and err.startswith("elmo-tf train: error: ")
    assert f"{run / message}" in err
    assert contents(run) == before


# --------------------------------------------------------------------------- the library


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda run: truncate(run / f"ckpt-6.{DATA}"), f"ckpt-6.{DATA} truncated ("),
        (lambda run: flip_bit(run / f"ckpt-6.{DATA}", 0.1), "Checksum does not match"),
        (lambda run: flip_bit(run / f"ckpt-6.{DATA}", 0.9), "Checksum does not match"),
        (lambda run: truncate(run / "ckpt-6.index"), "ckpt-6.index: not an sstable"),
        (lambda run: flip_bit(run / "ckpt-6.index", 0.3), "block checksum mismatch"),
        (lambda run: (run / f"ckpt-6.{DATA}").unlink(), "ckpt-6.data-00000-of-00001"),
    ],
    ids=[
        "truncated-shard",
        "flipped-shard",
        "flipped-shard-end",
        "truncated-index",
        "flipped-index",
        "missing-shard",
    ],
)
def test_plan_and_from_plan_fall_back_past_a_damaged_checkpoint(run, damage, reason):
    damage(run)
    damaged = {p.name: p.read_bytes() for p in run.glob("ckpt-6.*")}
    plan = plan_training(run, resume=True)
    trainer = Trainer.from_plan(plan, str(run), logdir="")
    restored = trainer.restored
    assert (restored.name, restored.step, int(trainer.step.numpy())) == ("ckpt-4", 4, 4)
    [(name, why)] = restored.skipped
    assert name == "ckpt-6" and reason in why and "\n" not in why
    assert restored.set_aside == {"ckpt-6": str(run / "damaged" / "ckpt-6")}
    assert {p.name: p.read_bytes() for p in (run / "damaged" / "ckpt-6").iterdir()} == damaged
    assert_holds(trainer, run / "ckpt-4")  # model, optimizer slots, LSTM state: all of ckpt-4


def test_a_failed_restore_leaves_the_trainer_untouched(run, tmp_path):
    """ckpt-8 holds the model only (other values, no optimizer): a restore into the
    trainer's own variables would assign the model and then fail, leaving it half restored."""
    corpus = make_corpus(tmp_path / "train.txt")  # the run's corpus: the same vocabulary
    other, _, _ = make_trainer(corpus, tmp_path / "other", options(seed=7))
    partial = tf.train.Checkpoint(model=checkpoints.variable_map(other.model.weights))
    partial.write(str(run / "ckpt-8"))
    trainer, _, _ = make_trainer(corpus, run, options())
    restored = trainer.restore()
    assert (restored.name, restored.skipped[0][0]) == ("ckpt-6", "ckpt-8")
    assert restored.skipped[0][1].startswith("does not fit the model: ")
    assert_holds(trainer, run / "ckpt-6")

    # every checkpoint fails, the partial one first: the trainer keeps its own values
    partial.write(str(run / "ckpt-8"))
    for step in (2, 4, 6):
        truncate(run / f"ckpt-{step}.{DATA}")
    fresh, _, _ = make_trainer(corpus, run, options())
    before = weights_of(fresh)
    with pytest.raises(CheckpointError, match="no checkpoint restores: ckpt-8: does not fit"):
        fresh.restore()
    for name, value in weights_of(fresh).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def _damage_run_file(run, case):
    options_file, vocab = run / "options.json", run / "vocab.txt"
    training = run / "training_options.json"
    saved = json.loads(training.read_text())
    if case == "training_options not JSON":
        training.write_bytes(b"\x89HDF\r\n")
    elif case == "training_options a list":
        training.write_text("[]")
    elif case == "training_options without corpus":
        training.write_text(json.dumps({"training": saved["training"]}))
    elif case == "training_options bad value":
        saved["training"]["dropout"] = "0.1"
        training.write_text(json.dumps(saved))
    elif case == "training_options unknown option":
        saved["training"]["speed"] = 2
        training.write_text(json.dumps(saved))
    elif case == "options missing":
        options_file.unlink()
    elif case == "options truncated":
        options_file.write_bytes(options_file.read_bytes()[:40])
    elif case == "vocab missing":
        vocab.unlink()
    elif case == "vocab cut short":
        vocab.write_text("".join(vocab.read_text().splitlines(keepends=True)[:-2]))
    elif case == "only a state file":
        for path in run.glob("ckpt-*"):
            path.unlink()


RUN_FILE_CASES = {
    "training_options not JSON": (
        CheckpointError,
        "training_options.json: not a valid JSON training options file (not UTF-8 text: byte 0)",
    ),
    "training_options a list": (
        CheckpointError,
        "training_options.json: expected a JSON object, got list",
    ),
    "training_options without corpus": (
        CheckpointError,
        "training_options.json: 'corpus' must be a JSON object",
    ),
    "training_options bad value": (
        CheckpointError,
        "training_options.json: 'training': dropout must be a finite number, got '0.1'",
    ),
    "training_options unknown option": (
        CheckpointError,
        "training_options.json: 'training': unknown training option(s) speed",
    ),
    "options missing": (OptionsError, "options.json: options file not found"),
    "options truncated": (OptionsError, "options.json: not a valid JSON options file"),
    "vocab missing": (ElmoError, "vocab.txt: vocabulary file not found"),
    "vocab cut short": (
        CheckpointError,
        "vocab.txt: holds 16 tokens, but the run was trained with 18 ('vocab_size' of "
        "training_options.json); not the run's vocabulary",
    ),
    "only a state file": (
        TrainingPlanError,
        "no checkpoint to resume from (there is a 'checkpoint' state file, but no",
    ),
}


@pytest.mark.parametrize("case", list(RUN_FILE_CASES))
def test_damaged_run_files_raise_one_line_naming_the_file(run, case):
    _damage_run_file(run, case)
    kind, message = RUN_FILE_CASES[case]
    with pytest.raises(kind) as info:
        plan_training(run, resume=True)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(run) in str(info.value)


def test_a_new_run_refuses_a_directory_with_checkpoint_files_but_no_state_file(run):
    (run / "checkpoint").unlink()
    corpus = json.loads((run / "training_options.json").read_text())["corpus"]["files"]
    with pytest.raises(TrainingPlanError, match="already holds checkpoints; set resume"):
        plan_training(run, corpus)


def test_evaluate_and_dump_weights_name_a_damaged_newest_checkpoint(run):
    (run / "checkpoint").write_bytes(b"\xff")  # not read: the files say which is newest
    _, _, step = checkpoints.restore_language_model(run)
    assert step == 6
    truncate(run / f"ckpt-6.{DATA}")
    with pytest.raises(CheckpointError, match=rf"ckpt-6: cannot restore \(ckpt-6.{DATA} truncated"):
        checkpoints.restore_language_model(run)


class _WriterForAReader:
    """Opens ``fifo`` for writing and closes it at once, in a thread: a reader that opens the
    pipe gets an empty file instead of waiting forever, so a regressed check fails the test
    (with another message) rather than hang it. ``close()`` releases the thread when no
    reader came, as it should be."""

    def __init__(self, fifo):
        self.fifo = fifo
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self):
        with open(self.fifo, "wb"):
            pass

    def close(self):
        if self.thread.is_alive():  # no reader opened the pipe: open one to let it finish
            reader = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
            self.thread.join(timeout=30)
            os.close(reader)
        return not self.thread.is_alive()


@pytest.mark.parametrize(
    "name, what",
    [
        (f"ckpt-6.{DATA}", "checkpoint file"),
        ("ckpt-6.index", "checkpoint file"),
        ("ckpt-2.index", "checkpoint file"),  # an older one: read when the newer fail
        ("vocab.txt", "vocabulary file"),
        ("checkpoint", "checkpoint state file"),
        ("training_options.json", "training options file"),
    ],
)
@pytest.mark.parametrize("command", ["train --resume", "evaluate", "dump-weights"])
def test_a_named_pipe_in_a_run_directory_is_refused_at_once(
    run, tmp_path, capsys, name, what, command
):
    """Every file a command reads from a run directory is checked before anything opens it:
    a named pipe there (it made train --resume and evaluate wait forever) is one line."""
    (run / name).unlink()
    os.mkfifo(run / name)
    before = sorted(os.listdir(run))
    heldout = make_corpus(tmp_path / "heldout.txt", n=4)
    argv = {
        "train --resume": ["train", "--checkpoint-dir", run, "--resume", "--max-steps", 8],
        "evaluate": ["evaluate", run, heldout],
        "dump-weights": ["dump-weights", run, tmp_path / "dump"],
    }[command]
    writer = _WriterForAReader(run / name)
    try:
        status = main([str(a) for a in argv])
    finally:
        assert writer.close(), "the pipe's writer is still waiting"
    err = capsys.readouterr().err
    assert status == 1
    assert err == f"elmo-tf {argv[0]}: error: {run / name}: is a named pipe, not a {what}\n"
    assert sorted(os.listdir(run)) == before and not (tmp_path / "dump").exists()


@pytest.mark.parametrize("kind", ["socket", "link to a fifo", "null device"])
def test_any_special_file_in_a_run_directory_is_refused(run, kind):
    path = run / "vocab.txt"
    path.unlink()
    if kind == "link to a fifo":
        os.symlink(special_file(run / "elsewhere", "fifo"), path)
        kind = "named pipe"
    else:
        special_file(path, kind)
        kind = "character device" if kind == "null device" else kind
    with pytest.raises(CheckpointError, match=f"vocab.txt: is a {kind}, not a vocabulary file"):
        plan_training(run, resume=True)
    with pytest.raises(CheckpointError, match=f"vocab.txt: is a {kind}, not a vocabulary file"):
        checkpoints.restore_language_model(run)


def test_a_named_pipe_given_as_vocabulary_is_refused(run, tmp_path):
    fifo = tmp_path / "vocab.txt"
    os.mkfifo(fifo)
    corpus = json.loads((run / "training_options.json").read_text())["corpus"]["files"]
    with pytest.raises(VocabularyError, match="vocab.txt: is a named pipe, not a vocabulary"):
        plan_training(tmp_path / "new", corpus, vocab=str(fifo))
