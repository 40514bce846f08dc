"""``elmo-tf serve``: serve an exported model over TF Serving's gRPC and REST APIs.

The server (``serving.server``) serves the newest version ``N/`` under ``--model-base-path``
(what ``elmo-tf export saved-model`` writes) and swaps in a newer one without a restart. Flags
mirror ``tensorflow_model_server``'s (their names with underscores also work). On SIGTERM or
Ctrl-C it stops accepting, lets the requests in flight finish for up to
``--shutdown-grace-seconds``, then exits whatever connections are still open.
"""

import logging
import os
import signal
import sys
import threading

from elmo_tf.cli.common import CommandError, require_extra
from elmo_tf.serving import request_limits


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "serve",
        help="serve an exported model over TF Serving's gRPC and REST APIs",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--model-base-path",
        "--model_base_path",
        required=True,
        metavar="DIR",
        help="directory of version directories N/ (elmo-tf export saved-model's OUTDIR)",
    )
    parser.add_argument("--model-name", "--model_name", default="elmo", help="default: elmo")
    parser.add_argument("--port", type=int, default=8500, help="gRPC port, 0: any (default 8500)")
    parser.add_argument(
        "--rest-port",
        "--rest-api-port",
        "--rest_api_port",
        type=int,
        metavar="PORT",
        help="REST port, 0: any (default: no REST API)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: local only)"
    )
    batching = parser.add_mutually_exclusive_group()
    batching.add_argument(
        "--enable-batching",
        "--enable_batching",
        dest="enable_batching",
        action="store_true",
        default=True,
        help="batch concurrent requests (the default)",
    )
    batching.add_argument(
        "--no-batching", dest="enable_batching", action="store_false", help="run each on its own"
    )
    parser.add_argument(
        "--batching-parameters-file",
        "--batching_parameters_file",
        metavar="FILE",
        help="TF Serving's batching_parameters.txt (the flags below override it)",
    )
    for flag, help_text in (
        ("--max-batch-size", "most rows in a batch (default 32)"),
        ("--batch-timeout-micros", "longest wait for a batch to fill (default 2000)"),
        ("--max-enqueued-batches", "full batches queued before refusing (default 100)"),
        ("--num-batch-threads", "batches run at once, per signature (default 2)"),
    ):
        parser.add_argument(
            flag, "--" + flag[2:].replace("-", "_"), type=int, metavar="N", help=help_text
        )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=16 * 1024 * 1024,
        metavar="N",
        help="largest request accepted, gRPC or REST (default 16 MiB)",
    )
    parser.add_argument(
        "--poll-seconds",
        "--file-system-poll-wait-seconds",
        "--file_system_poll_wait_seconds",
        type=float,
        default=2.0,
        metavar="S",
        help="how often to look for a new version, 0: never (default 2)",
    )
    parser.add_argument(
        "--grpc-max-threads",
        "--grpc_max_threads",
        type=int,
        default=32,
        metavar="N",
        help="gRPC requests in flight at once (default 32)",
    )
    for flag, default, help_text in (
        ("--max-request-rows", "DEFAULT_MAX_REQUEST_ROWS", "rows (sentences) in one request"),
        ("--max-tokens-per-row", "DEFAULT_MAX_TOKENS_PER_ROW", "tokens in one row"),
        ("--max-request-tokens", "DEFAULT_MAX_REQUEST_TOKENS", "rows x longest row, one request"),
        ("--max-token-bytes", "DEFAULT_MAX_TOKEN_BYTES", "UTF-8 bytes in one token"),
    ):
        value = getattr(request_limits, default)
        parser.add_argument(
            flag, type=int, default=value, metavar="N", help=f"{help_text} (default {value})"
        )
    parser.add_argument(
        "--rest-timeout-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="close a REST connection idle or sending a request for this long (default 30)",
    )
    parser.add_argument(
        "--shutdown-grace-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="on SIGTERM, how long requests in flight may take (default 30)",
    )
    return parser


def batching_options(args):
    """The ``BatchingOptions`` of the flags (file first, flags over it), or ``None``."""
    from elmo_tf.serving.batching import BatchingOptions, read_batching_parameters

    if not args.enable_batching:
        return None
    values = {}
    if args.batching_parameters_file:
        values.update(read_batching_parameters(args.batching_parameters_file))
    for name in (
        "max_batch_size",
        "batch_timeout_micros",
        "max_enqueued_batches",
        "num_batch_threads",
    ):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    try:
        return BatchingOptions(**values)
    except ValueError as e:
        raise CommandError(str(e).replace("_", "-")) from None


def run(args):
    require_extra("serving", "grpc", "tensorflow_serving")
    from elmo_tf.serving.server import ModelServer, ServerOptions

    if not os.path.isdir(args.model_base_path):
        raise CommandError(f"--model-base-path {args.model_base_path} is not a directory")
    for flag in (
        "max_request_bytes",
        "grpc_max_threads",
        "max_request_rows",
        "max_tokens_per_row",
        "max_request_tokens",
        "max_token_bytes",
    ):
        if getattr(args, flag) < 1:
            raise CommandError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.poll_seconds < 0:
        raise CommandError("--poll-seconds must not be negative")
    for flag in ("rest_timeout_seconds", "shutdown_grace_seconds"):
        if not getattr(args, flag) > 0:
            raise CommandError(f"--{flag.replace('_', '-')} must be positive")
    batching = batching_options(args)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s elmo-tf serve: %(message)s", stream=sys.stderr
    )
    options = ServerOptions(
        model_base_path=args.model_base_path,
        model_name=args.model_name,
        host=args.host,
        port=args.port,
        rest_port=args.rest_port,
        batching=batching,
        max_request_bytes=args.max_request_bytes,
        poll_seconds=args.poll_seconds,
        grpc_max_threads=args.grpc_max_threads,
        max_request_rows=args.max_request_rows,
        max_tokens_per_row=args.max_tokens_per_row,
        max_request_tokens=args.max_request_tokens,
        max_token_bytes=args.max_token_bytes,
        rest_timeout_seconds=args.rest_timeout_seconds,
    )
    server = ModelServer(options)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()  # a busy port: ListenError naming it, one line from main
        rest = f", REST {args.host}:{server.rest_port}" if server.rest_port is not None else ""
        print(f"serving {args.model_name} on gRPC {args.host}:{server.port}{rest}", flush=True)
        while not stop.wait(0.5):
            pass
        logging.getLogger("serving").info("stopping: finishing the requests in flight")
        server.stop(args.shutdown_grace_seconds)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
