"""The token-vector cache that ``ELMo.embed`` keeps for the model's lifetime.

A token's context-free vector (character CNN + highway + projection) depends only on the token
and on the character encoder's weights, and for the published models it costs as much as the
LSTMs or more; a corpus repeats its frequent words constantly. So the embed path encodes each
distinct token once and keeps its vector here, across calls: a user who calls ``embed`` per
chunk of a corpus pays for each distinct token once, not once per chunk.

- Bounded: at most ``max_tokens`` vectors and ``max_bytes`` bytes (vectors plus a fixed
  per-entry overhead), least recently used first out. Defaults: 100,000 tokens and 256 MiB
  (the published 'original' model's 512-wide vectors: about 225 MB when full).
- Never stale: ``WeightSnapshot`` keeps a copy of the character encoder's weights as they were
  when the cached vectors were computed; every ``embed`` call first compares the live weights
  with it (bitwise, in TensorFlow: one pass over the encoder's weights, measured 6 ms for the
  'small' shape's 8.9 M and 12 ms for the 'original' shape's 18 M encoder weights on 2 cores)
  and empties the cache when anything changed (``fit``, ``load_weights``, ``set_weights``, a
  direct ``assign``). The copy costs the encoder's size in memory (36 / 72 MB).
- Thread-safe: concurrent ``embed`` calls share it under a lock.
- Observable: ``hits``, ``misses``, ``len()``, ``nbytes``; ``clear()`` and ``resize()``.

``model.token_cache`` is the model's cache.
"""

import collections
import threading

from keras import ops

from elmo_tf import backend

DEFAULT_MAX_TOKENS = 100_000
DEFAULT_MAX_BYTES = 256 << 20
ENTRY_OVERHEAD_BYTES = 200  # the key, the array object and the dict slot, roughly


class TokenVectorCache:
    """A thread-safe, bounded least-recently-used map from a token to its vector.

    Args:
        max_tokens: most vectors held (0: hold none).
        max_bytes: most bytes held, counting each vector's ``nbytes`` plus
            ``ENTRY_OVERHEAD_BYTES``; ``None`` for no byte bound.
    """

    def __init__(self, max_tokens=DEFAULT_MAX_TOKENS, max_bytes=DEFAULT_MAX_BYTES):
        self._lock = threading.Lock()
        self._vectors = collections.OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self.resize(max_tokens, max_bytes)

    def __len__(self):
        return len(self._vectors)

    def resize(self, max_tokens=None, max_bytes=None):
        """Sets new bounds (``None`` keeps a bound as it is) and evicts down to them."""
        with self._lock:
            if max_tokens is not None:
                if max_tokens < 0:
                    raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
                self.max_tokens = max_tokens
            if max_bytes is not None:
                if max_bytes < 0:
                    raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
                self.max_bytes = max_bytes
            elif not hasattr(self, "max_bytes"):
                self.max_bytes = None
            self._evict()

    def clear(self):
        """Drops every vector (the hit and miss counts stay)."""
        with self._lock:
            self._vectors.clear()
            self.nbytes = 0

    def get(self, key):
        """The vector of ``key``, or ``None``."""
        return self.get_many([key])[0]

    def get_many(self, keys):
        """The vectors of ``keys`` (``None`` where not held), each counted as a hit or miss."""
        with self._lock:
            found = []
            for key in keys:
                vector = self._vectors.get(key)
                if vector is None:
                    self.misses += 1
                else:
                    self.hits += 1
                    self._vectors.move_to_end(key)
                found.append(vector)
            return found

    def put(self, key, vector):
        self.put_many([key], [vector])

    def put_many(self, keys, vectors):
        """Stores ``vectors`` (copied, so they hold no larger array alive) under ``keys``."""
        if self.max_tokens == 0:
            return
        with self._lock:
            for key, vector in zip(keys, vectors):
                old = self._vectors.pop(key, None)
                if old is not None:
                    self.nbytes -= old.nbytes + ENTRY_OVERHEAD_BYTES
                vector = vector.copy()
                self._vectors[key] = vector
                self.nbytes += vector.nbytes + ENTRY_OVERHEAD_BYTES
            self._evict()

    def _evict(self):
        while self._vectors and (
            len(self._vectors) > self.max_tokens
            or (self.max_bytes is not None and self.nbytes > self.max_bytes)
        ):
            _, vector = self._vectors.popitem(last=False)
            self.nbytes -= vector.nbytes + ENTRY_OVERHEAD_BYTES


class WeightSnapshot:
    """Tells whether variables still hold the values they held when last ``taken``."""

    def __init__(self, variables):
        self._variables = list(variables)
        self.size = len(self._variables)
        self._values = None
        self._equal = _compiled_equal(self._variables)

    def unchanged(self):
        """``False`` before the first ``take`` and after any change of any variable."""
        return self._values is not None and bool(self._equal(self._values))

    def take(self):
        """Remembers the variables' current values (a copy in the backend's memory)."""
        self._values = [ops.copy(v.value) for v in self._variables]


def _compiled_equal(variables):
    """``equal(values)``: whether every variable holds ``values`` bitwise, in one compiled
    call where the backend compiles (a pass over the weights, not one call per variable)."""
    if backend.is_tensorflow():
        import tensorflow as tf  # lazy: this backend's compiled form

        def all_equal(values):
            equal = [tf.reduce_all(tf.equal(v.value, s)) for v, s in zip(variables, values)]
            return tf.reduce_all(tf.stack(equal)) if equal else tf.constant(True)

        specs = [tf.TensorSpec(v.shape, v.dtype) for v in variables]
        return tf.function(all_equal, input_signature=[specs])

    def equal(live, values):
        return all(bool(ops.all(ops.equal(a, b))) for a, b in zip(live, values))

    if backend.name() == "jax":
        # lazy: this backend's compiled form
        import jax
        import jax.numpy as jnp

        compiled = jax.jit(
            lambda live, values: jnp.all(
                jnp.stack([jnp.all(a == b) for a, b in zip(live, values)] or [jnp.bool_(True)])
            )
        )
        return lambda values: compiled([v.value for v in variables], values)
    return lambda values: equal([v.value for v in variables], values)
