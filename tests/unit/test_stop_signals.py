"""SIGTERM and Ctrl-C inside work that stops at a safe point (``elmo-tf train``): the first
signal asks the work to stop, a second ends the command at once, even where its exception was
swallowed on the way (inside a C extension's call back into Python). The handlers are called
directly, as the interpreter calls them; no signal is sent."""

import signal

import pytest

from elmo_tf.cli import stop_signals


@pytest.fixture(autouse=True)
def no_signal_yet(monkeypatch):
    monkeypatch.setattr(stop_signals, "_received", None)
    monkeypatch.setattr(stop_signals, "_requested", None)


def test_no_signal_lets_the_work_go_on():
    assert stop_signals.should_stop() is False


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGINT])
def test_the_first_signal_asks_the_work_to_stop_and_raises_nothing(first):
    stop_signals._defer(first, None)
    assert stop_signals.should_stop() is True
    assert stop_signals.requested() == first


@pytest.mark.parametrize(
    "second, error", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, stop_signals.Terminated)]
)
def test_a_second_signal_ends_the_command_at_once(second, error):
    stop_signals._defer(signal.SIGTERM, None)
    with pytest.raises(error):
        stop_signals._defer(second, None)
    assert stop_signals.received() == second


def test_a_second_signal_whose_exception_was_swallowed_ends_the_work_at_its_safe_point():
    stop_signals._defer(signal.SIGTERM, None)
    try:
        stop_signals._defer(signal.SIGINT, None)
    except KeyboardInterrupt:
        pass  # as a C extension's callback may swallow it
    with pytest.raises(KeyboardInterrupt):
        stop_signals.should_stop()  # before the work saves its checkpoint
