"""The Keras backend the model runs on, and the one place that picks a code path for it.

elmo-tf's layers are Keras 3 layers: the model runs on TensorFlow (the default), JAX or PyTorch,
whichever ``KERAS_BACKEND`` names. Two parts differ by backend, and ``bilstm_path`` chooses:

- ``"packed"`` (TensorFlow): rows sorted by length, each step's matmuls on the rows still
  running, the input half computed on the real positions only (``layers.packed_lstm``); the
  token CNN once per distinct token of a call.
- ``"eager_packed"`` (PyTorch): the same in eager PyTorch (``layers.eager_packed_lstm``); the
  token CNN once per distinct token.
- ``"masked"`` (JAX): one fixed-shape loop over every position, a mask keeping each row's
  state after its last token (``layers.masked_lstm``; ``keras.ops.scan``, which JAX compiles
  into one ``lax.scan``); the token CNN on every position.

All compute each row's numbers from that row alone, so they agree to float32 round-off. An
exporter whose converter cannot read the packed loop traces the model with a loop of its own
(``tracing_bilstm_with``; the ONNX export's ``elmo_tf.export.onnx_lstm``).

What is TensorFlow by nature (SavedModel and TFLite export, serving, Beam, biLM training, the
string signatures) says so in one line on another backend (``require_tensorflow``).
"""

import contextlib
import threading

import keras

from elmo_tf import precision as elmo_precision
from elmo_tf.errors import ElmoError
from elmo_tf.system import extras

BACKENDS = ("tensorflow", "jax", "torch")


class BackendError(ElmoError, RuntimeError):
    """A part of elmo-tf that needs another Keras backend than the one this process runs."""


def name():
    """The Keras backend of this process: ``"tensorflow"``, ``"jax"`` or ``"torch"``."""
    return keras.config.backend()


def is_tensorflow():
    return name() == "tensorflow"


def bilstm_path():
    """``"packed"`` on TensorFlow, ``"eager_packed"`` on PyTorch, ``"masked"`` on JAX (see
    the module docstring)."""
    return {"tensorflow": "packed", "torch": "eager_packed"}.get(name(), "masked")


_traced_loop = threading.local()


def bilstm_module():
    """The dotted name of the module whose loop the biLSTM runs in this thread now: the one
    ``tracing_bilstm_with`` names, else ``elmo_tf.layers.{bilstm_path()}_lstm``."""
    pinned = getattr(_traced_loop, "module", None)
    return pinned or f"elmo_tf.layers.{bilstm_path()}_lstm"


@contextlib.contextmanager
def tracing_bilstm_with(module):
    """Within the block, the biLSTM traced on this thread runs the loop of ``module`` (a
    dotted name; the module has the functions of ``layers.packed_lstm``): how an exporter
    hands its converter a loop the converter can read (``elmo_tf.export.onnx_lstm``)."""
    previous = getattr(_traced_loop, "module", None)
    _traced_loop.module = module
    try:
        yield
    finally:
        _traced_loop.module = previous


def require_tensorflow(what):
    """Raises ``BackendError`` naming ``what`` unless Keras runs on TensorFlow (one that says
    how to install it where it is not)."""
    if not is_tensorflow() and extras.missing("tensorflow"):
        raise extras.MissingExtraError(
            f"{what} needs TensorFlow, which is not installed: "
            f"{extras.install_command('tensorflow')}, and KERAS_BACKEND=tensorflow"
        )
    if not is_tensorflow():
        raise BackendError(
            f"{what} needs the TensorFlow backend; this process runs Keras on {name()} "
            "(KERAS_BACKEND): run it with KERAS_BACKEND=tensorflow"
        )


def is_concrete(x):
    """Whether ``x`` holds values now (not a symbolic Keras input, a graph tensor being
    traced, or a JAX tracer)."""
    if isinstance(x, keras.KerasTensor):
        return False
    backend = name()
    if backend == "tensorflow":
        import tensorflow as tf  # lazy: only on the TensorFlow backend

        return tf.executing_eagerly()
    if backend == "jax":
        import jax  # lazy: only on the JAX backend

        return not isinstance(x, jax.core.Tracer)
    return True


# ---------------------------------------------------------------- PyTorch module conventions
# On PyTorch a Keras layer is a ``torch.nn.Module``; these keep the model's behaviour what a
# PyTorch user expects of one: train()/eval() drive dropout, requires_grad decides what trains,
# state_dict() keys are stable names.


def settle_module(model):
    """Called once a model is built: a ``trainable=False`` given to the constructor reaches
    every variable (Keras creates variables trainable, so on PyTorch their ``requires_grad``
    stayed ``True``); on PyTorch the model starts in eval mode, as a Keras model infers by
    default (``train()`` turns dropout on)."""
    if not model.trainable:
        model.trainable = False  # the setter reaches every variable and sublayer
    if name() == "torch":
        model.train(False)


def default_training(layer):
    """What ``training=None`` means in a call: on PyTorch the module's mode (``train()`` /
    ``eval()``), elsewhere inference (Keras's default)."""
    return bool(layer.training) if name() == "torch" else False


def check_weight_dtypes(model):
    """On PyTorch, a one-line ``TypeError`` when ``model.to(dtype)``, ``.double()`` or
    ``.half()`` changed the weights under Keras, which keeps computing in the dtype it was
    built with."""
    if name() != "torch":
        return
    expected = keras.backend.standardize_dtype(model.dtype_policy.variable_dtype)
    for parameter in model.parameters():
        if not parameter.is_floating_point():  # a dropout's seed state
            continue
        actual = keras.backend.standardize_dtype(parameter.dtype)
        if actual != expected:
            raise TypeError(
                f"this model's weights are {actual} (changed by .to(), .double() or .half()) "
                f"but its layers compute for {expected}: build the model with dtype="
                f"{actual!r} instead"
            )


def weights_device(model):
    """A context in which Keras creates tensors where ``model``'s weights are: on PyTorch
    the device of its parameters (``model.to(device)`` moves them, Keras's own default
    stays), elsewhere Keras's own placement."""
    if name() == "torch":
        for parameter in model.parameters():
            return keras.device(str(parameter.device))
    return contextlib.nullcontext()


def dtype_policy(precision, dtype=None):
    """The Keras dtype policy a model of ``precision`` computes in on this backend and its
    device (``elmo_tf.precision``: refused in one line where they cannot honour it);
    ``ValueError`` where a ``dtype`` is given too."""
    if dtype is not None:
        raise ValueError("pass precision or dtype, not both")
    runtime = name()
    elmo_precision.check(precision, runtime, elmo_precision.default_device(runtime))
    return elmo_precision.dtype_policy(precision)
