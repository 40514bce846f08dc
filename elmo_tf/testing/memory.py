"""What a call costs in memory, measured: the bound the hostile-input tests and the fuzz targets
put on a parser of outside bytes (its input may cost a small multiple of its size)."""

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


def check_bounded(data, peak, factor, base=1 << 20):
    """``AssertionError`` unless ``peak`` bytes are at most ``factor`` times ``data``'s length
    plus ``base`` (what any input costs: tables, buffers)."""
    bound = factor * len(data) + base
    assert peak <= bound, f"{peak:,} bytes for a {len(data):,}-byte input (bound {bound:,})"
