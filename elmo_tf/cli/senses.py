"""``elmo-tf senses``: the word-sense probe of a model beside its random-weight twin.

For each output layer, the nearest-neighbour accuracy of ``elmo_tf.word_senses`` (does the
vector of an ambiguous word sit nearest to a use of the same sense?) for MODEL and for the
same architecture with random weights (the mean over ``--random-seeds`` initialisations).
Context-free layers score chance; what a trained biLM adds over its random twin is what it
learnt about context. Prints a Markdown table (or JSON with ``--json``).
"""

import json

from elmo_tf import checks
from elmo_tf.cli.common import CommandError, check_input_name
from elmo_tf.cli.model_flags import (
    add_model_arguments,
    add_precision_argument,
    check_in_process_precision,
    check_model,
    load_model,
)

# Random-weight twins at most: each builds and runs the whole model over the probe set.
MAX_RANDOM_SEEDS = 100


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "senses",
        help="word-sense probe: per-layer nearest-neighbour accuracy vs random weights",
        description=(
            "Embed a probe set of sentences that use ambiguous words (bank, capital, order, "
            "interest, duty, party) in two senses each, and report, per output layer, how "
            "often a word's nearest neighbour (cosine, among the other sentences of the same "
            "word) has the same sense: for MODEL and for its random-weight twin."
        ),
    )
    add_model_arguments(parser)
    parser.add_argument(
        "--examples",
        metavar="TSV",
        help="probe set, WORD<TAB>SENSE<TAB>tokenised sentence per line (default: bundled)",
    )
    parser.add_argument(
        "--random-seeds",
        type=int,
        default=3,
        metavar="N",
        help="random-weight initialisations averaged for the twin (default 3; 0: none; at most "
        f"{MAX_RANDOM_SEEDS})",
    )
    add_precision_argument(
        parser,
        ("float32", "bfloat16"),
        "the precision MODEL computes in (default float32; bfloat16 needs a CPU with AVX-512 "
        "BF16 or AMX, or a GPU); its random twins compute in float32",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def run(args):
    checks.integer("--random-seeds", args.random_seeds, 0, MAX_RANDOM_SEEDS, error=CommandError)
    if args.examples is not None:
        check_input_name(args.examples, "--examples")
    check_in_process_precision(args.precision)
    check_model(args)  # before TensorFlow: names, files, the options
    # lazy: the command line starts without TensorFlow
    import keras
    import numpy as np

    from elmo_tf.models import ELMo
    from elmo_tf.probes import word_senses

    examples = word_senses.load_examples(args.examples)
    model = load_model(args, step="", precision=args.precision)
    trained = word_senses.nearest_neighbour_accuracy(model, examples)
    twins = []
    for seed in range(args.random_seeds):
        keras.utils.set_random_seed(seed)
        twin = ELMo(model.config, vocabulary=model.vocabulary)  # a code-point model's tables
        twins.append(word_senses.nearest_neighbour_accuracy(twin, examples))
    words = sorted({e.word for e in examples})
    report = {
        "examples": len(examples),
        "precision": args.precision,
        "words": words,
        "model": trained,
        "random_twin": {k: float(np.mean([t[k] for t in twins])) for k in trained}
        if twins
        else None,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"Nearest-neighbour sense accuracy, {len(examples)} sentences, {len(words)} words")
    print(f"({', '.join(words)}); chance is what the context-free word_emb scores.\n")
    twin_header = f" | random weights (mean of {len(twins)})" if twins else ""
    print(f"| layer | this model{twin_header} |")
    print("|---|---|" + ("---|" if twins else ""))
    for key, value in trained.items():
        twin = f" | {report['random_twin'][key]:.3f}" if twins else ""
        print(f"| {key} | {value:.3f}{twin} |")
    return 0
