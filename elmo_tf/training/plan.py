"""TrainingPlan: everything a training run needs, checked and read before TensorFlow starts.

``plan_training`` turns the settings of a run (what ``elmo-tf train`` takes as flags) into a
``TrainingPlan``: the architecture, the vocabulary, the corpus and the ``TrainingOptions``,
for a new run or for one resumed from its checkpoint directory. Settings that contradict each
other or the run being resumed raise ``TrainingPlanError``; unreadable files raise the error
of their kind (``CorpusError``, ``VocabularyError``, ``OptionsError``, ...). Nothing is
written: bad input stops here. Which checkpoint a resumed run continues from is decided when
it is restored (``Trainer.from_plan``: the newest that restores completely, see
``checkpoints.newest_restorable``). Errors name a setting as this function's arguments do
(``n_layers``; ``elmo-tf train`` spells it with dashes, ``--n-layers``).

Example:
>>> plan = plan_training("run1", ["train.txt"], training={"batch_size": 64})
>>> trainer = Trainer.from_plan(plan, "run1")  # writes the run's files, builds the model
"""

import dataclasses
import os

from elmo_tf import presets
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import OptionsError, PresetError, TrainingPlanError
from elmo_tf.system import files as output_files
from elmo_tf.training import run_directory
from elmo_tf.training.corpus import list_files, read_corpus
from elmo_tf.training.training_options import TrainingOptions, check_known
from elmo_tf.training.vocabulary import Vocabulary, check_size_arguments

# Architecture settings (keys of ``plan_training``'s ``architecture``) and the ElmoConfig
# field each sets.
ARCHITECTURE_SETTINGS = {
    "projection_dim": "projection_dim",
    "lstm_dim": "lstm_dim",
    "n_layers": "n_lstm_layers",
    "char_embedding_dim": "char_embedding_dim",
    "n_highway": "n_highway",
    "filters": "filters",
}
# TrainingOptions that may change when resuming.
RESUMABLE = ("max_steps", "epochs", "checkpoint_every", "keep_checkpoints", "log_every")


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """A checked training run.

    Attributes:
        config: the ``ElmoConfig`` to train.
        vocabulary: the softmax ``Vocabulary``.
        corpus: the training ``Corpus``.
        options: the ``TrainingOptions``.
        init_from: ``(options_file, weight_file)`` of official-format weights to start from,
            or ``None``.
        resume: continue from the newest checkpoint of the directory that restores.
    """

    config: object
    vocabulary: object
    corpus: object
    options: object
    init_from: tuple | None
    resume: bool

    @property
    def total_steps(self):
        """The step the run stops at: ``max_steps``, or that of ``epochs`` over the corpus."""
        return self.options.total_steps(self.corpus.n_positions)


