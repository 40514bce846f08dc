"""TensorFlow's CPU thread pools, set for ELMo inference.

Each biLSTM layer runs its forward and backward directions in one ``tf.while_loop``
(``layers.bidirectional_lstm_stack.run_directions``), so every step holds two independent
chains of ops (a recurrent matmul, the gates, a projection matmul), each too small to keep
several cores busy at once. Two inter-op threads running the two directions side by side, each
op on half the cores, beat TensorFlow's default (every op spread over all cores, one after the
other). Measured on a 2-core machine (``benchmarks/profile_embed.py``, 300 sentences, B = 64,
random weights): full shape 933-937 -> 1,002-1,008 tokens/s, small 6,446-6,479 -> 7,383-7,417.
The original bilm-tf graph gains as much from the same setting, so the benchmark gives it to
both sides.

``configure_threads()`` must run before TensorFlow executes its first op (TensorFlow fixes its
pools then); ``elmo-tf embed`` calls it at start. Either environment variable
``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS`` set by the user wins: nothing is changed.

>>> import elmo_tf
>>> elmo_tf.configure_threads()   # first thing, before any model is built
>>> model = elmo_tf.load_pretrained("options.json", "weights.hdf5")
"""

import os
import warnings

from elmo_tf import checks

ENV_VARS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def available_cpus():
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def recommended_threads(cpus=None):
    """``(intra_op, inter_op)`` for ELMo inference on ``cpus`` cores: two directions side by
    side, each op on half the cores."""
    cpus = available_cpus() if cpus is None else cpus
    if cpus < 2:
        return 1, 1
    return cpus // 2, 2


def configure_threads(intra_op=None, inter_op=None, warn=True):
    """Sets TensorFlow's intra-op and inter-op pools (``recommended_threads()`` by default).

    Returns the ``(intra_op, inter_op)`` in effect (set now, or already so), or ``None`` when
    the setting was not applied: Keras runs on another backend than TensorFlow, the user
    set ``TF_NUM_INTRAOP_THREADS`` or ``TF_NUM_INTEROP_THREADS``, or TensorFlow already
    started its pools (then the setting could not apply; a warning says so unless ``warn``
    is false, as for the CLI run in-process after other TensorFlow work).
    """
    if any(os.environ.get(name) for name in ENV_VARS) or not _keras_on_tensorflow():
        return None  # the user's setting; or another backend (XLA, ATen), whose pools stay
    default_intra, default_inter = recommended_threads()
    intra_op = default_intra if intra_op is None else intra_op
    inter_op = default_inter if inter_op is None else inter_op
    for name, value in (("intra_op", intra_op), ("inter_op", inter_op)):
        checks.positive_integer(name, value)
    # lazy: the command line imports this module before TensorFlow
    import tensorflow as tf

    threading = tf.config.threading
    try:  # TensorFlow accepts a value equal to the current one even after its pools started
        threading.set_intra_op_parallelism_threads(int(intra_op))
        threading.set_inter_op_parallelism_threads(int(inter_op))
    except RuntimeError:  # "... cannot be modified after initialization"
        if not warn:
            return None

        warnings.warn(
            "elmo_tf.configure_threads: TensorFlow has already started its thread pools; "
            "call it before the first model or op is built",
            stacklevel=2,
        )
        return None
    return intra_op, inter_op


def _keras_on_tensorflow():
    """Whether Keras runs on TensorFlow (the pools set here are TensorFlow's)."""
    from elmo_tf import backend  # lazy: imports Keras, which the command line defers

    return backend.is_tensorflow()
