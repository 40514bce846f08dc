"""Helpers shared by the ``elmo-tf`` subcommands."""

import sys
import time

from elmo_tf.errors import ElmoError


class CommandError(ElmoError):
    """A command-line usage error found after parsing (flags that contradict each other).

    Only the CLI raises it; the library raises the other ``ElmoError`` classes, which
    ``main`` reports the same way: one line on stderr, exit status 1.
    """


def require_extra(extra, *modules):
    """Raises ``CommandError`` naming the pip extra when one of ``modules`` is not installed."""
    import importlib.util

    missing = [m for m in modules if _find_spec(importlib.util, m) is None]
    if missing:
        raise CommandError(
            f"this command needs the [{extra}] extra ({', '.join(missing)} not installed): "
            f"pip install 'elmo-tf[{extra}]'"
        )


def _find_spec(util, module):
    try:
        return util.find_spec(module)
    except (ImportError, ValueError):  # a parent package missing, or sys.modules[m] = None
        return None


def add_model_arguments(parser):
    """``--model``, or ``--options`` + ``--weights``: which model a command loads."""
    parser.add_argument(
        "--model",
        metavar="NAME_OR_DIR",
        help="a bundled model (sotu) or a directory with options.json and weights.hdf5 "
        "(default: the bundled default model)",
    )
    parser.add_argument("--options", metavar="FILE", help="an official options.json")
    parser.add_argument("--weights", metavar="FILE", help="its HDF5 weight file")


def load_model(args, step=None, **kwargs):
    """The ``ELMo`` that ``add_model_arguments``' flags name; ``kwargs`` go to ``ELMo``.

    With ``step`` (a prefix such as ``"[1/2] "``), says on stderr what it loads.
    """
    from elmo_tf.models import ELMo
    from elmo_tf.weight_file import load_pretrained

    if args.options is None and args.weights is not None:
        raise CommandError("--weights was given without --options; pass both")
    if args.weights is None and args.options is not None:
        raise CommandError("--options was given without --weights; pass both")
    if args.options is not None and args.model is not None:
        raise CommandError("pass --model or --options with --weights, not both")
    if args.options is not None:
        _announce(step, args.weights)
        return load_pretrained(args.options, args.weights, **kwargs)
    name = args.model or "default"
    _announce(step, name)
    return ELMo.from_preset(name, **kwargs)


def _announce(step, what):
    if step is not None:
        print(f"{step}loading {what}", file=sys.stderr, flush=True)


class Progress:
    """A progress bar on a stream: items done / total and tokens per second.

    On a terminal the bar is redrawn in place (at most every ``interval`` seconds); elsewhere
    (a log file, a pipe) only the final summary line is written, so logs stay readable.

    Args:
        total: number of items expected.
        unit: what an item is called (``"sentences"``).
        stream: where to write (default ``sys.stderr``).
        interval: minimum seconds between redraws.
    """

    def __init__(self, total, unit="sentences", stream=None, interval=0.1, width=30):
        self.total = total
        self.unit = unit
        self.stream = sys.stderr if stream is None else stream
        self.interval = interval
        self.width = width
        self.done = 0
        self.tokens = 0
        self.start = time.monotonic()
        self._last_draw = 0.0
        isatty = getattr(self.stream, "isatty", None)
        self.interactive = bool(isatty and isatty())

    def update(self, items, tokens=0):
        """Records ``items`` more items holding ``tokens`` tokens."""
        self.done += items
        self.tokens += tokens
        now = time.monotonic()
        if self.interactive and (now - self._last_draw >= self.interval or self.done >= self.total):
            self._last_draw = now
            self.stream.write("\r" + self._line(now))
            self.stream.flush()

    def close(self):
        """Writes the final line (on a terminal: ends the bar's line)."""
        line = self._line(time.monotonic())
        self.stream.write(("\r" + line if self.interactive else line) + "\n")
        self.stream.flush()

    def abort(self):
        """Ends a drawn bar's line so that an error message starts on a line of its own."""
        if self.interactive and self._last_draw:
            self.stream.write("\n")
            self.stream.flush()

    def _line(self, now):
        elapsed = max(now - self.start, 1e-9)
        fraction = self.done / self.total if self.total else 1.0
        filled = int(round(self.width * fraction))
        bar = "=" * filled + " " * (self.width - filled)
        digits = len(str(self.total))
        return (
            f"{self.done:>{digits}}/{self.total} {self.unit} [{bar}] "
            f"{self.tokens / elapsed:,.0f} tokens/s, {elapsed:.1f}s"
        )
