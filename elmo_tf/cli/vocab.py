"""``elmo-tf build-vocab``: a bilm-tf vocabulary file from tokenised text.

The file lists ``<S>``, ``</S>``, ``<UNK>`` and then every token seen at least
``--min-count`` times, by descending frequency (ties in code-point order), one per line:
the format and order bilm-tf's training expects (its sampled softmax assumes the ids are
sorted by frequency).
"""

import sys

from elmo_tf.cli.common import check_input_name, check_output_path
from elmo_tf.training.corpus import list_files, read_corpus
from elmo_tf.training.vocabulary import Vocabulary, check_size_arguments


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "build-vocab",
        help="write a bilm-tf vocabulary file from tokenised text",
        description=(
            "Count the tokens of FILES (UTF-8, one whitespace-tokenised sentence per line; "
            "directories and glob patterns are expanded) and write a vocabulary file: <S>, "
            "</S>, <UNK>, then the tokens by descending frequency."
        ),
    )
    parser.add_argument("files", metavar="FILE", nargs="+", help="text files or directories")
    parser.add_argument("--output", "-o", required=True, metavar="FILE", help="vocabulary file")
    parser.add_argument(
        "--min-count", type=int, default=1, metavar="N", help="drop rarer tokens (default 1)"
    )
    parser.add_argument(
        "--max-size", type=int, metavar="N", help="at most N entries, special tokens included"
    )
    return parser


def run(args):
    check_size_arguments(args.min_count, args.max_size, ("--min-count", "--max-size"))
    for name in args.files:
        check_input_name(name, "FILE")
    inputs = list_files(args.files)
    # the files read, and the directories given (every file below them is read)
    check_output_path(args.output, [*args.files, *inputs], "a vocabulary file name", "--output")
    corpus = read_corpus(inputs)
    vocabulary = Vocabulary.from_counts(
        corpus.counts(), args.min_count, args.max_size, source=args.output
    )
    vocabulary.save(args.output)
    print(
        f"{args.output}: {len(vocabulary)} entries from {corpus.n_tokens} tokens in "
        f"{len(corpus.files)} file(s); out-of-vocabulary rate "
        f"{corpus.oov_rate(vocabulary):.4f}",
        file=sys.stderr,
    )
    return 0
