"""A training run's checkpoints: the variables' names in them, restoring the newest one that
restores (and setting aside the damaged ones), and a trained biLM read back from them. The run
directory's files: ``elmo_tf.training.run_directory``.

Which checkpoint is the newest is read from the ``ckpt-N`` files present, not from the
``checkpoint`` state file: that file can be garbled, or name a checkpoint whose files are
damaged or gone (``newest_restorable``).
"""

import dataclasses
import os
import re

from elmo_tf.errors import CheckpointError
from elmo_tf.formats.weight_file import save_weights
from elmo_tf.system import files
from elmo_tf.training.run_directory import (
    DAMAGED_DIR,
    OPTIONS_FILE,
    SOFTMAX_FILE,
    STATE_FILE,
    VOCAB_FILE,
    WEIGHTS_FILE,
    check_dump_directory,
    checkpoint_files,
    find_checkpoint,
    read_run,
    run_files,
)
from elmo_tf.training.softmax_file import save_softmax
from elmo_tf.training.training_options import TrainingOptions


def variable_map(variables):
    """A ``tf.train.Checkpoint`` holding ``variables`` under their Keras paths.

    Checkpoints name every variable by its path (``elmo/bilstm/forward_0/kernel``,
    ``adagrad/..._accumulator``) rather than through Keras' object graph, which does not
    reach every sublayer's variables (Keras 3 tracks layers, not lists of weights).
    """
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    return tf.train.Checkpoint(**variable_names(variables))


def variable_names(variables):
    """``{checkpoint key: variable}`` of ``variables``: their Keras paths, ``/`` as ``.``."""
    named = {}
    for variable in variables:
        key = variable.path.replace("/", ".")
        if key in named:
            raise ValueError(f"two variables share the path {variable.path!r}")
        named[key] = variable
    return named


def fresh_copy(structure):
    """A ``tf.train.Checkpoint`` shaped like ``structure`` (``{name: variable, or {key:
    variable}}``) over new zero variables in host memory: a restore into it reads and checks
    a checkpoint without touching the variables of ``structure``."""
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    def fresh(variable):
        return tf.Variable(tf.zeros(variable.shape, variable.dtype), trainable=False)

    with tf.device("/cpu:0"):
        parts = {
            name: tf.train.Checkpoint(**{key: fresh(v) for key, v in value.items()})
            if isinstance(value, dict)
            else fresh(value)
            for name, value in structure.items()
        }
    return tf.train.Checkpoint(**parts)


@dataclasses.dataclass(frozen=True)
class Restored:
    """The checkpoint a run was resumed from (``newest_restorable``).

    Attributes:
        directory: the run directory.
        name: the checkpoint restored, ``ckpt-N``.
        step: its step, ``N``.
        skipped: ``((name, reason), ...)`` of the newer checkpoints that did not restore,
            newest first.
        set_aside: ``{name: folder}`` of skipped checkpoints whose files were moved (to
            ``damaged/``) so that the resumed run does not overwrite them.
        state_file: what was wrong with the state file, which has been written anew
            (``"was missing"``, ``"was unreadable"``, ``"named ckpt-M"``), or ``None``.
    """

    directory: str
    name: str
    step: int
    skipped: tuple = ()
    set_aside: dict = dataclasses.field(default_factory=dict)
    state_file: str | None = None

    @property
    def prefix(self):
        return os.path.join(self.directory, self.name)