def plan_training(
    checkpoint_dir,
    files=(),
    *,
    resume=False,
    options=None,
    preset=None,
    init_from=None,
    architecture=None,
    vocab=None,
    vocab_min_count=None,
    vocab_max_size=None,
    training=None,
):
    """Checks the settings of a training run and reads its inputs; returns a ``TrainingPlan``.

    Args:
        checkpoint_dir: the run directory. A new run needs one without checkpoints; a resumed
            run takes its architecture, vocabulary and training options from it (a damaged
            ``training_options.json``, ``options.json`` or ``vocab.txt`` raises the error of
            its kind naming the file).
        files: training text files, directories or glob patterns (when resuming: optional,
            default those of the run).
        resume: continue the run in ``checkpoint_dir``.
        options, preset, init_from: where the architecture comes from, at most one: an
            options.json, a published architecture's name (``elmo_tf.presets``), or
            ``(options_file, weight_file)`` of official-format weights to start from.
            Default ``presets.TRAINING_DEFAULT``.
        architecture: ``{setting: value}`` overriding single fields of that architecture;
            settings are the keys of ``ARCHITECTURE_SETTINGS``. Not with ``init_from``.
        vocab: a vocabulary file; default: built from the training text, leaving out tokens
            seen fewer than ``vocab_min_count`` (1) times and keeping at most
            ``vocab_max_size`` entries.
        training: ``{field: value}`` of ``TrainingOptions`` to set (the rest keep their
            defaults, or the resumed run's values). When resuming only ``RESUMABLE`` ones
            may differ from the run's.
    """
    given = dict(training or {})
    check_known(given)
    if given.get("epochs") is not None and "max_steps" not in given:
        given["max_steps"] = None  # epochs given: they, not a saved max_steps, end the run
    architecture = dict(architecture or {})
    unknown = sorted(set(architecture) - set(ARCHITECTURE_SETTINGS))
    if unknown:
        raise TrainingPlanError(
            f"unknown architecture setting(s) {', '.join(unknown)}; expected some of "
            f"{', '.join(ARCHITECTURE_SETTINGS)}"
        )
    files = list(files or [])
    if os.path.lexists(checkpoint_dir) and not os.path.isdir(checkpoint_dir):
        raise TrainingPlanError(
            f"{checkpoint_dir}: exists and is not a directory: choose a checkpoint directory"
        )
    run_directory.check_run_files(checkpoint_dir)  # a named pipe there would hang its reader
    # The checkpoint files, not only the state file: either may be there without the other.
    has_checkpoint = run_directory.holds_checkpoints(checkpoint_dir)
    if resume:
        model_settings = {
            "options": options,
            "preset": preset,
            "init_from": init_from,
            "vocab": vocab,
            "vocab_min_count": vocab_min_count,
            "vocab_max_size": vocab_max_size,
            **architecture,
        }
        fixed = [name for name, value in model_settings.items() if value is not None]
        return _resume_plan(checkpoint_dir, files, given, fixed, has_checkpoint)
    if vocab is None:  # the bounds of the vocabulary to build, before the corpus is read
        check_size_arguments(
            1 if vocab_min_count is None else vocab_min_count,
            vocab_max_size,
            ("vocab_min_count", "vocab_max_size"),
        )
    if has_checkpoint:
        raise TrainingPlanError(
            f"{checkpoint_dir}: already holds checkpoints; set resume to continue that run, or "
            "choose another checkpoint_dir"
        )
    if not files:
        raise TrainingPlanError("no training files given")

    training_options = TrainingOptions(**given)
    read = [vocab, options, *(init_from or ())]
    if init_from:  # the softmax beside the weights, when there is one
        read.append(os.path.join(os.path.dirname(init_from[1]), run_directory.SOFTMAX_FILE))
    check_writes(checkpoint_dir, files, [p for p in read if p])
    config = _architecture(options, preset, init_from, architecture)
    corpus = read_corpus(files)
    vocabulary = _vocabulary(vocab, vocab_min_count, vocab_max_size, corpus)
    _check_size(corpus, training_options)
    init_from = tuple(init_from) if init_from else None
    return TrainingPlan(config, vocabulary, corpus, training_options, init_from, resume=False)


