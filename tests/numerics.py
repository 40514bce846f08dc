"""How the suite compares floating-point results: every tolerance is here, each with its reason.

Three kinds of comparison, and only three:

1. ``assert_same``: two runs of the same arithmetic in the same order (a model and its ``.keras``
   reload, a layer and its config clone, one compiled function called twice, a TF1 session over
   the same graph). These are bitwise equal on every CPU; any difference is a bug.

2. ``assert_reordered``: the same float32 maths evaluated in a different order. Batch composition
   and padding length change the shapes oneDNN and Eigen see, so they pick other kernels and
   blockings; the token cache encodes a token in another chunk than the uncached path; a graph
   may fuse ops that eager mode runs apart; TFLite runs its own kernels; oneDNN chooses kernels
   per instruction set (SSE4.1, AVX2, AVX-512, AMX). Each float32 add rounds to half a unit in
   the last place (ulp) of its result, so two orders of the same sum differ by a few ulps of the
   magnitudes summed, and the LSTM recurrence carries such differences from step to step
   without amplifying them (tanh and sigmoid have slope <= 1, cells and projections are
   clipped). The tolerance is therefore stated in ulps of the largest magnitude in play:

       |actual - expected| <= REORDER_ULPS * eps32 * max(1, max|expected|)

   The floor of 1 is there because the network's activations are O(1) even where one output
   tensor happens to be small: its rounding errors come from O(1) upstream values.
   Measured worst case over the whole suite run under SSE4.1, AVX2 and AVX-512
   (``ONEDNN_MAX_CPU_ISA``), oneDNN on and off (``TF_ENABLE_ONEDNN_OPTS``) and 1 or 8 intra-op
   threads (``TF_NUM_INTRAOP_THREADS``): 6.5 ulps of scale (3.5e-6, TFLite vs TensorFlow with
   oneDNN off); within TensorFlow 4.5 ulps (the LSTM cell against numpy under AVX2) and 3.0
   ulps (the token cache under AVX2; 1.9e-6 on values up to 2.7, about 6 ulps, on the CPU
   where this first failed). REORDER_ULPS = 32 leaves a factor of about 5 for CPUs not tried
   here; a path that lost accuracy (a float16 intermediate, a dropped term) is off by
   thousands of ulps and still fails.

3. ``REFERENCE_ATOL_*``: parity with numbers computed by other programs (AllenNLP in PyTorch,
   the original bilm-tf in TF1) on other CPUs; kept as first set, see each constant.

Set ``ELMO_TF_NUMERICS_LOG=path`` to append every reordered comparison's observed error (in ulps)
to ``path`` as JSON lines: that is how the worst case above was measured.
"""

import json
import os

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23: one ulp of 1.0 in float32

REORDER_ULPS = 32

# AllenNLP's golden outputs (PyTorch, float32 on another CPU): observed <= 3.8e-6 on values up
# to ~5, i.e. the same reordering effect over two frameworks' kernels.
REFERENCE_ATOL_ALLENNLP = 2e-5
# The original bilm-tf (TF1 graph, float32): observed <= 9.5e-7.
REFERENCE_ATOL_BILM_TF = 1e-5


def reorder_atol(expected):
    """The absolute tolerance ``assert_reordered`` allows for ``expected``."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    return REORDER_ULPS * EPS32 * scale


def assert_same(actual, expected, err_msg=""):
    """Bitwise equality: the same arithmetic in the same order."""
    np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected), err_msg=err_msg)


def assert_reordered(actual, expected, err_msg=""):
    """Equal up to float32 summation order; see the module docstring for the bound."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{err_msg}: shape {actual.shape} != {expected.shape}"
    atol = reorder_atol(expected)
    _log(actual, expected, atol)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol, err_msg=err_msg)


def assert_reordered_dict(actual, expected, keys=None):
    """``assert_reordered`` for each key of two output dicts (same keys unless ``keys``)."""
    if keys is None:
        assert sorted(actual) == sorted(expected)
        keys = list(expected)
    for key in keys:
        assert_reordered(actual[key], expected[key], err_msg=str(key))


def _log(actual, expected, atol):
    path = os.environ.get("ELMO_TF_NUMERICS_LOG")
    if not path or expected.size == 0:
        return
    error = float(np.abs(actual.astype(np.float64) - expected.astype(np.float64)).max())
    record = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0],
        "max_abs_error": error,
        "ulps_of_scale": error / (atol / REORDER_ULPS),
        "isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "default"),
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
        "threads": os.environ.get("TF_NUM_INTRAOP_THREADS", "default"),
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
