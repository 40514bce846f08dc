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
continues exactly from the newest checkpoint that restores completely; newer ones that do not
are named with the reason and moved, unchanged, to ``DIR/damaged/``. ``--devices N`` trains
on N GPUs (or N logical CPU devices) with ``MirroredStrategy``; ``--multi-worker`` on several
machines (``TF_CONFIG``; see ``elmo_tf.training.distribution``).

SIGTERM or Ctrl-C (a preemptible machine's notice, a scheduler's stop) lets the step in
flight finish, writes a checkpoint of it, names it and exits with status 0; a second signal
ends the command at once (status 143 or 130), losing the steps since the last checkpoint.

This module parses the flags and prints; ``elmo_tf.training.plan`` checks them and reads the
inputs, ``Trainer`` trains.
"""

import argparse
import dataclasses
import os
import sys
import time

from elmo_tf import presets
from elmo_tf.cli import stop_signals
from elmo_tf.cli.common import check_input_name, check_output_directory
from elmo_tf.cli.progress import Progress
from elmo_tf.presets import published
from elmo_tf.training import run_directory
from elmo_tf.training.training_options import DEFAULT_LEARNING_RATES, TrainingOptions


def add_parser(subparsers):
    defaults = TrainingOptions()
    architecture = presets.TRAINING_DEFAULT
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
        "--resume",
        action="store_true",
        help="continue from the newest checkpoint of DIR that restores (damaged newer ones are "
        "moved to DIR/damaged/)",
    )

    model = parser.add_argument_group(
        f"model (default: a small {architecture.n_lstm_layers}x{architecture.lstm_dim}_"
        f"{architecture.projection_dim} biLM, the bundled model's architecture)"
    )
    source = model.add_mutually_exclusive_group()
    source.add_argument("--options", metavar="FILE", help="architecture from an options.json")
    source.add_argument(
        "--preset", metavar="NAME", help=f"a published architecture: {', '.join(published.names())}"
    )
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
    train.add_argument(
        "--optimizer",
        choices=sorted(DEFAULT_LEARNING_RATES),
        help="adagrad (bilm-tf's; default) or adam (fewer steps on a small corpus)",
    )
    train.add_argument(
        "--learning-rate",
        type=float,
        metavar="RATE",
        help="the optimizer's learning rate (default: adagrad 0.2, adam 0.001)",
    )
    option("--initial-accumulator-value", float, "Adagrad initial accumulator")
    option("--clip-norm", float, "global gradient-norm clip")
    option("--dropout", float, "dropout on LSTM inputs and outputs")
    train.add_argument(
        "--reset-state-per-sentence",
        action="store_const",
        const=True,
        help="start every sentence from the zero LSTM state, as embed runs sentences "
        "(default: carried across sentences, as bilm-tf)",
    )
    option("--epochs", float, "passes over FILES, unless --max-steps")
    option("--max-steps", int, "stop at this step")
    option("--checkpoint-every", int, "steps between checkpoints")
    option("--keep-checkpoints", int, "checkpoints kept")
    option("--log-every", int, "steps between TensorBoard summaries")
    option("--seed", int, "seed of initialisation, shuffling, dropout and sampling")
    train.add_argument(
        "--logdir", metavar="DIR", help='TensorBoard logs (default DIR/logs; "": none)'
    )
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
        raise argparse.ArgumentTypeError(
            f"expected WIDTH:COUNT pairs separated by commas, got {text!r}"
        ) from None


def run(args):
    from elmo_tf.training import plan  # lazy: after the flags' checks; no TensorFlow yet

    for label, value in (
        *(("FILE", name) for name in args.files),
        ("--vocab", args.vocab),
        ("--options", args.options),
        *(("--init-from", name) for name in args.init_from or ()),
    ):
        if value is not None:
            check_input_name(value, label)
    # the run's directory and logs: writable, and outside the corpus's directories
    check_output_directory(args.checkpoint_dir, label="--checkpoint-dir")
    if args.logdir:  # "" writes no logs
        check_output_directory(args.logdir, args.files, label="--logdir")

    def given(names):
        return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}

    training_plan = plan.plan_training(
        args.checkpoint_dir,
        args.files,
        resume=args.resume,
        options=args.options,
        preset=args.preset,
        init_from=args.init_from,
        architecture=given(plan.ARCHITECTURE_SETTINGS),
        vocab=args.vocab,
        vocab_min_count=args.vocab_min_count,
        vocab_max_size=args.vocab_max_size,
        training=given(f.name for f in dataclasses.fields(TrainingOptions)),
    )
    # lazy: TensorFlow starts here, once the plan (files, corpus, options) is checked
    from elmo_tf.training import distribution
    from elmo_tf.training.trainer import Trainer

    strategy = distribution.make_strategy(args.devices, args.multi_worker)
    trainer = Trainer.from_plan(training_plan, args.checkpoint_dir, strategy, args.logdir)
    start = int(trainer.step.numpy())
    if training_plan.resume:
        print(_resumed(trainer.restored), file=sys.stderr)
    if start >= training_plan.total_steps:  # a loss of no step would be NaN: no progress line
        try:
            trainer.train(training_plan.total_steps)  # saves this step if no checkpoint has it
        finally:
            trainer.close()
        total = training_plan.total_steps
        print(
            f"the run is at step {start}, already {'past' if start > total else 'at'} "
            f"--max-steps {total}: nothing to train (give a larger --max-steps to go on); "
            f"{_saved(trainer, args)}",
            file=sys.stderr,
        )
        return 0
    progress = _TrainingProgress(
        training_plan.total_steps, start, checkpoint_every=training_plan.options.checkpoint_every
    )
    try:
        # SIGTERM or Ctrl-C: the step in flight finishes and is saved (a second one ends at once)
        with stop_signals.stop_at_a_safe_point():
            last = trainer.train(
                training_plan.total_steps, callback=progress.step,
                should_stop=stop_signals.should_stop,
            )  # fmt: skip
    except BaseException:
        progress.abort()
        raise
    finally:
        trainer.close()
    progress.close()
    loss = "" if last is None else f", loss {last['loss']:.4f}"
    line = f"step {int(trainer.step.numpy())}{loss}; {_saved(trainer, args)}"
    if last is not None and last["stopped"]:
        line = (
            f"stopped by {stop_signals.requested().name}: {line}; continue with elmo-tf train "
            f"--checkpoint-dir {args.checkpoint_dir} --resume"
        )
    print(line, file=sys.stderr)
    return 0


def _saved(trainer, args):
    """``saved ckpt-N in DIR``: the run's latest checkpoint, as the last line names it."""
    if not trainer.is_chief:
        return (
            f"nothing saved by this worker (the chief writes checkpoints to {args.checkpoint_dir})"
        )
    saved = run_directory.find_checkpoint(args.checkpoint_dir)[1]
    return f"saved {os.path.basename(saved)} in {args.checkpoint_dir}"


