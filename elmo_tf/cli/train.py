"""``elmo-tf train``: train ELMo's bidirectional language model on tokenised text.

The objective, data stream, optimiser and defaults are bilm-tf's (see
``elmo_tf.training``): forward and backward LMs over a shared character CNN and a shared
softmax, sampled softmax (log-uniform candidates over a frequency-sorted vocabulary),
truncated back-propagation over windows of ``--unroll-steps`` with the LSTM state carried
between windows, dropout 0.1, Adagrad (0.2, accumulator 1.0), gradients clipped to global
norm 10.

Everything about the run lands in ``--checkpoint-dir``: ``options.json``, ``vocab.txt``,
``training_options.json``, the checkpoints (every ``--checkpoint-every`` steps and at the
end) and, unless ``--logdir`` says otherwise, TensorBoard logs under ``logs/``. ``--resume``
continues exactly from the newest checkpoint. ``--devices N`` trains on N GPUs (or N
logical CPU devices) with ``MirroredStrategy``; ``--multi-worker`` on several machines
(``TF_CONFIG``; see ``elmo_tf.training.distribution``).
"""

import dataclasses
import os
import sys
import time

from elmo_tf.cli.common import CommandError, Progress

# Flags that set one ElmoConfig field.
_ARCHITECTURE_FLAGS = {
    "projection_dim": "projection_dim",
    "lstm_dim": "lstm_dim",
    "n_layers": "n_lstm_layers",
    "char_embedding_dim": "char_embedding_dim",
    "n_highway": "n_highway",
    "filters": "filters",
}
# TrainingOptions that may change when resuming.
_RESUMABLE = ("max_steps", "epochs", "checkpoint_every", "keep_checkpoints", "log_every")


def add_parser(subparsers):
    from elmo_tf.training.training_options import TrainingOptions

    defaults = TrainingOptions()
    parser = subparsers.add_parser(
        "train",
        help="train the biLM on tokenised text",
        description=(
            "Train ELMo's bidirectional language model on FILES (UTF-8 text, one "
            "whitespace-tokenised sentence per line; directories and glob patterns are "
            "expanded), writing checkpoints to --checkpoint-dir."
        ),
    )
    parser.add_argument(
        "files", metavar="FILE", nargs="*", help="training text (with --resume: optional)"
    )
    parser.add_argument("--checkpoint-dir", required=True, metavar="DIR", help="run directory")
    parser.add_argument(
        "--resume", action="store_true", help="continue from the newest checkpoint of DIR"
    )

    model = parser.add_argument_group("model (default: a small 2x512_128 biLM)")
    source = model.add_mutually_exclusive_group()
    source.add_argument("--options", metavar="FILE", help="architecture from an options.json")
    source.add_argument("--preset", metavar="NAME", help="small, medium or original")
    source.add_argument(
        "--init-from",
        nargs=2,
        metavar=("OPTIONS", "WEIGHTS"),
        help="start from official-format weights (softmax from softmax.hdf5 beside them, else new)",
    )
    model.add_argument("--projection-dim", type=int, metavar="P", help="LSTM output size")
    model.add_argument("--lstm-dim", type=int, metavar="D", help="LSTM cell size")
    model.add_argument("--n-layers", type=int, metavar="L", help="LSTM layers per direction")
    model.add_argument("--char-embedding-dim", type=int, metavar="E", help="character vector")
    model.add_argument("--n-highway", type=int, metavar="H", help="highway layers")
    model.add_argument(
        "--filters", type=_filters, metavar="W:N,...", help="CNN filters, e.g. 1:32,2:32,3:64"
    )

    vocab = parser.add_argument_group("vocabulary (default: built from FILES)")
    vocab.add_argument("--vocab", metavar="FILE", help="a bilm-tf vocabulary file")
    vocab.add_argument(
        "--vocab-min-count", type=int, metavar="N", help="when building: drop rarer tokens (1)"
    )
    vocab.add_argument("--vocab-max-size", type=int, metavar="N", help="when building: cap")

    train = parser.add_argument_group("training")

    def option(flag, kind, help_text):
        name = flag[2:].replace("-", "_")
        train.add_argument(
            flag,
            type=kind,
            metavar=name.split("_")[-1].upper(),
            help=f"{help_text} (default {getattr(defaults, name)})",
        )

    option("--batch-size", int, "streams per batch, over all replicas")
    option("--unroll-steps", int, "positions per back-propagation window")
    option("--num-sampled", int, "sampled-softmax candidates, capped at the vocabulary size")
    option("--learning-rate", float, "Adagrad learning rate")
    option("--initial-accumulator-value", float, "Adagrad initial accumulator")
    option("--clip-norm", float, "global gradient-norm clip")
    option("--dropout", float, "dropout on LSTM inputs and outputs")
    option("--epochs", float, "passes over FILES, unless --max-steps")
    option("--max-steps", int, "stop at this step")
    option("--checkpoint-every", int, "steps between checkpoints")
    option("--keep-checkpoints", int, "checkpoints kept")
    option("--log-every", int, "steps between TensorBoard summaries")
    option("--seed", int, "seed of initialisation, shuffling, dropout and sampling")
    train.add_argument("--logdir", metavar="DIR", help="TensorBoard logs (default DIR/logs)")
    train.add_argument(
        "--devices", type=int, metavar="N", help="replicas: N GPUs, or N logical CPU devices"
    )
    train.add_argument(
        "--multi-worker",
        action="store_true",
        help="MultiWorkerMirroredStrategy across machines (configured by TF_CONFIG)",
    )
    return parser


