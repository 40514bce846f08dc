"""How the LSTM step lays out its gate matmuls: one fixed rule.

Two layouts compute the same step (``LSTMCellWithProjection.step``):

- ``"per_gate"``: four ``(B, P) x (P, D)`` matmuls, one per gate, each added to its own slice
  of the input half (kept gate by gate from the start, so the step splits nothing);
- ``"fused"``: one ``(B, P) x (P, 4D)`` matmul added to the whole input half, then split into
  the four gates.

The rule:

- ``per_gate`` (``DEFAULT_LAYOUT``): the faster on every CPU measured (docs/performance.md,
  "The LSTM step's layout");
- ``fused`` for the traces made inside ``pinned("fused")``: ``embed`` runs calls of fewer than
  ``SMALL_BATCH_ROWS`` rows in a graph of their own traced ``fused`` (the per-gate blocks are
  column slices of the stored kernel, copied at every call, which a call of a few sentences
  does not earn back), and the exporters trace ``EXPORT_LAYOUT``, ``fused``: an exported graph
  mostly runs what serving sends, one request or a dynamic batch of up to 32 rows;
- ``ELMO_TF_LSTM_LAYOUT=per_gate`` or ``fused`` pins the layout of every other trace (for
  bitwise reproducibility: the two layouts agree to float32 round-off, not bit for bit).
"""

import contextlib
import threading

from elmo_tf.system import environment
from elmo_tf.system.environment import LAYOUTS

LAYOUT_VARIABLE = "ELMO_TF_LSTM_LAYOUT"
DEFAULT_LAYOUT = "per_gate"
EXPORT_LAYOUT = "fused"
# Below this many rows a call is too short to earn back the per-gate kernel copies.
SMALL_BATCH_ROWS = 32

_pinned = threading.local()


@contextlib.contextmanager
def pinned(layout):
    """Within the block, every trace (of this thread) uses ``layout``."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    previous = getattr(_pinned, "layout", None)
    _pinned.layout = layout
    try:
        yield
    finally:
        _pinned.layout = previous


def exporting():
    """Within the block, every trace uses ``EXPORT_LAYOUT`` (the exporters' graphs)."""
    return pinned(EXPORT_LAYOUT)


def current_layout():
    """The layout a trace of the LSTM step uses now (see the module docstring)."""
    pinned = getattr(_pinned, "layout", None)
    if pinned is not None:
        return pinned
    try:
        wanted = environment.value(LAYOUT_VARIABLE)
    except ValueError as e:  # set after import elmo_tf checked it; raised while tracing, where
        raise ValueError(str(e)) from None  # TensorFlow passes built-in error types through
    return wanted or DEFAULT_LAYOUT
