"""``elmo-tf serve``: serve an exported model over TF Serving's gRPC and REST APIs.

The server (``serving.server``) serves the newest version ``N/`` under ``--model-base-path``
(what ``elmo-tf export saved-model`` writes) and swaps in a newer one without a restart. Flags
mirror ``tensorflow_model_server``'s (their names with underscores also work). On SIGTERM or
Ctrl-C it stops accepting, lets the requests in flight finish for up to
``--shutdown-grace-seconds``, then exits whatever connections are still open.
"""

import logging
import signal
import sys
import threading

from elmo_tf.cli.common import CommandError, require_extra
from elmo_tf.serving import options, request_limits


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
    parser.add_argument(
        "--port",
        type=int,
        default=options.DEFAULT_PORT,
        help=f"gRPC port, 0: any (default {options.DEFAULT_PORT})",
    )
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
    batching_defaults = options.BatchingOptions()
    for flag, help_text in (
        ("--max-batch-size", "most rows in a batch"),
        ("--batch-timeout-micros", "longest wait for a batch to fill"),
        ("--max-enqueued-batches", "full batches queued before refusing"),
        ("--num-batch-threads", "batches run at once, per signature"),
    ):
        default = getattr(batching_defaults, flag[2:].replace("-", "_"))
        parser.add_argument(
            flag,
            "--" + flag[2:].replace("-", "_"),
            type=int,
            metavar="N",
            help=f"{help_text} (default {default})",
        )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=options.DEFAULT_MAX_REQUEST_BYTES,
        metavar="N",
        help="largest request accepted, gRPC or REST "
        f"(default {options.DEFAULT_MAX_REQUEST_BYTES:,})",
    )
    parser.add_argument(
        "--poll-seconds",
        "--file-system-poll-wait-seconds",
        "--file_system_poll_wait_seconds",
        type=float,
        default=options.DEFAULT_POLL_SECONDS,
        metavar="S",
        help="how often to look for a new version, 0: never "
        f"(default {options.DEFAULT_POLL_SECONDS:g})",
    )
    parser.add_argument(
        "--grpc-max-threads",
        "--grpc_max_threads",
        type=int,
        default=options.DEFAULT_GRPC_MAX_THREADS,
        metavar="N",
        help=f"gRPC requests in flight at once (default {options.DEFAULT_GRPC_MAX_THREADS})",
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
        default=options.DEFAULT_REST_TIMEOUT_SECONDS,
        metavar="S",
        help="close a REST connection idle or sending a request for this long "
        f"(default {options.DEFAULT_REST_TIMEOUT_SECONDS:g})",
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
    if not args.enable_batching:
        return None
    values = {}
    if args.batching_parameters_file:
        values.update(options.read_batching_parameters(args.batching_parameters_file))
    for name in (
        "max_batch_size",
        "batch_timeout_micros",
        "max_enqueued_batches",
        "num_batch_threads",
    ):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    return options.BatchingOptions(**values)


def server_options(args):
    """The ``ServerOptions`` of the flags; it checks every value (errors name the option,
    whose flag is the same name with dashes)."""
    return options.ServerOptions(
        model_base_path=args.model_base_path,
        model_name=args.model_name,
        host=args.host,
        port=args.port,
        rest_port=args.rest_port,
        batching=batching_options(args),
        max_request_bytes=args.max_request_bytes,
        poll_seconds=args.poll_seconds,
        grpc_max_threads=args.grpc_max_threads,
        max_request_rows=args.max_request_rows,
        max_tokens_per_row=args.max_tokens_per_row,
        max_request_tokens=args.max_request_tokens,
        max_token_bytes=args.max_token_bytes,
        rest_timeout_seconds=args.rest_timeout_seconds,
    )


def run(args):
    require_extra("serving")
    if not args.shutdown_grace_seconds > 0:
        raise CommandError("--shutdown-grace-seconds must be positive")
    server_opts = server_options(args)
    from elmo_tf.serving.server import ModelServer  # lazy: the [serving] extra, TensorFlow

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s elmo-tf serve: %(message)s", stream=sys.stderr
    )
    server = ModelServer(server_opts)
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
