"""``elmo-tf client``: fetch ELMo vectors from a server speaking TF Serving's gRPC protocol.

Works against ``elmo-tf serve`` and against TF Serving itself (stock stubs only). The input is
a file (one whitespace-tokenised sentence per line; ``-`` for stdin) or, when no such file
exists, the text of one sentence. Prints each output's shape, or with ``--json`` the values.
"""

import json
import os
import sys

from elmo_tf.cli.common import CommandError, require_extra
from elmo_tf.text_lines import decoded_lines, read_text_lines

SIGNATURES = ("default", "tokens", "char_ids")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "client",
        help="query a TF Serving-protocol server (elmo-tf serve or TF Serving)",
        description="Fetch ELMo vectors from a server speaking TF Serving's gRPC protocol.",
    )
    parser.add_argument("input", metavar="FILE_OR_TEXT", help="sentence file, '-', or a sentence")
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
    parser.add_argument("--version", type=int, help="insist on this model version")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--json", action="store_true", help="print the values as one JSON object")
    return parser


def read_sentences(source):
    """Lines of the file ``source`` (``-``: stdin), or ``[source]`` when it names no file."""
    if source == "-":
        return list(decoded_lines(sys.stdin.buffer, "standard input"))
    if os.path.isfile(source):
        return list(read_text_lines(source))
    return [source]


def run(args):
    require_extra("serving")
    import grpc  # lazy: the [serving] extra

    from elmo_tf.serving.client import embed  # lazy: the [serving] extra

    sentences = read_sentences(args.input)
    if not sentences:
        raise CommandError(f"{args.input}: no sentences")
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
