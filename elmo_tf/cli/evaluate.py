"""``elmo-tf evaluate``: held-out perplexity of a trained biLM, as JSON on stdout.

bilm-tf's definition: each direction's perplexity is ``exp`` of its mean cross-entropy per
predicted position with the full softmax (the text read in order, the LSTM state carried
across sentences); ``perplexity`` is ``exp`` of the mean of the two directions' losses.
``oov_rate`` is the fraction of the text's tokens outside the vocabulary.

``--unigram-baseline TRAIN_FILES`` adds ``unigram_baseline``: the same perplexities for
unigram LMs estimated on the training text over the model's vocabulary, predicting what the
biLM predicts (``elmo_tf.training.unigram``).
"""

import json
import math

from elmo_tf.cli.common import CommandError, check_input_name
from elmo_tf.training.corpus import read_corpus
from elmo_tf.training.run_directory import check_run_files
from elmo_tf.training.unigram import unigram_perplexity


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "evaluate",
        help="held-out perplexity of a trained biLM (JSON on stdout)",
        description=(
            "Compute the forward, backward and mean perplexity of MODEL on FILES (UTF-8, one "
            "whitespace-tokenised sentence per line). MODEL is a training checkpoint "
            "(directory or ckpt-N prefix) or a directory written by 'elmo-tf dump-weights'."
        ),
    )
    parser.add_argument("model", metavar="MODEL", help="checkpoint, or dump-weights directory")
    parser.add_argument("files", metavar="FILE", nargs="+", help="held-out text files")
    parser.add_argument(
        "--batch-size", type=int, default=64, metavar="N", help="streams read side by side"
    )
    parser.add_argument(
        "--unroll-steps", type=int, default=20, metavar="T", help="positions per window"
    )
    parser.add_argument(
        "--unigram-baseline",
        nargs="+",
        metavar="TRAIN_FILE",
        help="also report the perplexity of a unigram LM estimated on these training files",
    )
    parser.add_argument(
        "--unigram-smoothing",
        type=float,
        default=0.0,
        metavar="K",
        help="add-K smoothing of the unigram baseline (default 0: maximum likelihood)",
    )
    return parser


def run(args):
    for name in ("batch_size", "unroll_steps"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.unigram_smoothing < math.inf:  # nan fails too
        raise CommandError(
            f"--unigram-smoothing must be a finite number >= 0, got {args.unigram_smoothing}"
        )
    check_input_name(args.model, "MODEL", what="run directory")
    for label, name in (
        *(("FILE", f) for f in args.files),
        *(("--unigram-baseline", f) for f in args.unigram_baseline or ()),
    ):
        check_input_name(name, label)
    check_run_files(args.model)  # before TensorFlow: no file there a reader would wait on
    corpus = read_corpus(args.files, what="held-out")
    train_corpus = None
    if args.unigram_baseline:
        train_corpus = read_corpus(args.unigram_baseline, what="training")
    # lazy: the command line starts without TensorFlow
    from elmo_tf.training.evaluation import evaluate, load_for_evaluation

    model, vocabulary = load_for_evaluation(args.model)
    baseline = None
    if train_corpus is not None:
        try:  # before the slow part, so that a zero probability stops the run at once
            baseline = unigram_perplexity(train_corpus, corpus, vocabulary, args.unigram_smoothing)
        except ValueError as e:
            raise CommandError(f"--unigram-baseline: {e} (--unigram-smoothing)") from None
    result = evaluate(model, corpus, vocabulary, args.batch_size, args.unroll_steps)
    if baseline is not None:
        result["unigram_baseline"] = baseline
    # Strict JSON: a perplexity that overflowed is written as null, never as a bare Infinity
    # or NaN that JSON parsers refuse.
    print(json.dumps(_strict_json(result), indent=2, allow_nan=False))
    return 0


def _strict_json(value):
    """``value`` with its floats as Python floats and the non-finite ones as ``None``."""
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict_json(v) for v in value]
    if isinstance(value, float):  # numpy's float64 too
        return float(value) if math.isfinite(value) else None
    return value
