"""``elmo-tf serve``: serve an exported model over TF Serving's gRPC and REST APIs.

The server (``serving.server``) serves the newest version ``N/`` under ``--model-base-path``
(what ``elmo-tf export saved-model`` writes) and swaps in a newer one without a restart. Flags
mirror ``tensorflow_model_server``'s (their names with underscores also work). On SIGTERM or
Ctrl-C it stops accepting, lets the requests in flight finish for up to
``--shutdown-grace-seconds``, then exits whatever connections are still open.
"""

import dataclasses
import logging
import signal
import sys
import threading

from elmo_tf.cli.common import CommandError, require_extra
from elmo_tf.serving import addresses, options


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "serve",
        help="serve an exported model over TF Serving's gRPC and REST APIs",
        description="Serve an exported model over TF Serving's gRPC and REST APIs.",
    )
    for field in dataclasses.fields(options.ServerOptions):
        if field.name == "batching":
            _add_batching_arguments(parser)
        else:
            _add_option(parser, field, field.default)
    parser.add_argument(
        "--shutdown-grace-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="on SIGTERM, how long requests in flight may take (default 30)",
    )
    return parser


def _add_option(parser, field, default):
    """The flag of an ``options.option`` field: ``--name-with-dashes`` and its aliases."""
    meta = field.metadata
    flag = "--" + field.name.replace("_", "-")
    required = default is dataclasses.MISSING
    shown = (
        ""
        if required or default is None
        else f" (default {default:g})"
        if isinstance(default, float)
        else f" (default {default})"
    )
    parser.add_argument(
        flag,
        *meta["aliases"],
        dest=field.name,
        type=meta["type"],
        required=required,
        default=None if required else default,
        metavar=meta["metavar"],
        help=meta["help"] + shown,
    )


def _add_batching_arguments(parser):
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
    for field in dataclasses.fields(options.BatchingOptions):
        flag = "--" + field.name.replace("_", "-")
        meta = field.metadata
        parser.add_argument(
            flag,
            "--" + field.name,
            dest=field.name,
            type=int,
            metavar=meta["metavar"],
            help=f"{meta['help']} (default {field.default})",  # None: the file's, else this
        )


def batching_options(args):
    """The ``BatchingOptions`` of the flags (file first, flags over it), or ``None``."""
    if not args.enable_batching:
        return None
    values = {}
    if args.batching_parameters_file:
        values.update(options.read_batching_parameters(args.batching_parameters_file))
    for field in dataclasses.fields(options.BatchingOptions):
        if getattr(args, field.name) is not None:
            values[field.name] = getattr(args, field.name)
    return options.BatchingOptions(**values)


def server_options(args):
    """The ``ServerOptions`` of the flags; it checks every value (errors name the option,
    whose flag is the same name with dashes)."""
    fields = [f.name for f in dataclasses.fields(options.ServerOptions) if f.name != "batching"]
    values = {name: getattr(args, name) for name in fields}
    return options.ServerOptions(**values, batching=batching_options(args))


def run(args):
    require_extra("serving")
    options.check_seconds(
        "--shutdown-grace-seconds", args.shutdown_grace_seconds, error=CommandError
    )
    server_opts = server_options(args)
    addresses.check_can_listen(args.host, args.port, args.rest_port)  # before the model loads
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
        # One write with its newline: the server's threads log to stderr meanwhile, and a
        # user who sends both to one file gets whole lines (print writes the newline apart).
        line = f"serving {args.model_name} on gRPC {args.host}:{server.port}{rest}\n"
        sys.stdout.write(line)
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
        logging.getLogger("serving").info("stopping: finishing the requests in flight")
        server.stop(args.shutdown_grace_seconds)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
