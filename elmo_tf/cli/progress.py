"""Progress of a long command on stderr (``elmo-tf embed``, ``train``)."""

import os
import time

from tqdm.auto import tqdm

from elmo_tf.cli import stop_signals
from elmo_tf.system import native_logs


class Progress:
    """Progress of a long command on stderr: items done / total and tokens per second.

    On a terminal (or a notebook) it is a ``tqdm`` bar; elsewhere (a log file, a pipe) only
    a summary line is written at the end, so logs stay readable.

    Args:
        total: number of items expected (``None``: unknown, a stream).
        unit: what an item is called (``"sentences"``).
        stream: where to write (default: stderr, past TensorFlow's log filter).
        interval: minimum seconds between redraws.
        initial: items already done (a resumed run).
        setup_seconds: how long the command took to get ready (loading and compiling the
            model), said apart from the rate, which counts the work alone.
    """

    def __init__(
        self, total, unit="sentences", stream=None, interval=0.1, initial=0, setup_seconds=None
    ):
        self.total = total
        self.unit = unit
        self.stream = native_logs.unfiltered_stderr() if stream is None else stream
        self.done = initial
        self.tokens = 0
        self.setup_seconds = setup_seconds
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
        done = f"{self.done}" if self.total is None else f"{self.done}/{self.total}"
        line = f"{done} {self.unit}, {self._postfix(now)}, {elapsed:.1f}s"
        if self.setup_seconds is not None:
            line += f" (after {self.setup_seconds:.1f}s loading and compiling the model)"
        return line


def _terminal_columns(stream):
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0
