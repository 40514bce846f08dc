"""How the suite compares floating-point results: every tolerance is here, each with its reason.

Four kinds of comparison, and only four:

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

4. ``assert_half_precision``: a run under a Keras mixed policy (``mixed_float16``,
   ``mixed_bfloat16``: float32 variables, float16 or bfloat16 maths) against the float32 run
   of the same weights. Every input, weight read and intermediate is rounded to the half
   format, whose machine epsilon is 2**-10 (float16) or 2**-7 (bfloat16) instead of 2**-23,
   so the bound has the same form as (2) with the half-precision epsilon:

       |actual - expected| <= HALF_PRECISION_ULPS * eps_half * max(1, max|expected|)

   Measured worst case over every layer test and the tiny ELMo (call, embed, carried state),
   oneDNN on (AVX-512 with FP16/BF16/AMX) and off, 1 or 2 intra-op threads: 4.3 ulps for
   float16 (the LSTM cell state, clipped at 3) and 5.4 for bfloat16 (oneDNN off).
   HALF_PRECISION_ULPS = 24 leaves a factor of 4.4; a quantity that overflows or underflows
   in float16 (a sum past 65504, an epsilon below 6e-8) gives inf or NaN and fails outright.
   (Under a capped ``ONEDNN_MAX_CPU_ISA`` these runs are skipped: see ``layer_checks``.)

Set ``ELMO_TESTS_NUMERICS_LOG=path`` to append every reordered or half-precision comparison's
observed error (in ulps of its dtype) to ``path`` as JSON lines: that is how the worst cases above
were measured.
"""

import json
import os

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23: one ulp of 1.0 in float32

REORDER_ULPS = 32

# One ulp of 1.0 in the compute dtypes of Keras's mixed policies (10 and 7 mantissa bits).
HALF_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
# Measured worst case 5.4 ulps of scale (bfloat16, oneDNN off); see (4) in the docstring.
HALF_PRECISION_ULPS = 24

# AllenNLP's golden outputs (PyTorch, float32 on another CPU): observed <= 3.8e-6 on values up
# to ~5, i.e. the same reordering effect over two frameworks' kernels.
REFERENCE_ATOL_ALLENNLP = 2e-5
# The original bilm-tf (TF1 graph, float32): observed <= 9.5e-7.
REFERENCE_ATOL_BILM_TF = 1e-5


def to_numpy(x):
    """``x`` as a NumPy array: a backend tensor (TensorFlow, JAX or PyTorch, also one that
    requires grad) through ``keras.ops.convert_to_numpy``, anything else through NumPy."""
    if isinstance(x, np.ndarray | np.generic | int | float | list | tuple):
        return np.asarray(x)
    import keras

    return np.asarray(keras.ops.convert_to_numpy(x))


def reorder_atol(expected):
    """The absolute tolerance ``assert_reordered`` allows for ``expected``."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    return REORDER_ULPS * EPS32 * scale


def assert_same(actual, expected, err_msg=""):
    """Bitwise equality: the same arithmetic in the same order."""
    np.testing.assert_array_equal(to_numpy(actual), to_numpy(expected), err_msg=err_msg)


def assert_reordered(actual, expected, err_msg=""):
    """Equal up to float32 summation order; see the module docstring for the bound."""
    actual, expected = to_numpy(actual), to_numpy(expected)
    assert actual.shape == expected.shape, f"{err_msg}: shape {actual.shape} != {expected.shape}"
    atol = reorder_atol(expected)
    _log(actual, expected, ulp=atol / REORDER_ULPS, dtype="float32")
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol, err_msg=err_msg)


def assert_reordered_dict(actual, expected, keys=None):
    """``assert_reordered`` for each key of two output dicts (same keys unless ``keys``)."""
    if keys is None:
        assert sorted(actual) == sorted(expected)
        keys = list(expected)
    for key in keys:
        assert_reordered(actual[key], expected[key], err_msg=str(key))


def half_precision_atol(expected, dtype):
    """The absolute tolerance ``assert_half_precision`` allows for ``expected`` in ``dtype``."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    return HALF_PRECISION_ULPS * HALF_EPS[str(dtype)] * scale


def assert_half_precision(actual, expected, dtype, err_msg=""):
    """A float16/bfloat16 computation against its float32 twin; see the module docstring."""
    actual = to_numpy(actual).astype(np.float32)
    expected = to_numpy(expected)
    assert actual.shape == expected.shape, f"{err_msg}: shape {actual.shape} != {expected.shape}"
    atol = half_precision_atol(expected, dtype)
    _log(actual, expected, ulp=atol / HALF_PRECISION_ULPS, dtype=str(dtype))
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol, err_msg=err_msg)


def _log(actual, expected, ulp, dtype):
    """``ulp``: one ulp of the comparison's scale in ``dtype``."""
    path = os.environ.get("ELMO_TESTS_NUMERICS_LOG")
    if not path or expected.size == 0:
        return
    error = float(np.abs(actual.astype(np.float64) - expected.astype(np.float64)).max())
    record = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0],
        "dtype": dtype,
        "max_abs_error": error,
        "ulps_of_scale": error / ulp,
        "isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "default"),
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
        "threads": os.environ.get("TF_NUM_INTRAOP_THREADS", "default"),
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
