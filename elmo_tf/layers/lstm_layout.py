"""How the LSTM step lays out its gate matmuls, chosen for the machine that runs it.

Two layouts compute the same step (``LSTMCellWithProjection.step``):

- ``"per_gate"``: four ``(B, P) x (P, D)`` matmuls, one per gate, each added to its own slice
  of the input half (kept gate by gate from the start, so the step splits nothing);
- ``"fused"``: one ``(B, P) x (P, 4D)`` matmul added to the whole input half, then split into
  the four gates.

Which is faster depends on the CPU (its matmul kernels for the two widths, its caches) and on
the batch (the measurements: docs/performance.md, "The LSTM step's layout"); and the per-gate
blocks are column slices of the stored kernel, copied at every call, which a call of a few
sentences does not earn back. So:

- ``ELMO_TF_LSTM_LAYOUT=per_gate`` or ``fused`` pins it (for bitwise reproducibility: the two
  layouts agree to float32 round-off, not bit for bit);
- unset, or ``auto``, the first trace of each model shape times both layouts for a few steps
  at the default batch on this machine and keeps the faster (``autotune``), cached per process
  and shape; within ``TIE`` of each other, ``per_gate`` wins;
- ``pinned(layout)`` pins it for the traces made in a block: ``embed`` runs calls of fewer than
  ``SMALL_BATCH_ROWS`` rows in a graph of their own traced ``fused``, and the exporters trace
  ``EXPORT_LAYOUT``, ``fused``: an exported graph runs on machines the exporter never saw, and
  mostly on what serving sends, one request or a dynamic batch of up to 32 rows.
"""

import contextlib
import statistics
import threading
import time

from elmo_tf import environment

LAYOUTS = ("per_gate", "fused")
LAYOUT_VARIABLE = "ELMO_TF_LSTM_LAYOUT"
EXPORT_LAYOUT = "fused"
# Below this many rows a call is too short to earn back the per-gate kernel copies.
SMALL_BATCH_ROWS = 32
# Relative difference under which the autotune keeps per_gate (timing noise is 2-3%).
TIE = 0.02
# What the autotune times: rows (the default batch), steps per timing, rounds (alternated).
TUNE_ROWS = 128
TUNE_STEPS = 4
TUNE_ROUNDS = 5

_chosen = {}  # (input_dim, units, projection_units, dtype) -> layout
_lock = threading.Lock()
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


def layout_for(cell):
    """The layout a trace of ``cell``'s step uses now (see the module docstring)."""
    pinned = getattr(_pinned, "layout", None)
    if pinned is not None:
        return pinned
    try:
        wanted = environment.value(LAYOUT_VARIABLE)
    except ValueError as e:  # set after import elmo_tf checked it; raised while tracing, where
        raise ValueError(str(e)) from None  # TensorFlow passes built-in error types through
    if wanted in LAYOUTS:
        return wanted
    key = (cell.input_dim, cell.units, cell.projection_units, cell.compute_dtype)
    with _lock:
        if key not in _chosen:
            import tensorflow as tf  # lazy: the packed path (TensorFlow) alone has layouts

            with tf.init_scope():  # run eagerly, also when called while a graph is traced
                _chosen[key] = autotune(cell.units, cell.projection_units, cell.compute_dtype)
        return _chosen[key]


def autotune(units, projection_units, dtype="float32"):
    """The faster layout of one LSTM step of this shape on this machine, timed in turns."""
    import tensorflow as tf  # lazy: the packed path (TensorFlow) alone has layouts

    d, p = units, projection_units
    rows = TUNE_ROWS
    h = tf.random.normal([rows, p], dtype=dtype)
    c = tf.zeros([rows, d], dtype=dtype)
    kernel = tf.random.normal([p, 4 * d], stddev=0.02, dtype=dtype)
    projection = tf.random.normal([d, p], stddev=0.02, dtype=dtype)
    inputs = tf.random.normal([rows, 4 * d], dtype=dtype)

    def gates_fused(h):
        z = inputs + tf.matmul(h, kernel)
        return tf.split(z, 4, axis=-1)

    gate_kernels = tf.split(kernel, 4, axis=1)
    gate_inputs = tf.split(inputs, 4, axis=1)

    def gates_per_gate(h):
        return [x + tf.matmul(h, w) for x, w in zip(gate_inputs, gate_kernels)]

    def loop(gates):
        @tf.function
        def run():
            def body(t, c, h):
                i, j, f, o = gates(h)
                c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(j)
                return t + 1, c, tf.matmul(tf.sigmoid(o) * tf.tanh(c), projection)

            return tf.while_loop(lambda t, *_: t < TUNE_STEPS, body, (0, c, h))[2]

        return run

    runs = {"per_gate": loop(gates_per_gate), "fused": loop(gates_fused)}
    times = {name: [] for name in runs}
    for run in runs.values():
        run().numpy()  # trace and warm
    for _ in range(TUNE_ROUNDS):
        for name, run in runs.items():
            start = time.perf_counter()
            run().numpy()
            times[name].append(time.perf_counter() - start)
    per_gate, fused = (statistics.median(times[name]) for name in LAYOUTS)
    return "fused" if fused < per_gate * (1 - TIE) else "per_gate"


def chosen():
    """``{shape: layout}`` the autotune chose in this process (for reports and tests)."""
    with _lock:
        return dict(_chosen)
