"""A training run's directory: its files, and reading its options and checkpoints' list.

A checkpoint directory holds:

==========================  ===========================================================
``options.json``            the architecture (bilm-tf's options schema)
``vocab.txt``               the softmax vocabulary (bilm-tf's format)
``training_options.json``   ``TrainingOptions``, vocabulary size, corpus summary, origin
``checkpoint``, ``ckpt-N``  ``tf.train.Checkpoint`` files: ``model`` (the
                            ``BidirectionalLanguageModel``), ``optimizer``, ``step``, and
                            the carried LSTM state of every batch row (``lstm_cell``,
                            ``lstm_hidden``). The data position and every random draw are
                            functions of ``step`` and the seed, so these make resumption
                            exact.
``damaged/ckpt-N/``         the files of a checkpoint that did not restore when the run
                            was resumed from an older one, moved here unchanged
``logs/``                   TensorBoard summaries (default ``--logdir``)
==========================  ===========================================================

Which checkpoint is the newest is read from the ``ckpt-N`` files present, not from the
``checkpoint`` state file: that file can be garbled, or name a checkpoint whose files are
damaged or gone (``newest_restorable``).
"""

import os
import re

from elmo_tf import checks
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import CheckpointError, TrainingPlanError
from elmo_tf.formats import options_file, weight_file
from elmo_tf.system import files, untrusted_files
from elmo_tf.training.training_options import TrainingOptions
from elmo_tf.training.vocabulary import Vocabulary

OPTIONS_FILE = options_file.FILE_NAME
VOCAB_FILE = "vocab.txt"
TRAINING_OPTIONS_FILE = "training_options.json"
SOFTMAX_FILE = "softmax.hdf5"
WEIGHTS_FILE = weight_file.FILE_NAME
STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's record of its checkpoints
DAMAGED_DIR = "damaged"
# A run on many shards lists every file; a few MiB at most.
MAX_TRAINING_OPTIONS_BYTES = 64 << 20
# The files tf.train.CheckpointManager writes for checkpoint N.
_CHECKPOINT_FILE = re.compile(r"ckpt-(\d+)\.(?:index|data-\d+-of-\d+)")


DUMP_FILES = (OPTIONS_FILE, WEIGHTS_FILE, VOCAB_FILE, SOFTMAX_FILE)  # what dump-weights writes
# The files of fixed name a training run writes into its directory (besides ckpt-N, logs/).
WRITTEN_FILES = (OPTIONS_FILE, VOCAB_FILE, TRAINING_OPTIONS_FILE, STATE_FILE)
# Every file of fixed name read from a run's (or a dump's) directory, and what it is.
READ_FILES = {
    OPTIONS_FILE: "options file",
    VOCAB_FILE: "vocabulary file",
    TRAINING_OPTIONS_FILE: "training options file",
    STATE_FILE: "checkpoint state file",
    WEIGHTS_FILE: "weight file",
    SOFTMAX_FILE: "softmax file",
}


def run_files(path):
    """The paths of the files read from the run directory ``path`` (or the directory of the
    ``ckpt-N`` prefix ``path``): ``READ_FILES`` and the ``ckpt-N`` files, those present."""
    path = os.fspath(path)
    if os.path.isdir(path):
        directory = path
    elif re.fullmatch(r"ckpt-\d+", os.path.basename(path)):  # a checkpoint's prefix
        directory = os.path.dirname(os.path.abspath(path))
    else:
        return []
    try:
        names = sorted(os.listdir(directory))
    except OSError:  # missing, or not a directory: the readers name it
        return []
    return [
        os.path.join(directory, name)
        for name in names
        if name in READ_FILES or _CHECKPOINT_FILE.fullmatch(name)
    ]


def check_run_files(path):
    """Raises ``CheckpointError`` naming the first file of ``run_files(path)`` that is not a
    regular file (links followed): a named pipe or a socket, whose reader (TensorFlow's
    among them) would wait for a writer forever, or a device, read without end. Every reader
    of a run directory calls this before it opens anything there."""
    for file in run_files(path):
        if kind := files.special_kind(file):
            name = os.path.basename(file)
            what = READ_FILES.get(name, "checkpoint file")
            raise CheckpointError(f"{file}: is a {kind}, not {checks.with_article(what)}")


def check_dump_directory(outdir, overwrite=False, reads=()):
    """Raises ``CheckpointError`` unless ``outdir`` can take a dump (``DUMP_FILES``): a
    directory (or none yet) that is no training run, and holds none of those files unless
    ``overwrite`` (another model's files are not replaced by surprise); none of them may be
    one of the files ``reads`` (the run's, ``run_files``), through a link or a hard link."""
    if os.path.lexists(outdir) and not os.path.isdir(outdir):
        raise CheckpointError(f"{outdir}: exists and is not a directory: choose a directory")
    if holds_checkpoints(outdir) or os.path.lexists(os.path.join(outdir, TRAINING_OPTIONS_FILE)):
        raise CheckpointError(
            f"{outdir}: is a training run directory; dump-weights would replace its "
            f"{OPTIONS_FILE} and {VOCAB_FILE} (and evaluate could not tell the dump from its "
            "checkpoints): choose another output directory"
        )
    for name in DUMP_FILES:
        files.check_not_input(
            os.path.join(outdir, name), reads, CheckpointError, "dump into another directory"
        )
    present = [n for n in DUMP_FILES if os.path.lexists(os.path.join(outdir, n))]
    if present and not overwrite:
        raise CheckpointError(
            f"{outdir}: already holds {', '.join(present)}: dump into a new directory, or "
            "give --overwrite to replace them"
        )