def newest_restorable(directory, restore):
    """The newest checkpoint of ``directory`` that restores completely, as ``Restored``;
    ``None`` when the directory has no ``ckpt-N`` files.

    The candidates are the ``ckpt-N`` files present, largest ``N`` first; the state file is
    not consulted (it may be garbled or name a damaged checkpoint). ``restore(prefix)``
    restores one into variables of its own (so that a checkpoint failing halfway leaves the
    caller's untouched; see ``fresh_copy``) and returns the step it holds. What TensorFlow
    raises for a damaged checkpoint (a missing or truncated file, a checksum mismatch, a
    variable missing or of another shape) becomes the reason the checkpoint is skipped.

    Raises:
        CheckpointError: no checkpoint restores; the message names each and why.
    """
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    found = checkpoint_files(directory)
    skipped, misfits = [], 0
    for number in sorted(found, reverse=True):
        name = f"ckpt-{number}"
        if f"{name}.index" not in found[number]:
            skipped.append((name, f"{name}.index is missing"))
            continue
        try:
            step = restore(os.path.join(directory, name))
        # TensorFlow's errors for unreadable files: DataLossError (checksum),
        # NotFoundError (a shard gone), OutOfRangeError, a bare OpError (a damaged index);
        # IndexError is what its checkpoint reader raises for a truncated data shard.
        except (tf.errors.OpError, IndexError) as e:
            skipped.append((name, _restore_failure(e, found[number])))
        # A restore that reads but does not fit: a variable of another shape (ValueError),
        # or one the checkpoint lacks (AssertionError of assert_existing_objects_matched).
        except (ValueError, AssertionError) as e:
            skipped.append((name, "does not fit the model: " + _restore_failure(e)))
            misfits += 1
        else:
            if step == number:
                return Restored(os.fspath(directory), name, step, tuple(skipped))
            skipped.append((name, f"holds step {step}, not {number}"))
    if not skipped:
        return None
    tried = "; ".join(f"{name}: {reason}" for name, reason in skipped)
    hint = ""
    if misfits == len(skipped):
        hint = (
            f" (none fits the model of {OPTIONS_FILE} and {VOCAB_FILE}: are those the run's files?)"
        )
    raise CheckpointError(f"{directory}: no checkpoint restores: {tried}{hint}")


def _restore_failure(error, entries=()):
    """One line of what ``error`` says, without TensorFlow's op decorations, naming the file
    (of ``entries``, the checkpoint's files) where TensorFlow's message does not."""
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    text = error.message if isinstance(error, tf.errors.OpError) else str(error)
    text = re.sub(r"\{\{function_node [^}]*\}\}", "", text)
    text = re.sub(r"\[Op:\w+\]", "", text)
    text = " ".join(text.split()) or type(error).__name__
    data = ", ".join(entry for entry in entries if ".data-" in entry)
    if isinstance(error, IndexError):  # TensorFlow's reader ran past the end of a data shard
        text = f"{data or 'a data file'} truncated ({text})"
    elif "sstable" in text:  # the index is a table; TensorFlow does not name it here
        text = f"{next((e for e in entries if e.endswith('.index')), 'the index')}: {text}"
    return text if len(text) <= 300 else text[:297] + "..."


def set_aside(directory, name):
    """Moves the files of checkpoint ``name`` (``ckpt-N``) unchanged into
    ``directory/damaged/ckpt-N/`` (``ckpt-N.2/``, ... when taken); returns that folder.

    A run resumed from an older checkpoint writes ``ckpt-N`` again when it reaches step N,
    and its ``CheckpointManager`` deletes the oldest files it knows of: moved aside, the
    damaged files are neither overwritten nor deleted.
    """
    number = int(name.rsplit("-", 1)[1])
    base = os.path.join(directory, DAMAGED_DIR, name)
    target, copy = base, 1
    while os.path.exists(target):
        copy += 1
        target = f"{base}.{copy}"
    try:
        os.makedirs(target)
        for entry in checkpoint_files(directory).get(number, []):
            os.replace(os.path.join(directory, entry), os.path.join(target, entry))
    except OSError as e:
        raise CheckpointError(
            f"{os.path.join(directory, name)}: cannot move this damaged checkpoint to {target} "
            f"({e.strerror}); move its files away, then resume again"
        ) from None
    return target


