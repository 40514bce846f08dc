"""Host-side embedding of tokenised sentences: batching, a token-vector cache, compiled calls.

The context-free token vector (character CNN + highway + projection) of a token never depends
on its sentence, and for the published models it costs as much as the LSTMs or more. So the
embed path computes it once per distinct token, keeps it in a bounded LRU cache (a corpus
repeats its frequent words constantly), and runs the
compiled biLSTM on the assembled ``(B, T + 2, P)`` tensor. The numbers are those of
``ELMo.call``: the same ops on the same values, grouped differently.

The cache lives with the model, across calls, and is emptied whenever the character
encoder's weights change (``elmo_tf.models.token_cache``).
"""

import threading

import numpy as np

from elmo_tf.models import length_batches
from elmo_tf.models.compiled_calls import HOST_DTYPE, compiled_calls
from elmo_tf.models.outputs import LSTMState
from elmo_tf.models.token_cache import TokenVectorCache, WeightSnapshot
from elmo_tf.tokens import characters

# Tokens per character-encoder call: bounds the CNN's (N, 50, filters) activations.
ENCODE_CHUNK = 512

_BOS_KEY = ("<boundary>", "bos")
_EOS_KEY = ("<boundary>", "eos")


class Embedder:
    """Runs an ``ELMo`` over Python sentences with the compiled calls of its Keras backend
    (``elmo_tf.models.compiled_calls``), which take any batch shape.

    The host side (token-vector cache, framed tables, states, outputs) holds float32 whatever
    the model's compute dtype: NumPy has no bfloat16, and a float16 or bfloat16 value survives
    the round trip through float32 exactly, so a mixed-precision model computes what its
    ``call`` computes. The compiled functions cast at their edges (a no-op for float32).
    """

    def __init__(self, model):
        self.model = model
        self.token_cache = TokenVectorCache()
        self._encoder_weights = None  # a WeightSnapshot, made once the encoder is built
        self._cache_lock = threading.Lock()
        self.calls = compiled_calls(model)

    def _token_vectors(self, keys, cache):
        """(len(keys), P) vectors, encoding only those the cache does not hold."""
        vectors = cache.get_many(keys)
        missing = [i for i, v in enumerate(vectors) if v is None]
        for start in range(0, len(missing), ENCODE_CHUNK):
            chunk = missing[start : start + ENCODE_CHUNK]
            ids = np.stack([self._key_to_ids(keys[i]) for i in chunk])
            encoded = self.calls.encode(ids)
            for i, vector in zip(chunk, encoded):
                vectors[i] = vector
            cache.put_many([keys[i] for i in chunk], encoded)
        return vectors

    def fill_token_cache(self, tokens):
        """Computes the vectors of ``tokens`` into the model's token cache (a model's
        vocabulary, as simple_elmo caches its first words' character ids)."""
        tokens = list(dict.fromkeys(t for t in tokens if isinstance(t, str)))
        if tokens:
            self._token_vectors(tokens, self.shared_cache())

    def _key_to_ids(self, key):
        """A cache key's id row, through the model's own token mapping."""
        mapper = self.model.token_mapper
        if key == _BOS_KEY:
            return mapper.bos_row
        if key == _EOS_KEY:
            return mapper.eos_row
        return mapper.token_row(key)

    def shared_cache(self):
        """The model's token cache, emptied first if the character encoder's weights changed."""
        with self._cache_lock:
            weights = self.model.character_encoder.weights
            if self._encoder_weights is None or self._encoder_weights.size != len(weights):
                self._encoder_weights = WeightSnapshot(weights)  # an unbuilt encoder has none
            if not weights or not self._encoder_weights.unchanged():
                self.token_cache.clear()
                self._encoder_weights.take()
        return self.token_cache

    def _framed_embeddings(self, batch, cache):
        """(B, T + 2, P) token vectors with <S>/</S> framing, and the lengths (B,)."""
        lengths = np.array([len(s) for s in batch], np.int32)
        max_len = int(lengths.max(initial=0))
        rows = {}  # key -> row in the table; row 0 is the zero vector of padding
        index = np.zeros([len(batch), max_len + 2], np.int64)
        for b, sentence in enumerate(batch):
            index[b, 0] = rows.setdefault(_BOS_KEY, len(rows) + 1)
            for j, token in enumerate(sentence, start=1):
                index[b, j] = rows.setdefault(token, len(rows) + 1)
            index[b, len(sentence) + 1] = rows.setdefault(_EOS_KEY, len(rows) + 1)
        p = self.model.config.projection_dim
        table = np.zeros([len(rows) + 1, p], HOST_DTYPE)
        if rows:
            table[1:] = np.stack(self._token_vectors(list(rows), cache))
        return table[index], lengths

    def embed(
        self, sentences, batch_size, initial_state, return_state, token_cache_size, max_batch_tokens
    ):
        """``ELMo.embed``: every batch's outputs put back in the order of ``sentences``."""
        sentences = characters.token_lists(sentences)
        n = len(sentences)
        max_len = max((len(s) for s in sentences), default=0)
        result = {
            key: np.zeros(shape, np.float32)
            for key, shape in self.model.output_shapes(n, max_len).items()
        }
        result["sequence_len"] = np.array([len(s) for s in sentences], np.int32)
        if return_state and initial_state is None:
            initial_state = self.model.zero_state(n)
        state = None if initial_state is None else self.model.zero_state(n)
        for indices, outputs in self.batches(
            sentences, batch_size, initial_state, token_cache_size, max_batch_tokens
        ):
            for key, array in result.items():
                if key == "sequence_len":
                    continue
                value = outputs[key]
                if array.ndim == 3:
                    array[indices, : value.shape[1]] = value
                else:
                    array[indices] = value
            if state is not None:
                state.cell[indices] = outputs["state"].cell
                state.hidden[indices] = outputs["state"].hidden
        return (result, state) if return_state else result

    def batches(self, sentences, batch_size, initial_state, token_cache_size, max_batch_tokens):
        """``ELMo.embed_batches``: the arguments checked at the call, then ``run``'s batches."""
        sentences = characters.token_lists(sentences)
        length_batches.check_max_batch_tokens(max_batch_tokens)
        if initial_state is not None:
            initial_state = LSTMState(*(np.asarray(s, np.float32) for s in initial_state))
            expected = self.model.zero_state(len(sentences))
            for name, given, want in zip(LSTMState._fields, initial_state, expected):
                if given.shape != want.shape:
                    raise ValueError(
                        f"initial_state.{name} has shape {given.shape}; expected {want.shape} "
                        f"for {len(sentences)} sentences"
                    )
        return self.run(sentences, batch_size, initial_state, token_cache_size, max_batch_tokens)

    def run(
        self,
        sentences,
        batch_size,
        initial_state=None,
        token_cache_size=None,
        max_batch_tokens=length_batches.DEFAULT_MAX_BATCH_TOKENS,
    ):
        """Yields ``(indices, outputs)`` per length-sorted batch; see ``ELMo.embed_batches``.

        Batches come from ``length_batches.length_batches``: at most ``batch_size`` rows and at most
        ``max_batch_tokens`` padded tokens (``None`` or 0: no budget). The compiled functions
        take any batch shape, so the budget's smaller batches do not re-trace.
        """
        lengths = [len(s) for s in sentences]
        batches = length_batches.length_batches(lengths, batch_size, max_batch_tokens)
        if token_cache_size is None:
            cache = self.shared_cache()
        else:  # a private cache for this call only (0: none)
            cache = TokenVectorCache(token_cache_size, max_bytes=None)
        for indices in batches:
            batch = [sentences[i] for i in indices]
            embeddings, lengths = self._framed_embeddings(batch, cache)
            if initial_state is None:
                outputs = self.calls.contextualize(embeddings, lengths)
            else:
                outputs = self.calls.contextualize_stateful(
                    embeddings, lengths, initial_state[0][indices], initial_state[1][indices]
                )
            yield indices, outputs
