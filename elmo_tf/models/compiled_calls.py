"""The compiled functions behind ``ELMo.embed``, one set per Keras backend.

``Embedder`` (the host side: batches, token cache, framing) calls three functions and gets
NumPy arrays back:

- ``encode(ids)``: ``(N, 50)`` character ids -> ``(N, P)`` context-free token vectors;
- ``contextualize(embeddings, lengths)``: framed ``(B, T + 2, P)`` token vectors -> the
  model's outputs (``ELMo.contextualize``);
- ``contextualize_stateful(embeddings, lengths, cell, hidden)``: the same from a given state,
  with the state after each row's last token in ``outputs["state"]``.

TensorFlow: ``tf.function``s with input signatures, traced once for every shape; calls of few
rows run in a graph of their own traced with the fused LSTM layout (``lstm_layout``). JAX:
``jax.jit`` of the model's stateless form (its variables passed in, so a changed weight is
never a stale constant). XLA compiles one executable per input shape, so every call's shape
is rounded up to a bucket (rows and framed positions to a power of two, positions at least
16; tokens to encode to ``encode_bucket``: 16, 64, 256, 512; the
padding is masked or cut off, so a row's values are those of its unpadded call) and a corpus
compiles a handful of shapes, not one per sentence length; at most ``JAX_MAX_SHAPES``
executables are kept per function, the least recently used dropped first.
PyTorch: eager calls without autograd.

The host side holds float32 whatever the model's compute dtype (NumPy has no bfloat16; a
half-precision value survives the round trip through float32 exactly): every function casts
its floating outputs to float32.
"""

import collections
import threading

import numpy as np
from keras import ops

from elmo_tf import backend
from elmo_tf.layers import lstm_layout
from elmo_tf.models.outputs import LSTMState

HOST_DTYPE = "float32"
# The fewest framed positions a JAX call is compiled for (see position_bucket).
JAX_MIN_POSITIONS = 16
# Compiled shapes a JAX function keeps (executables of the published model: tens of MB each).
JAX_MAX_SHAPES = 16


def compiled_calls(model):
    """The ``encode``/``contextualize``/``contextualize_stateful`` set for ``model``'s backend."""
    calls = {"tensorflow": TensorFlowCalls, "jax": JaxCalls, "torch": TorchCalls}
    return calls[backend.name()](model)


def _to_host(outputs):
    """Floating tensors cast to float32, as NumPy arrays (an ``LSTMState`` stays one)."""

    def convert(t):
        array = ops.convert_to_numpy(ops.cast(t, HOST_DTYPE) if _is_float(t) else t)
        return np.asarray(array)

    return _map(convert, outputs)


def _is_float(t):
    return "float" in str(t.dtype)


def _map(function, outputs):
    if isinstance(outputs, LSTMState):
        return LSTMState(*(function(t) for t in outputs))
    if isinstance(outputs, dict):
        return {key: _map(function, value) for key, value in outputs.items()}
    return function(outputs)


class TensorFlowCalls:
    def __init__(self, model):
        import tensorflow as tf  # lazy: this backend's calls

        config = model.config
        p = config.projection_dim
        host = tf.float32

        def cast(outputs):
            return tf.nest.map_structure(
                lambda t: tf.cast(t, host) if t.dtype.is_floating else t, outputs
            )

        self._encode = tf.function(
            lambda ids: cast(model.character_encoder(ids)),
            input_signature=[tf.TensorSpec([None, config.id_width], tf.int32)],
        )
        embeddings = tf.TensorSpec([None, None, p], host)
        lengths = tf.TensorSpec([None], tf.int32)
        # ELMo.contextualize casts the embeddings and the state to the compute dtype.
        self._contextualize = tf.function(
            lambda x, n: cast(model.contextualize(x, n)), input_signature=[embeddings, lengths]
        )
        # Calls of a few rows run in a graph of their own, traced with the fused LSTM layout
        # (lstm_layout.SMALL_BATCH_ROWS: too short to earn back the per-gate kernel copies).
        self._contextualize_small = tf.function(
            lambda x, n: cast(model.contextualize(x, n)), input_signature=[embeddings, lengths]
        )
        state = [
            tf.TensorSpec([None, config.n_lstm_layers, 2, config.lstm_dim], host),
            tf.TensorSpec([None, config.n_lstm_layers, 2, p], host),
        ]
        self._contextualize_stateful = tf.function(
            lambda x, n, c, h: cast(model.contextualize(x, n, initial_state=(c, h))),
            input_signature=[embeddings, lengths, *state],
        )

    def encode(self, ids):
        return self._encode(ids).numpy()

    def contextualize(self, embeddings, lengths):
        if len(lengths) < lstm_layout.SMALL_BATCH_ROWS:
            with lstm_layout.pinned("fused"):  # the layout of its first (and only) trace
                return _to_host(self._contextualize_small(embeddings, lengths))
        return _to_host(self._contextualize(embeddings, lengths))

    def contextualize_stateful(self, embeddings, lengths, cell, hidden):
        return _to_host(self._contextualize_stateful(embeddings, lengths, cell, hidden))