def _resumed(restored):
    """``resumed from step N of DIR (ckpt-N)``, then each newer checkpoint skipped and why."""
    parts = [f"resumed from step {restored.step} of {restored.directory} ({restored.name})"]
    for name, reason in restored.skipped:
        moved = restored.set_aside.get(name)
        parts.append(f"skipped {name}: {reason}" + (f" (moved to {moved})" if moved else ""))
    if restored.state_file:
        parts.append(f"the checkpoint state file {restored.state_file} (rewritten)")
    return "; ".join(parts)


class _TrainingProgress(Progress):
    """``Progress`` over steps, with the running loss. Not on a terminal (nohup, a log file, a
    scheduler's output), a plain line after the first step and every ``log_seconds`` (step,
    loss, tokens/s, the time to the next checkpoint at the rate so far), and a line per
    checkpoint: at bilm-tf's 1,000 steps between checkpoints, a log was silent for 20 minutes
    to an hour on 2 cores."""

    def __init__(
        self, total, start, checkpoint_every=None, stream=None, log_seconds=60.0, clock=None
    ):
        self.loss = float("nan")
        self.checkpoint_every = checkpoint_every
        self.log_seconds = log_seconds
        self.clock = clock or time.monotonic
        super().__init__(total, unit="steps", stream=stream, initial=start)
        self.start = self.clock()
        self.logged = None  # when the last plain line was written
        self.first = None  # (time, steps done) after the first step, where the rate starts

    def step(self, metrics):
        self.loss = metrics["loss"]
        self.update(1, tokens=metrics["tokens"])
        if self.interactive:
            return
        now = self.clock()
        if metrics["checkpoint"] and self.done < self.total:
            self._write(self._line(now) + f", saved {metrics['checkpoint']}")
        elif self.logged is None or now - self.logged >= self.log_seconds:
            self._write(self._line(now) + self._next_checkpoint(now))

    def _write(self, line):
        self.logged = self.clock()
        self.stream.write(line + "\n")
        self.stream.flush()

    def _next_checkpoint(self, now):
        """``; next checkpoint (step N) in about T`` at the step rate since the first step: the
        first traces the training graph, which can take longer than a hundred steps, so a rate
        counted from the start would promise hours for minutes. After the first step only the
        step is named."""
        if not self.checkpoint_every or self.done >= self.total:
            return ""
        step = min((self.done // self.checkpoint_every + 1) * self.checkpoint_every, self.total)
        if self.first is None:
            self.first = (now, self.done)
        since, done_then = self.first
        rate = (self.done - done_then) / max(now - since, 1e-9)  # steps per second
        if rate <= 0:
            return f"; next checkpoint at step {step}"
        return f"; next checkpoint (step {step}) in about {_duration((step - self.done) / rate)}"

    def _postfix(self, now):
        return f"{super()._postfix(now)}, loss {self.loss:.4f}"


def _duration(seconds):
    """``45s``, ``12m 5s``, ``3h 20m``: a wait as a person reads it."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60}m"
