"""The ``elmo-tf`` command: an argparse front end with one subcommand per module.

Each subcommand lives in ``elmo_tf/cli/<name>.py`` and exposes ``add_parser(subparsers)``
(returning its parser) and ``run(args)`` (returning an exit status). Adding a command is
adding its module and its name to ``COMMANDS``.

Exit status: 0 on success, 1 for an error the user can fix (reported as one line
``elmo-tf <command>: error: ...`` on stderr, never a traceback), 2 for a usage error,
130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM).

Every command parses its arguments, and checks them and the extra it needs, before it imports
TensorFlow: ``elmo-tf --help``, a subcommand's ``--help`` and a usage error answer at once
(the command modules import only light modules at the top; ``elmo_tf/__init__`` leaves
TensorFlow out in this process). TensorFlow's native start-up logs are hidden unless
``--verbose`` is given or ``TF_CPP_MIN_LOG_LEVEL=0`` is set (``elmo_tf.system.native_logs``).
"""

import argparse
import contextlib
import importlib
import os
import re
import select
import signal
import sys

from elmo_tf import __version__
from elmo_tf.cli import beam as beam_command
from elmo_tf.cli import stop_signals
from elmo_tf.errors import ElmoError, OutputFileError
from elmo_tf.system import environment, extras, native_logs

PROG = "elmo-tf"
COMMANDS = (
    "embed",
    "export",
    "serve",
    "client",
    "train",
    "evaluate",
    "senses",
    "dump_weights",
    "convert",
    "vocab",
    "beam",
    "download",
    "cache",
)


def build_parser():
    """The top-level parser with every subcommand of ``COMMANDS`` attached."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="ELMo contextual word representations for TensorFlow 2."
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"elmo_tf.cli.{name}")
        module.add_parser(subparsers).set_defaults(run=module.run)
    for command in _all_parsers(parser):
        command.formatter_class = PlainTextHelpFormatter
        # A parser without "-" options (elmo-tf beam) passes its arguments on unparsed.
        if command is not parser and not command._subparsers and "-" in command.prefix_chars:
            command.add_argument(
                "--verbose",
                action="store_true",
                help="also show TensorFlow's native log messages (or set TF_CPP_MIN_LOG_LEVEL=0)",
            )
    return parser


def _all_parsers(parser):
    """``parser`` and every subcommand parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to one parser
                yield from _all_parsers(sub)


def _parser_of(parser, args):
    """The innermost subcommand parser that ``args`` were parsed by (``elmo-tf cache list``)."""
    for action in parser._actions:
        chosen = getattr(args, action.dest, None)
        if isinstance(action, argparse._SubParsersAction) and chosen in action.choices:
            return _parser_of(action.choices[chosen], args)
    return parser


# reStructuredText roles and literals, as the modules' docstrings write them.
_RST_ROLE = re.compile(r":\w+:`([^`]*)`")
_RST_LITERAL = re.compile(r"``([^`]*)``")


def plain_text(text):
    """``text`` without reStructuredText markup: ``x`` and :mod:`x` become x."""
    return _RST_LITERAL.sub(r"\1", _RST_ROLE.sub(r"\1", text))


class PlainTextHelpFormatter(argparse.HelpFormatter):
    """Help without the docstrings' reStructuredText markup (help is read in a terminal)."""

    def _format_text(self, text):
        return super()._format_text(plain_text(text))

    def _expand_help(self, action):
        return plain_text(super()._expand_help(action))


def console_main(argv=None):
    """The ``elmo-tf`` console script (``argv``: default ``sys.argv[1:]``): ``main`` with
    TensorFlow's native noise filtered.

    SIGTERM ends a command the way Ctrl-C does: its temporary files are removed, and it exits
    with 143 (130 for Ctrl-C) whatever exception the signal turned into on its way out
    (``elmo_tf.cli.stop_signals``; ``serve`` installs its own handlers).
    """
    stop_signals.install()
    sys.exit(main(argv, as_command=True))


def main(argv=None, as_command=False):
    """Runs ``elmo-tf`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    ``as_command`` is for the ``elmo-tf`` process itself (the console script sets it): it hides
    TensorFlow's harmless native log lines on file descriptor 2, and after an HDF5 write
    failure it ends the process at once (a program that embeds ``main`` keeps both as they are).
    """
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said with the usage of the command they were given to
            _parser_of(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, --version and usage errors; argparse has printed them
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)

    def fail(message, status=1):
        message = " ".join(str(message).split())  # one line, whatever the exception held
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        return status

    verbose = getattr(args, "verbose", False)
    if args.command == "beam":  # its own parser reads its flags, --verbose among them
        verbose = beam_command.verbose(args.beam_args)
    quiet = as_command and native_logs.wanted(verbose)
    # The elmo-tf process imports TensorFlow in args.run, after this (its workers too).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbose else "2")
    try:
        environment.check()  # every ELMO_TF_* variable, before any work
        with native_logs.filtered_stderr() if quiet else contextlib.nullcontext():
            status = args.run(args)
        if as_command:  # what is still buffered fails here, not in the interpreter's exit
            sys.stdout.flush()
        return status
    except BaseException as e:
        return _report(e, fail, as_command)


def _report(error, fail, as_command):
    """The exit status for ``error``, which ended a command; re-raises a bug's exception."""
    # A received signal wins whatever its exception became on the way out (see stop_signals).
    stopped = stop_signals.received() or stop_signals.signal_of(error)
    if stopped is not None:
        return fail(stop_signals.MESSAGE[stopped], status=stop_signals.STATUS[stopped])
    if isinstance(error, BrokenPipeError) and as_command and _stdout_reader_gone():
        # `elmo-tf client ... | head`: the reader has what it wanted. Stop quietly, as a
        # process killed by SIGPIPE does, and keep the interpreter's last flush from failing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE
    if isinstance(error, OutputFileError):
        status = fail(error)
        if as_command:
            # HDF5 cannot close a file whose writes failed: its exit handler would retry and
            # crash the interpreter. The partial file is gone and the message is out: exit now.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
        return status
    if isinstance(error, ElmoError):  # every error a user can fix; anything else is a bug
        return fail(error)
    if isinstance(error, ValueError) and _raised_by_the_library(error):
        return fail(error)  # the library's refusal of a value, which names it
    if missing := extras.missing_backend(error):  # Keras's backend is an extra
        return fail(missing)
    if isinstance(error, OSError):  # disk full, permission denied, ...: the user's to fix
        where = f"{error.filename}: " if error.filename else ""
        return fail(f"{where}{error.strerror or error}")
    raise error


def _raised_by_the_library(error):
    """Whether ``error`` was raised by elmo_tf's own code (its innermost frame is ours): the
    library refuses what it is given with a ``ValueError`` naming it, which a user reads in
    one line; one raised inside another package is a bug, and keeps its traceback."""
    trace = error.__traceback__
    if trace is None:
        return False
    while trace.tb_next is not None:
        trace = trace.tb_next
    return trace.tb_frame.f_globals.get("__name__", "").startswith(f"{__package__.split('.')[0]}.")


def _stdout_reader_gone():
    """Whether standard output is a pipe (or socket) whose reading end has closed."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):  # no file descriptor: replaced or closed
        return False
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


if __name__ == "__main__":
    console_main()