class JaxCalls:
    def __init__(self, model):
        # lazy: this backend's calls
        import jax
        import keras

        self.model = model

        def stateless(function):
            def compile_one():  # a jit of its own per shape: dropping it frees its executable
                def run(values, *args):
                    mapping = list(zip(model.variables, values))
                    with keras.StatelessScope(state_mapping=mapping):
                        return function(*args)

                return jax.jit(run)

            return CompiledShapes(compile_one)

        def cast(outputs):
            return _map(lambda t: t.astype(HOST_DTYPE) if _is_float(t) else t, outputs)

        self._encode = stateless(lambda ids: cast(model.character_encoder(ids)))
        self._contextualize = stateless(lambda x, n: cast(model.contextualize(x, n)))
        self._contextualize_stateful = stateless(
            lambda x, n, c, h: cast(model.contextualize(x, n, initial_state=(c, h)))
        )

    def _values(self):
        return [v.value for v in self.model.variables]

    def compiled_shapes(self):
        """``{function: [argument shapes kept compiled]}``, least recently used first."""
        return {
            "encode": self._encode.shapes(),
            "contextualize": self._contextualize.shapes(),
            "contextualize_stateful": self._contextualize_stateful.shapes(),
        }

    def encode(self, ids):
        rows = len(ids)
        padded = _pad_rows(ids, encode_bucket(rows))
        return np.asarray(self._encode(self._values(), padded))[:rows]

    def contextualize(self, embeddings, lengths):
        embeddings, lengths, rows, steps = _pad_batch(embeddings, lengths)
        outputs = self._contextualize(self._values(), embeddings, lengths)
        return _unpad(_to_host(outputs), rows, steps)

    def contextualize_stateful(self, embeddings, lengths, cell, hidden):
        embeddings, lengths, rows, steps = _pad_batch(embeddings, lengths)
        cell, hidden = (_pad_rows(s, len(lengths)) for s in (cell, hidden))
        outputs = self._contextualize_stateful(self._values(), embeddings, lengths, cell, hidden)
        return _unpad(_to_host(outputs), rows, steps)


class CompiledShapes:
    """A compiled function per input shape, the ``max_shapes`` most recently used kept.

    ``compile_one()`` makes a fresh ``jax.jit`` function; each shape gets its own, so that the
    one dropped takes its executable (and JAX's caches keyed by it) along.
    """

    def __init__(self, compile_one, max_shapes=None):
        self.compile_one = compile_one
        self.max_shapes = JAX_MAX_SHAPES if max_shapes is None else max_shapes
        self.functions = collections.OrderedDict()  # (shape, dtype) of each argument -> jit
        self._lock = threading.Lock()

    def __call__(self, values, *args):
        key = tuple((tuple(a.shape), str(a.dtype)) for a in args)
        with self._lock:
            function = self.functions.pop(key, None) or self.compile_one()
            self.functions[key] = function
            while len(self.functions) > self.max_shapes:
                _, dropped = self.functions.popitem(last=False)
                dropped.clear_cache()
        return function(values, *args)

    def shapes(self):
        """The argument shapes compiled and kept, least recently used first."""
        with self._lock:
            return [tuple(shape for shape, _ in key) for key in self.functions]


class TorchCalls:
    def __init__(self, model):
        self.model = model

    def _run(self, function, *args):
        import torch  # lazy: this backend's calls

        with torch.no_grad():
            return _to_host(function(*args))

    def encode(self, ids):
        return self._run(self.model.character_encoder, ids)

    def contextualize(self, embeddings, lengths):
        return self._run(self.model.contextualize, embeddings, lengths)

    def contextualize_stateful(self, embeddings, lengths, cell, hidden):
        return self._run(
            lambda *a: self.model.contextualize(a[0], a[1], initial_state=(a[2], a[3])),
            embeddings,
            lengths,
            cell,
            hidden,
        )


def _power_of_two(n):
    return 1 << max(0, int(n) - 1).bit_length()


def encode_bucket(n):
    """The tokens a JAX call of the character encoder on ``n`` tokens is compiled for: 16,
    64 or 256 (a power of four: its compile takes seconds, and the tokens new to the cache
    vary from call to call), or the power of two above 256 (a chunk of ``ENCODE_CHUNK``)."""
    bucket = 16
    while bucket < n and bucket < 256:
        bucket *= 4
    return bucket if bucket >= n else _power_of_two(n)


def position_bucket(n):
    """The framed positions a JAX call of ``n`` is compiled for: the power of two that holds
    ``n``, at least ``JAX_MIN_POSITIONS``. A compile takes seconds and a masked position
    costs a step of the LSTMs: sentences of up to 62 tokens compile 3 shapes, up to 10,000
    tokens 11, each call padded by less than twice its length."""
    return max(JAX_MIN_POSITIONS, _power_of_two(n))


def _pad_rows(array, rows):
    """``array`` with zero rows appended up to ``rows``."""
    array = np.asarray(array)
    if len(array) == rows:
        return array
    padding = np.zeros((rows - len(array), *array.shape[1:]), array.dtype)
    return np.concatenate([array, padding])


def _pad_batch(embeddings, lengths):
    """Framed embeddings and lengths padded to a bucketed shape (rows: a power of two; framed
    positions: ``position_bucket``); padded rows have length 0."""
    rows, framed = embeddings.shape[0], embeddings.shape[1]
    steps = position_bucket(framed)
    padded = np.zeros((_power_of_two(rows), steps, embeddings.shape[2]), embeddings.dtype)
    padded[:rows, :framed] = embeddings
    return padded, _pad_rows(lengths, len(padded)), rows, framed - 2


def _unpad(outputs, rows, steps):
    """The outputs of the first ``rows`` rows and ``steps`` token positions."""

    def cut(array):
        array = array[:rows]
        return array[:, :steps] if array.ndim == 3 else array

    return _map(cut, outputs)