def _filters(text):
    try:
        pairs = [item.split(":") for item in text.split(",")]
        return [[int(w), int(n)] for w, n in pairs]
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(
            f"expected WIDTH:COUNT pairs separated by commas, got {text!r}"
        ) from None


def run(args):
    from elmo_tf.config import OptionsError
    from elmo_tf.training.checkpoints import CheckpointError
    from elmo_tf.training.corpus import CorpusError
    from elmo_tf.training.distribution import DistributionError
    from elmo_tf.training.vocabulary import VocabularyError

    try:
        plan = _plan(args)
        return _train(args, plan)
    except (CorpusError, VocabularyError, CheckpointError, DistributionError) as e:
        raise CommandError(str(e)) from None
    except OptionsError:
        raise
    except ValueError as e:  # TrainingOptions or the data pipeline refusing a value
        raise CommandError(str(e)) from None


@dataclasses.dataclass
class _Plan:
    config: object
    vocabulary: object
    corpus: object
    options: object
    init_from: tuple | None
    resume: bool


def _given_training_options(args):
    from elmo_tf.training.training_options import TrainingOptions

    names = [f.name for f in dataclasses.fields(TrainingOptions)]
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def _plan(args):
    """Everything checked and read before TensorFlow starts: bad input stops here."""
    from elmo_tf.training.corpus import read_corpus
    from elmo_tf.training.training_options import TrainingOptions

    given = _given_training_options(args)
    if given.get("epochs") is not None and "max_steps" not in given:
        given["max_steps"] = None
    directory = args.checkpoint_dir
    has_checkpoint = os.path.exists(os.path.join(directory, "checkpoint"))
    if args.resume:
        return _resume_plan(args, given, directory, has_checkpoint)
    if has_checkpoint:
        raise CommandError(
            f"{directory}: already holds checkpoints; pass --resume to continue that run or "
            "choose another --checkpoint-dir"
        )
    if not args.files:
        raise CommandError("no training FILE given")
    options = TrainingOptions(**given)
    config = _architecture(args)
    corpus = read_corpus(args.files)
    vocabulary = _vocabulary(args, corpus)
    _check_size(corpus, options)
    init_from = tuple(args.init_from) if args.init_from else None
    return _Plan(config, vocabulary, corpus, options, init_from, resume=False)


def _resume_plan(args, given, directory, has_checkpoint):
    from elmo_tf.config import ElmoConfig
    from elmo_tf.training import checkpoints
    from elmo_tf.training.corpus import read_corpus
    from elmo_tf.training.training_options import TrainingOptions
    from elmo_tf.training.vocabulary import Vocabulary

    if not has_checkpoint:
        raise CommandError(f"{directory}: no checkpoint to resume from")
    saved = checkpoints.read_training_options(directory)
    options = TrainingOptions.from_dict(saved["training"])
    for name, value in given.items():
        if name not in _RESUMABLE and value != getattr(options, name):
            raise CommandError(
                f"--{name.replace('_', '-')} {value} differs from the run being resumed "
                f"({getattr(options, name)}); a resumed run keeps it"
            )
    fixed = [
        flag
        for flag in ("options", "preset", "init_from", "vocab", "vocab_min_count", "vocab_max_size")
        + tuple(_ARCHITECTURE_FLAGS)
        if getattr(args, flag) is not None
    ]
    if fixed:
        raise CommandError(
            f"--{fixed[0].replace('_', '-')} cannot be given with --resume: the model and "
            "vocabulary are those of the checkpoint"
        )
    options = options.replace(**{k: v for k, v in given.items() if k in _RESUMABLE})
    files = args.files or saved["corpus"]["files"]
    corpus = read_corpus(files)
    if (corpus.n_sentences, corpus.n_tokens) != (
        saved["corpus"]["sentences"],
        saved["corpus"]["tokens"],
    ):
        raise CommandError(
            f"the training data has {corpus.n_sentences} sentences and {corpus.n_tokens} "
            f"tokens, but the run in {directory} was trained on "
            f"{saved['corpus']['sentences']} and {saved['corpus']['tokens']}; resume on the "
            "same data"
        )
    config = ElmoConfig.from_file(os.path.join(directory, checkpoints.OPTIONS_FILE))
    vocabulary = Vocabulary.from_file(os.path.join(directory, checkpoints.VOCAB_FILE))
    init_from = tuple(saved["init_from"]) if saved.get("init_from") else None
    return _Plan(config, vocabulary, corpus, options, init_from, resume=True)


