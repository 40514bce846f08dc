"""What a call costs in memory, measured: the hostile-input tests' bound on a parser."""

import tracemalloc


def peak_bytes(function, *args, **kwargs):
    """``(outcome, peak)``: what ``function(*args, **kwargs)`` returned or raised, and the most
    bytes Python and NumPy held at once while it ran (``tracemalloc``: every allocation through
    Python's allocators, the pickle module's memo and NumPy's arrays included), beyond what was
    held when it started."""
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        outcome = function(*args, **kwargs)
    except Exception as error:  # the outcome the caller asserts on
        outcome = error
    finally:
        peak = tracemalloc.get_traced_memory()[1] - before
        if not started:
            tracemalloc.stop()
    return outcome, peak
