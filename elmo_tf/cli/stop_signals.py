"""SIGTERM and Ctrl-C in the ``elmo-tf`` command: the command ends as an exception ends it.

The handlers raise in the main thread (``Terminated``, ``KeyboardInterrupt``) so that cleanup
code runs: ``files.atomic_path`` removes its temporary and a previous output stays. Python runs
a handler between any two bytecodes, also inside a C extension's call back into Python
(TensorFlow's ``nest`` flattening calls ``isinstance`` and ``__import__``); an exception raised
there can come out as a ``SystemError`` or ``TypeError``, or be swallowed outright (in a
``__del__``). So the handlers also record the signal: ``main`` reports whatever exception
arrives after one as that signal's ending, and ``raise_if_received`` (called by ``Progress``
at every update) ends a command whose exception was swallowed.

Work that can stop cleanly (``elmo-tf train``: finish the step, save a checkpoint) runs inside
``stop_at_a_safe_point``: there the first signal is only recorded (``requested``), the work
ends itself at its next safe point, and a second signal ends the command at once.
"""

import contextlib
import signal

STATUS = {signal.SIGTERM: 143, signal.SIGINT: 130}
MESSAGE = {signal.SIGTERM: "terminated", signal.SIGINT: "interrupted"}

_received = None
_requested = None


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanup code runs (temporary files)."""


def install():
    """Handles SIGTERM and SIGINT in this process (``serve`` replaces both while it runs).

    A signal the process was started ignoring (``nohup``, a shell's background job) stays
    ignored, as Python leaves it.
    """
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _handle)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _handle)


def received():
    """The stop signal this process received (``signal.SIGTERM`` or ``SIGINT``), or ``None``."""
    return _received


def signal_of(error):
    """The stop signal ``error`` stands for (``Terminated``, ``KeyboardInterrupt``), or ``None``."""
    if isinstance(error, Terminated):
        return signal.SIGTERM
    if isinstance(error, KeyboardInterrupt):
        return signal.SIGINT
    return None


@contextlib.contextmanager
def stop_at_a_safe_point():
    """Within the block, the first SIGTERM or SIGINT is recorded and nothing is raised:
    ``requested()`` tells the work, which stops at its next safe point; a second signal ends
    the command at once, as outside the block. Only this module's handlers are replaced (a
    signal the process ignores stays ignored); they are put back after the block."""
    global _requested
    _requested = None
    replaced = {}
    for signum in STATUS:
        if signal.getsignal(signum) is _handle:
            replaced[signum] = signal.signal(signum, _defer)
    try:
        yield
    finally:
        for signum, handler in replaced.items():
            signal.signal(signum, handler)


def requested():
    """The signal that asked the work inside ``stop_at_a_safe_point`` to stop, or ``None``."""
    return _requested


def should_stop():
    """At a safe point of the work inside ``stop_at_a_safe_point``: whether the first signal
    asked it to stop. A second signal whose exception was swallowed (see above) ends the
    command here, before the work saves anything."""
    raise_if_received()
    return _requested is not None


def _defer(signum, frame):
    global _requested
    if _requested is None:
        _requested = signal.Signals(signum)
        return
    _handle(signum, frame)


def raise_if_received():
    """Raises the received stop signal's exception again (one that was swallowed)."""
    if _received is not None:
        raise _exception(_received)


def _handle(signum, frame):
    global _received
    _received = signal.Signals(signum)
    raise _exception(_received)


def _exception(signum):
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
