"""``elmo-tf client``: fetch ELMo vectors from a server speaking TF Serving's gRPC protocol.

Works against ``elmo-tf serve`` and against TF Serving itself (stock stubs only). The input is
read as most Unix tools read theirs:

- ``-``: standard input, one whitespace-tokenised sentence per line (a file named ``-`` is
  ``./-``);
- the name of a file: its lines, one sentence each; a name that exists but is no readable
  text file (a directory, an unreadable file, a broken link) is an error naming it, never a
  sentence;
- anything else: the text of one sentence.

``--version`` and ``--timeout`` are checked as flags, before TensorFlow is imported. Prints each
output's shape, or with ``--json`` the values.
"""

import argparse
import json
import os
import sys

from elmo_tf import checks
from elmo_tf.cli.common import CommandError, require_extra
from elmo_tf.errors import InputFileError
from elmo_tf.export.versions import parse_version
from elmo_tf.serving.options import check_seconds
from elmo_tf.tokens.text_lines import decoded_lines, read_text_lines

SIGNATURES = ("default", "tokens", "char_ids")
DEFAULT_TIMEOUT_SECONDS = 60.0


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "client",
        help="query a TF Serving-protocol server (elmo-tf serve or TF Serving)",
        description="Fetch ELMo vectors from a server speaking TF Serving's gRPC protocol.",
    )
    parser.add_argument(
        "input",
        metavar="FILE_OR_TEXT",
        help="a sentence file (one per line), '-' for standard input, or the text of a sentence",
    )
    parser.add_argument("--server", required=True, metavar="HOST:PORT", help="the gRPC address")
    parser.add_argument(
        "--signature", choices=SIGNATURES, default="default", help="what to send (default: default)"
    )
    parser.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="KEY",
        help="output to ask for (repeatable; default: all)",
    )
    parser.add_argument("--model-name", default="elmo", help="the served model (default: elmo)")
    parser.add_argument(
        "--version", type=version_number, metavar="N", help="insist on this model version"
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="S",
        help=f"seconds the call may take (default {DEFAULT_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument("--json", action="store_true", help="print the values as one JSON object")
    return parser


def version_number(text):
    """``--version``: a model version, 0 to 2**63 - 1 (``elmo_tf.export.versions``)."""
    version = parse_version(text)
    if version is None:
        raise argparse.ArgumentTypeError(
            f"must be a version number from 0 to 2**63 - 1 (int64), got {checks.shown(text)}"
        )
    return version


def seconds(text):
    """``--timeout``: seconds above 0, at most a day (``serving.options.check_seconds``)."""
    try:
        value = float(text)
    except ValueError:
        value = text
    return check_seconds(None, value, error=argparse.ArgumentTypeError)


def read_sentences(source):
    """Lines of standard input (``-``) or of the file ``source``; ``[source]`` when no file of
    that name exists."""
    if source == "-":
        return list(decoded_lines(sys.stdin.buffer, "standard input"))
    if not os.path.lexists(source):
        return [source]
    try:
        return list(read_text_lines(source))
    except InputFileError as e:
        if os.path.isfile(source):
            raise  # a bad line of a text file
        message = f"{e}; to send it as a sentence, give the text on standard input (-)"
        raise CommandError(message) from None


def run(args):
    require_extra("serving")
    sentences = read_sentences(args.input)  # before TensorFlow
    if not sentences:
        source = "standard input" if args.input == "-" else args.input
        raise CommandError(f"{source}: no sentences")
    import grpc  # lazy: the [serving] extra

    from elmo_tf.serving.client import embed  # lazy: the [serving] extra

    try:
        outputs = embed(
            args.server,
            sentences,
            signature=args.signature,
            model_name=args.model_name,
            outputs=args.output,
            version=args.version,
            timeout=args.timeout,
        )
    except grpc.RpcError as e:
        raise CommandError(f"{args.server}: {e.code().name}: {e.details()}") from None
    if args.json:
        json.dump({key: value.tolist() for key, value in sorted(outputs.items())}, sys.stdout)
        sys.stdout.write("\n")
    else:
        for key, value in sorted(outputs.items()):
            print(f"{key} {tuple(value.shape)} {value.dtype}")
    return 0