def _resume_plan(directory, files, given, fixed, has_checkpoint):
    if not has_checkpoint:
        raise TrainingPlanError(f"{directory}: no checkpoint to resume from")
    if not run_directory.checkpoint_files(directory):
        raise TrainingPlanError(
            f"{directory}: no checkpoint to resume from (there is a '{run_directory.STATE_FILE}' "
            "state file, but no ckpt-N.index or ckpt-N.data files)"
        )
    saved, config, vocabulary = run_directory.read_run(directory)
    check_writes(directory, files or saved["corpus"]["files"])
    options = TrainingOptions.from_dict(saved["training"])
    for name, value in given.items():
        if name not in RESUMABLE and value != getattr(options, name):
            raise TrainingPlanError(
                f"{name} {value} differs from the run being resumed "
                f"({getattr(options, name)}); a resumed run keeps it"
            )
    if fixed:
        raise TrainingPlanError(
            f"{fixed[0]} cannot be given with resume: the model and vocabulary are "
            "those of the checkpoint"
        )
    options = options.replace(**{k: v for k, v in given.items() if k in RESUMABLE})
    corpus = read_corpus(files or saved["corpus"]["files"])
    trained_on = (saved["corpus"]["sentences"], saved["corpus"]["tokens"])
    if (corpus.n_sentences, corpus.n_tokens) != trained_on:
        raise TrainingPlanError(
            f"the training data has {corpus.n_sentences} sentences and {corpus.n_tokens} "
            f"tokens, but the run in {directory} was trained on {trained_on[0]} and "
            f"{trained_on[1]}; resume on the same data"
        )
    init_from = tuple(saved["init_from"]) if saved.get("init_from") else None
    return TrainingPlan(config, vocabulary, corpus, options, init_from, resume=True)


def check_writes(checkpoint_dir, corpus, read=()):
    """Raises ``TrainingPlanError`` when the run would write over or into what it reads:
    ``checkpoint_dir`` is a ``corpus`` directory or lies inside one (every file below it is
    read: a later run would read its checkpoints as text), or a file the run writes there
    (``run_directory.WRITTEN_FILES``) is a corpus file or one of the files ``read``
    (vocabulary, options, weights)."""
    corpus = list(corpus)
    directories = [p for p in corpus if os.path.isdir(p)]
    output_files.check_not_input(
        checkpoint_dir, directories, TrainingPlanError, "choose another checkpoint_dir"
    )
    inputs = [*_expanded(corpus), *read]
    for name in run_directory.WRITTEN_FILES:
        output_files.check_not_input(
            os.path.join(checkpoint_dir, name),
            inputs,
            TrainingPlanError,
            "the run writes it: choose another checkpoint_dir",
        )


def _expanded(corpus):
    """The files of ``corpus`` as ``read_corpus`` lists them; none when it lists none (that
    error is ``read_corpus``'s to give, with its words)."""
    try:
        return list_files(corpus)
    except ValueError:
        return []


def _architecture(options, preset, init_from, overrides):
    given = {"options": options, "preset": preset, "init_from": init_from}
    sources = [name for name, value in given.items() if value is not None]
    if len(sources) > 1:
        raise TrainingPlanError(
            f"{sources[0]} and {sources[1]} both set the architecture; give one"
        )
    if init_from:
        if overrides:
            raise TrainingPlanError(
                f"{next(iter(overrides))} cannot be combined with init_from (the "
                "weights fix the architecture)"
            )
        return ElmoConfig.from_file(init_from[0])
    if options:
        config = ElmoConfig.from_file(options)
    elif preset:
        try:
            config = presets.preset(preset)
        except PresetError as e:
            raise TrainingPlanError(f"preset: {e}") from None
    else:
        config = presets.TRAINING_DEFAULT
    fields = {ARCHITECTURE_SETTINGS[name]: value for name, value in overrides.items()}
    try:
        return dataclasses.replace(config, **fields)
    except OptionsError as e:
        raise TrainingPlanError(f"architecture settings: {e}") from None


def _vocabulary(vocab, min_count, max_size, corpus):
    if vocab:
        if min_count is not None or max_size is not None:
            raise TrainingPlanError(
                "vocab_min_count and vocab_max_size build a vocabulary; not with vocab"
            )
        return Vocabulary.from_file(vocab)
    return Vocabulary.from_counts(
        corpus.counts(),
        min_count=1 if min_count is None else min_count,
        max_size=max_size,
        source="vocabulary built from the training files",
    )


def _check_size(corpus, options):
    if corpus.n_sentences < options.batch_size:
        raise TrainingPlanError(
            f"the training data has {corpus.n_sentences} sentences, fewer than batch_size "
            f"{options.batch_size} (every batch row reads its own sentences)"
        )
