"""Helpers shared by the ``elmo-tf`` subcommands."""

import os
import sys
import time

from elmo_tf import native_logs
from elmo_tf.cli import stop_signals
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
    """Progress of a long command on stderr: items done / total and tokens per second.

    On a terminal (or a notebook) it is a ``tqdm`` bar; elsewhere (a log file, a pipe) only
    a summary line is written at the end, so logs stay readable.

    Args:
        total: number of items expected.
        unit: what an item is called (``"sentences"``).
        stream: where to write (default: stderr, past TensorFlow's log filter).
        interval: minimum seconds between redraws.
        initial: items already done (a resumed run).
    """

    def __init__(self, total, unit="sentences", stream=None, interval=0.1, initial=0):
        from tqdm.auto import tqdm

        self.total = total
        self.unit = unit
        self.stream = native_logs.unfiltered_stderr() if stream is None else stream
        self.done = initial
        self.tokens = 0
        self.start = time.monotonic()
        isatty = getattr(self.stream, "isatty", None)
        self.interactive = bool(isatty and isatty())
        self._bar = tqdm(
            total=total,
            initial=initial,
            unit=f" {unit}",
            file=self.stream,
            mininterval=interval,
            disable=not self.interactive,
            ncols=None if _terminal_columns(self.stream) else 80,  # a pty may report 0
        )

    def update(self, items, tokens=0):
        """Records ``items`` more items holding ``tokens`` tokens.

        A stop signal whose exception was swallowed (see ``stop_signals``) ends the command here.
        """
        stop_signals.raise_if_received()
        self.done += items
        self.tokens += tokens
        self._bar.set_postfix_str(self._postfix(time.monotonic()), refresh=False)
        self._bar.update(items)

    def close(self):
        """Ends the bar, or (not on a terminal) writes the summary line."""
        if self.interactive:
            self._bar.close()
        else:
            self.stream.write(self._line(time.monotonic()) + "\n")
            self.stream.flush()

    def abort(self):
        """Ends a drawn bar so that an error message starts on a line of its own."""
        self._bar.close()

    def _postfix(self, now):
        return f"{self.tokens / max(now - self.start, 1e-9):,.0f} tokens/s"

    def _line(self, now):
        elapsed = max(now - self.start, 1e-9)
        return f"{self.done}/{self.total} {self.unit}, {self._postfix(now)}, {elapsed:.1f}s"


def _terminal_columns(stream):
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0