def checkpoint_files(directory):
    """``{N: [file names]}`` of the ``ckpt-N`` files (index, data shards) in ``directory``."""
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found = {}
    for name in names:
        match = _CHECKPOINT_FILE.fullmatch(name)
        if match:
            found.setdefault(int(match.group(1)), []).append(name)
    return found


def holds_checkpoints(directory):
    """Whether ``directory`` has checkpoint files or a checkpoint state file."""
    return bool(checkpoint_files(directory)) or os.path.exists(os.path.join(directory, STATE_FILE))


def find_checkpoint(path):
    """``(directory, checkpoint prefix)`` for a checkpoint directory (its ``ckpt-N`` with the
    largest ``N`` that has an index file) or a ``ckpt-N`` prefix."""
    path = os.fspath(path)
    check_run_files(path)
    if os.path.isdir(path):
        found = checkpoint_files(path)
        numbers = [n for n, entries in found.items() if f"ckpt-{n}.index" in entries]
        if not numbers:
            raise CheckpointError(f"{path}: no checkpoint in this directory")
        return path, os.path.join(path, f"ckpt-{max(numbers)}")
    if os.path.exists(path + ".index"):
        return os.path.dirname(os.path.abspath(path)), path
    raise CheckpointError(f"{path}: neither a checkpoint directory nor a checkpoint prefix")


def read_training_options(directory):
    """The parsed ``training_options.json`` of a checkpoint directory, its structure checked
    (``training`` holds valid ``TrainingOptions``; ``corpus`` the files, sentences and tokens
    trained on); a damaged file raises ``CheckpointError`` naming it."""
    path = os.path.join(directory, TRAINING_OPTIONS_FILE)
    if not os.path.lexists(path):
        raise CheckpointError(f"{path}: missing; not a training directory")
    what = "training options file"
    data = untrusted_files.read_bounded(path, what, MAX_TRAINING_OPTIONS_BYTES, CheckpointError)
    saved = untrusted_files.parse_json(data, path, what, CheckpointError)
    _check_training_options(path, saved)
    return saved


def _check_training_options(path, saved):
    def fail(expected):
        raise CheckpointError(f"{path}: {expected}")

    if not isinstance(saved, dict):
        fail(f"expected a JSON object, got {type(saved).__name__}")
    if not isinstance(saved.get("training"), dict):
        fail("'training' must be a JSON object of training options")
    try:
        TrainingOptions.from_dict(saved["training"], source="'training'")
    except TrainingPlanError as e:
        message = str(e)
        fail(message if message.startswith("'training'") else f"'training': {message}")
    corpus = saved.get("corpus")
    if not isinstance(corpus, dict):
        fail("'corpus' must be a JSON object (files, sentences, tokens)")
    names = corpus.get("files")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        fail("'corpus.files' must be a list of file names")
    for key in ("sentences", "tokens"):
        value = corpus.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            fail(f"'corpus.{key}' must be a non-negative integer, got {value!r}")
    size = saved.get("vocab_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
        fail(f"'vocab_size' must be an integer, got {size!r}")
    init_from = saved.get("init_from")
    if init_from is not None and (
        not isinstance(init_from, list)
        or len(init_from) != 2
        or not all(isinstance(p, str) for p in init_from)
    ):
        fail("'init_from' must be null or [options file, weight file]")


def read_run(directory):
    """``(training options, ElmoConfig, Vocabulary)`` of a training directory: its
    ``training_options.json`` (``read_training_options``), ``options.json`` and
    ``vocab.txt``, each error naming its file; a vocabulary of another size than the run's
    raises ``CheckpointError`` (its checkpoints would not fit it). A file there that is not a
    regular file raises ``CheckpointError`` before anything is opened (``check_run_files``)."""
    check_run_files(directory)
    saved = read_training_options(directory)
    config = ElmoConfig.from_file(os.path.join(directory, OPTIONS_FILE))
    vocab_path = os.path.join(directory, VOCAB_FILE)
    vocabulary = Vocabulary.from_file(vocab_path)
    expected = saved.get("vocab_size")
    if expected is not None and len(vocabulary) != expected:
        raise CheckpointError(
            f"{vocab_path}: holds {len(vocabulary)} tokens, but the run was trained with "
            f"{expected} ('vocab_size' of {TRAINING_OPTIONS_FILE}); not the run's vocabulary"
        )
    return saved, config, vocabulary