def state_file_fault(directory, name):
    """What is wrong with the state file of ``directory`` if its latest checkpoint is to be
    ``name``: ``None``, ``"was missing"``, ``"was unreadable"`` or ``"named ckpt-M"``."""
    try:
        with open(os.path.join(directory, STATE_FILE), "rb") as f:
            text = f.read(1 << 20).decode("utf-8")
    except FileNotFoundError:
        return "was missing"
    except (OSError, UnicodeDecodeError):
        return "was unreadable"
    match = re.search(r'^model_checkpoint_path: "([^"]+)"$', text, re.M)
    if match is None:
        return "was unreadable"
    named = os.path.basename(match.group(1))
    return None if named == name else f"named {named}"


def write_state_file(directory):
    """Rewrites the state file of ``directory`` to list the ``ckpt-N`` with an index, the
    largest ``N`` as the latest, as ``tf.train.CheckpointManager`` writes it (names relative
    to the directory; the index files' times as timestamps, by which the manager keeps
    ``max_to_keep`` of them)."""
    names = [
        f"ckpt-{n}"
        for n, entries in sorted(checkpoint_files(directory).items())
        if f"ckpt-{n}.index" in entries
    ]
    if not names:
        raise CheckpointError(f"{directory}: no checkpoint to list in the state file")
    lines = [f'model_checkpoint_path: "{names[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{name}"' for name in names]
    for name in names:
        written = os.path.getmtime(os.path.join(directory, name + ".index"))
        lines.append(f"all_model_checkpoint_timestamps: {written!r}")
    files.write_text(os.path.join(directory, STATE_FILE), "\n".join(lines) + "\n")


def restore_language_model(path):
    """Rebuilds the biLM of a checkpoint (directory: its newest) and restores its weights.

    Returns ``(model, vocabulary, step)``. A checkpoint that does not restore raises
    ``CheckpointError`` naming it and why (give an older one's prefix instead).
    """
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    # lazy: plan_training reads a run's files before TensorFlow starts
    from elmo_tf.training.bidirectional_language_model import BidirectionalLanguageModel

    directory, prefix = find_checkpoint(path)
    saved, config, vocabulary = read_run(directory)
    training = saved["training"]
    model = BidirectionalLanguageModel(
        config,
        len(vocabulary),
        dropout=training.get("dropout", TrainingOptions.dropout),
        num_sampled=training.get("num_sampled", TrainingOptions.num_sampled),
        reset_state_per_sentence=training.get("reset_state_per_sentence", False),
    )
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=variable_map(model.weights), step=step)
    try:
        checkpoint.restore(prefix).expect_partial().assert_existing_objects_matched()
    except (tf.errors.OpError, IndexError, ValueError, AssertionError) as e:
        base = os.path.basename(prefix) + "."
        entries = [entry for entry in os.listdir(directory) if entry.startswith(base)]
        raise CheckpointError(
            f"{prefix}: cannot restore ({_restore_failure(e, entries)})"
        ) from None
    return model, vocabulary, int(step.numpy())


def dump_weights(checkpoint, outdir, softmax_dtype="float32", overwrite=False):
    """Writes a checkpoint's biLM as official files: ``options.json`` (``n_characters``
    262, the inference value), ``weights.hdf5`` (bilm-tf's layout), ``vocab.txt`` and
    ``softmax.hdf5`` (in ``softmax_dtype``, see :func:`save_softmax`), each replaced
    atomically; ``outdir`` must hold none of them unless ``overwrite``, and none of them may
    be a file of the run (``run_directory.check_dump_directory``). Returns ``(outdir, step)``.
    """
    check_dump_directory(outdir, overwrite, run_files(find_checkpoint(checkpoint)[0]))
    model, vocabulary, step = restore_language_model(checkpoint)
    os.makedirs(outdir, exist_ok=True)
    config = dataclasses.replace(model.config, n_characters=262)
    config.save(os.path.join(outdir, OPTIONS_FILE))
    save_weights(model.elmo, os.path.join(outdir, WEIGHTS_FILE))
    vocabulary.save(os.path.join(outdir, VOCAB_FILE))
    save_softmax(model, os.path.join(outdir, SOFTMAX_FILE), softmax_dtype)
    return outdir, step