def _architecture(args):
    from elmo_tf import presets
    from elmo_tf.config import ElmoConfig, OptionsError

    overrides = {
        field: getattr(args, flag)
        for flag, field in _ARCHITECTURE_FLAGS.items()
        if getattr(args, flag) is not None
    }
    if args.init_from:
        if overrides:
            raise CommandError(
                "architecture flags cannot be combined with --init-from (the weights fix it)"
            )
        return ElmoConfig.from_file(args.init_from[0])
    if args.options:
        config = ElmoConfig.from_file(args.options)
    elif args.preset:
        try:
            config = presets.preset(args.preset)
        except ValueError as e:
            raise CommandError(f"--preset: {e}") from None
    else:
        config = presets.TRAINING_DEFAULT
    try:
        return dataclasses.replace(config, **overrides)
    except OptionsError as e:
        raise CommandError(f"architecture flags: {e}") from None


def _vocabulary(args, corpus):
    from elmo_tf.training.vocabulary import Vocabulary

    if args.vocab:
        if args.vocab_min_count is not None or args.vocab_max_size is not None:
            raise CommandError(
                "--vocab-min-count/--vocab-max-size build a vocabulary; not with --vocab"
            )
        return Vocabulary.from_file(args.vocab)
    return Vocabulary.from_counts(
        corpus.counts(),
        min_count=args.vocab_min_count or 1,
        max_size=args.vocab_max_size,
        source="vocabulary built from the training files",
    )


def _check_size(corpus, options):
    if corpus.n_sentences < options.batch_size:
        raise CommandError(
            f"the training data has {corpus.n_sentences} sentences, fewer than --batch-size "
            f"{options.batch_size} (every batch row reads its own sentences)"
        )


class _TrainingProgress(Progress):
    """``Progress`` over steps, with the running loss; on a log, a line per checkpoint."""

    def __init__(self, total, start, stream=None):
        super().__init__(total, unit="steps", stream=stream)
        self.done = start
        self._start_step = start
        self.loss = float("nan")

    def step(self, metrics):
        self.loss = metrics["loss"]
        self.update(1, tokens=metrics["tokens"])
        if metrics["checkpoint"] and not self.interactive and self.done < self.total:
            self.stream.write(self._line(time.monotonic()) + f", saved {metrics['checkpoint']}\n")
            self.stream.flush()

    def _line(self, now):
        return f"{super()._line(now)}, loss {self.loss:.4f}"


def _train(args, plan):
    from elmo_tf.training import data, distribution
    from elmo_tf.training.trainer import Trainer, new_model, write_training_files

    strategy = distribution.make_strategy(args.devices, args.multi_worker)
    options = plan.options
    if options.batch_size % strategy.num_replicas_in_sync:
        raise CommandError(
            f"--batch-size {options.batch_size} is not divisible by the "
            f"{strategy.num_replicas_in_sync} replicas"
        )
    total = options.total_steps(plan.corpus.n_positions)
    if distribution.is_chief(strategy):
        write_training_files(
            args.checkpoint_dir,
            plan.config,
            plan.vocabulary,
            options,
            plan.corpus,
            plan.init_from,
        )
    tables = data.StreamTables(plan.corpus, plan.corpus.type_targets(plan.vocabulary))
    builder = new_model(plan.config, len(plan.vocabulary), options, plan.init_from)
    trainer = Trainer(builder, tables, options, args.checkpoint_dir, strategy, args.logdir)
    start = 0
    if plan.resume:
        start = trainer.restore()
        print(f"resumed from step {start} of {args.checkpoint_dir}", file=sys.stderr)
    progress = _TrainingProgress(total, start)
    try:
        last = trainer.train(total, callback=progress.step)
    except BaseException:
        progress.abort()
        raise
    progress.close()
    loss = "" if last is None else f", loss {last['loss']:.4f}"
    print(
        f"step {int(trainer.step.numpy())}{loss}; checkpoints in {args.checkpoint_dir}",
        file=sys.stderr,
    )
    return 0
