"""ELMo: the character-based biLM and its learned layer mix, as one Keras model.

The graph (``call``, ``contextualize``) lives here; the host side of ``embed`` (batching,
the token-vector cache, compiled calls, assembling the results) in ``embedder``.
"""

import keras
import numpy as np
from keras import ops

from elmo_tf import backend
from elmo_tf.config import ElmoConfig
from elmo_tf.layers import BidirectionalLSTMStack, CharacterEncoder, ScalarMix
from elmo_tf.models import loading
from elmo_tf.models.char_ids import (
    check_char_ids,
    check_char_ids_shape,
    host_char_ids,
    is_host_array,
)
from elmo_tf.models.embedder import Embedder
from elmo_tf.models.length_batches import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from elmo_tf.models.outputs import LSTMState, output_keys, output_shapes
from elmo_tf.models.settings import (  # noqa: F401
    MAX_OUTPUT_REPRESENTATIONS,
    check_fine_tune,
    check_settings,
)
from elmo_tf.tokens import token_mappers


def load_pretrained(options_file, weight_file, size_limits=None, **kwargs):
    """Builds an ``ELMo`` from an official options.json and weight file (paths, or
    ``http(s)://`` URLs downloaded into the cache on first use).

    ``size_limits`` raises the bounds on the model's size (see ``elmo_tf.config``). Other
    keyword arguments go to ``ELMo`` (``num_output_representations``, ``do_layer_norm``...).
    """
    return ELMo.from_files(options_file, weight_file, size_limits=size_limits, **kwargs)


@keras.saving.register_keras_serializable(package="elmo_tf")
class ELMo(keras.Model):
    """Deep contextualised word representations (Peters et al. 2018).

    Character ids -> ``CharacterEncoder`` (context-free token vectors) ->
    ``BidirectionalLSTMStack`` -> ``ScalarMix`` over the token layer and every LSTM layer.
    Each sentence is framed with ``<S>``/``</S>`` inside the model and the outputs are returned
    without them. The model is stateless: every call starts from a zero LSTM state unless a
    state is passed in explicitly, so a sentence's vectors never depend on its batch.

    Args:
        config: an ``ElmoConfig`` (or its options dict).
        num_output_representations: number of independent ``ScalarMix`` outputs
            (``elmo``, then ``elmo_1``, ``elmo_2``, ...).
        do_layer_norm: layer-normalise before mixing.
        l2_coefficient: λ of the paper's penalty on the mix weights (0: none).
        dropout: dropout rate on the mixed representations during training.
        dedupe_tokens: encode each distinct token of a batch once (same numbers, less work).
        precision: ``"float32"`` (default) or ``"bfloat16"``: bfloat16 weights, matmuls and
            convolutions (Keras's ``bfloat16`` policy: for inference the numbers of
            ``mixed_bfloat16``, without its per-call weight casts), refused in one line
            (``elmo_tf.precision.PrecisionError``) on a CPU without native bfloat16; ``int8``
            runs through an export (``elmo_tf.precision``). Not with ``dtype``.
        vocabulary: a code-point model's token tables (``CodepointVocabulary``; its
            ``vocabulary`` property, or its weight file's, which loading sets); ``None`` for
            bilm-tf's scheme, whose mapping needs none.
        **kwargs: ``keras.Model`` arguments. ``dtype="mixed_float16"`` or ``"mixed_bfloat16"``
            keeps the variables in float32 and computes in half precision, unchecked;
            :meth:`embed` still returns float32 arrays.

    Call arguments:
        inputs: int tensor ``(B, T, 50)`` of character ids (``elmo_tf.batch_to_ids``), zero
            rows at padded positions; or a dict with ``"char_ids"`` and optionally
            ``"initial_state"`` (an ``LSTMState``). A model with its own token mapping (code
            points, ``config.character_scheme``) takes the rows of its :meth:`batch_to_ids`,
            ``(B, T, config.id_width)``.
        training: enables dropout; by default off, and on PyTorch the module's mode
            (``train()`` / ``eval()``; a new model starts in eval mode).

    Returns:
        A dict keyed by ``output_keys(L, num_output_representations)`` for the config's L LSTM
        layers (``word_emb``, ``lstm_outputs1`` .. ``lstm_outputs{L}``, ``elmo``, ``default``,
        ``sequence_len``; shapes and meaning in the table of ``elmo_tf.models.outputs``;
        ``elmo_k`` are the extra mixes, shaped like ``elmo``; :meth:`output_shapes` gives
        every shape), plus ``state`` (an ``LSTMState`` after each row's last real position)
        when an initial state was given. Padded positions are zero.

    Example:
    >>> model = ELMo(elmo_tf.presets.preset("small"))
    >>> out = model(elmo_tf.batch_to_ids([["Hello", "world"]]))
    >>> out["elmo"].shape
    TensorShape([1, 2, 256])
    """

    def __init__(
        self,
        config,
        num_output_representations=1,
        do_layer_norm=False,
        l2_coefficient=0.0,
        dropout=0.0,
        dedupe_tokens=True,
        precision=None,
        vocabulary=None,
        **kwargs,
    ):
        if precision is not None:
            kwargs["dtype"] = backend.dtype_policy(precision, kwargs.get("dtype"))
        # A fixed default name: Keras would number a second model ("el_mo_1"), and the name
        # prefixes every variable path, so PyTorch state_dict keys would depend on how many
        # models the process has built.
        kwargs.setdefault("name", "elmo")
        super().__init__(**kwargs)
        check_settings(num_output_representations, do_layer_norm, l2_coefficient, dropout,
                       dedupe_tokens)  # fmt: skip
        if isinstance(config, dict):
            config = ElmoConfig.from_options(config)
        self.config = config
        self.num_output_representations = num_output_representations
        self.do_layer_norm = do_layer_norm
        self.l2_coefficient = l2_coefficient
        self.dropout_rate = dropout
        self.dedupe_tokens = dedupe_tokens

        # How tokens become id rows: the config's scheme; a code-point model's tables come with
        # its weights (load_weights replaces the mapper).
        self.token_mapper = token_mappers.mapper_for(config, vocabulary)
        # Every sublayer gets this model's dtype policy (Keras would give it the global one).
        self.character_encoder = CharacterEncoder(
            filters=config.filters,
            char_embedding_dim=config.char_embedding_dim,
            n_highway=config.n_highway,
            projection_dim=config.projection_dim,
            activation=config.activation,
            num_characters=config.char_table_rows,
            word_embedding_dim=config.word_embedding_dim,
            num_words=config.n_words,
            dtype=self.dtype_policy,
            name="character_encoder",
        )
        self.bilstm = BidirectionalLSTMStack(
            num_layers=config.n_lstm_layers,
            units=config.lstm_dim,
            projection_units=config.projection_dim,
            cell_clip=config.cell_clip,
            proj_clip=config.proj_clip,
            use_skip_connections=config.use_skip_connections,
            dtype=self.dtype_policy,
            name="bilstm",
        )
        self.scalar_mixes = [
            ScalarMix(
                config.n_lstm_layers + 1,
                do_layer_norm=do_layer_norm,
                l2_coefficient=l2_coefficient,
                dtype=self.dtype_policy,
                name=f"scalar_mix_{k}",
            )
            for k in range(num_output_representations)
        ]
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self._embedder = None
        self.build()
        backend.settle_module(self)

    @classmethod
    def from_preset(cls, name_or_dir, load_weights=True, **kwargs):
        """An ``ELMo`` from the bundled model, a published model or a model directory.

        Args:
            name_or_dir: ``"sotu"`` (the bundled model), a published model (``"small"``,
                ``"medium"``, ``"original"`` alias ``"full"``, ``"original_5.5b"``,
                ``"pubmed"``: downloaded on first use into the cache, ``elmo_tf.presets``),
                a directory with ``options.json`` and ``weights.hdf5`` (``elmo-tf
                dump-weights`` and ``elmo-tf convert`` write one), an ELMoForManyLangs model
                folder, an NLPL repository archive (``.zip``) of either kind, or an NLPL
                entry (``"nlpl:144"``, ``"efml-en"``: downloaded once into the cache).
            load_weights: load the trained weights (default); ``False`` gives the
                architecture with random weights (no download of a published model; an NLPL
                entry's archive, which alone holds its architecture, is fetched all the same,
                and an ELMoForManyLangs model keeps its token mapping).
            **kwargs: passed to ``ELMo`` (``num_output_representations``, ``dropout``...).

        >>> model = elmo_tf.ELMo.from_preset("small")  # downloads 54 MB the first time
        """
        return loading.from_preset(cls, name_or_dir, load_weights, **kwargs)

    @classmethod
    def from_files(cls, options_file, weight_file, size_limits=None, **kwargs):
        """An ``ELMo`` from an official options.json and HDF5 weight file, as paths or
        ``http(s)://`` URLs (fetched into the cache, ``elmo_tf.presets.cache``)
        (``elmo_tf.load_pretrained``; ``size_limits``: see ``elmo_tf.config``)."""
        return loading.from_files(cls, options_file, weight_file, size_limits, **kwargs)

    def build(self, input_shape=None):
        if self.built:
            return
        self.character_encoder.build((None, self.config.id_width))
        self.bilstm.build((None, None, self.config.projection_dim))
        for mix in self.scalar_mixes:
            mix.build([(None, None, self.config.output_dim)] * (self.config.n_lstm_layers + 1))
        self.built = True

    def encode_tokens(self, char_ids, mask):
        """Context-free token vectors ``(B, T, P)`` for ids ``(B, T, 50)`` (``config.id_width``);
        zero where masked.

        On TensorFlow and PyTorch the CNN runs on real tokens only, and (with
        ``dedupe_tokens``) once per distinct token; on JAX (fixed shapes) on every position,
        the masked ones zeroed after.
        """
        if backend.is_tensorflow():
            return _encode_real_tokens(self, char_ids, mask)
        if backend.name() == "torch":
            return _encode_real_tokens_torch(self, char_ids, mask)
        shape = ops.shape(char_ids)
        flat = ops.reshape(char_ids, (-1, shape[-1]))
        vectors = self.character_encoder(flat)
        vectors = ops.reshape(vectors, (shape[0], shape[1], self.config.projection_dim))
        return vectors * ops.cast(mask, vectors.dtype)[:, :, None]

    def bilm(self, char_ids, initial_state=None):
        """The biLM with sentence boundaries: what bilm-tf and AllenNLP's ``_ElmoBiLm`` return.

        Args:
            char_ids: int tensor ``(B, T, 50)`` without ``<S>``/``</S>``.
            initial_state: optional ``LSTMState``.

        Returns:
            A dict: ``activations``, a list of ``n_lstm_layers + 1`` tensors ``(B, T + 2, 2P)``
            (the token layer duplicated, then each LSTM layer) including the boundary
            positions; ``mask`` ``(B, T + 2)``; ``token_embeddings`` ``(B, T + 2, P)``;
            ``state``, an ``LSTMState``.
        """
        framed, mask, lengths = self.frame(char_ids)
        token_embeddings = self.encode_tokens(framed, mask)
        return self._bilm_from_embeddings(
            token_embeddings, lengths, initial_state, embeddings_frozen=self._encoder_frozen()
        )

    def bilm_from_embeddings(self, token_embeddings, lengths, initial_state=None):
        """:meth:`bilm` from framed context-free token vectors: ``token_embeddings``
        ``(B, T + 2, P)`` with ``<S>`` at 0, the tokens, ``</S>`` at ``length + 1`` and zeros
        after (as :meth:`frame` and :meth:`encode_tokens` make them), ``lengths`` ``(B,)`` the
        real tokens per row."""
        token_embeddings = ops.cast(token_embeddings, self.compute_dtype)
        lengths = ops.convert_to_tensor(lengths, "int32")
        return self._bilm_from_embeddings(token_embeddings, lengths, initial_state)

    def frame(self, char_ids):
        """Adds ``<S>`` at position 0 and ``</S>`` right after each sentence's last token.

        Returns ``(framed_ids (B, T + 2, 50), mask (B, T + 2), lengths (B,))``; ``lengths``
        counts the real tokens without the boundaries.
        """
        char_ids = ops.convert_to_tensor(char_ids, dtype="int32")
        lengths = ops.sum(ops.cast(ops.any(char_ids > 0, axis=-1), "int32"), axis=1)
        max_len = ops.shape(char_ids)[1]
        zeros = ops.sum(ops.zeros_like(char_ids), axis=1, keepdims=True)  # (B, 1, 50), also T = 0
        # The markers' rows: bilm-tf's constants, or a code-point model's (from its config).
        bos = zeros + ops.convert_to_tensor(self.token_mapper.bos_row)
        framed = ops.concatenate([bos, char_ids, zeros], axis=1)  # (B, T + 2, 50)
        positions = ops.arange(max_len + 2, dtype="int32")[None, :]  # (1, T + 2)
        is_eos = (positions == (lengths + 1)[:, None])[:, :, None]
        eos = ops.convert_to_tensor(self.token_mapper.eos_row)[None, None, :]
        framed = ops.where(is_eos, eos, framed)
        return framed, positions <= (lengths + 1)[:, None], lengths

    def _encoder_frozen(self):
        return not self.character_encoder.trainable_weights

    def _bilm_from_embeddings(
        self, token_embeddings, lengths, initial_state=None, embeddings_frozen=False
    ):
        """The biLM on framed token vectors; ``embeddings_frozen`` says that no trainable
        weight made them.

        Where nothing trainable lies below an activation, its gradient is cut there: the
        result is the same (zero gradient either way), but TensorFlow's tape then builds no
        backward pass for the LSTM loops, most of a first ``fit``'s tracing when ELMo is frozen
        (docs/performance.md, "Fine-tuning").
        """
        mask = _sequence_mask(lengths + 2, ops.shape(token_embeddings)[1])
        if initial_state is not None:
            initial_state = tuple(ops.cast(s, self.compute_dtype) for s in initial_state)
        if embeddings_frozen:
            token_embeddings = ops.stop_gradient(token_embeddings)
        lstm_outputs, state = self.bilstm(token_embeddings, mask, initial_state=initial_state)
        if embeddings_frozen and initial_state is None and not self.bilstm.trainable_weights:
            lstm_outputs = [ops.stop_gradient(x) for x in lstm_outputs]
        activations = [ops.concatenate([token_embeddings, token_embeddings], axis=-1)]
        activations += lstm_outputs
        return {
            "activations": activations,
            "mask": mask,
            "token_embeddings": token_embeddings,
            "state": LSTMState(*state),
        }

    def __call__(self, inputs, *args, **kwargs):
        # Ids given as host values (NumPy, nested lists) are checked as given: Keras converts
        # them to the backend's tensors before call(), and JAX narrows int64 to int32 there.
        ids = inputs.get("char_ids") if isinstance(inputs, dict) else inputs
        host = host_char_ids(ids)
        if is_host_array(host):
            check_char_ids(host, self.config)
            inputs = {**inputs, "char_ids": host} if isinstance(inputs, dict) else host
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=None):
        if training is None:
            training = backend.default_training(self)
        backend.check_weight_dtypes(self)
        initial_state = None
        if isinstance(inputs, dict):
            initial_state = inputs.get("initial_state")
            inputs = inputs["char_ids"]
        # A direct call: say which id is wrong (in a graph, the lookup refuses it).
        if backend.is_concrete(inputs):
            check_char_ids(ops.convert_to_numpy(inputs), self.config)
        else:
            check_char_ids_shape(getattr(inputs, "shape", None), self.config)
        with backend.weights_device(self):
            framed, mask, lengths = self.frame(inputs)
            token_embeddings = self.encode_tokens(framed, mask)
            return self._contextualize(
                token_embeddings, lengths, initial_state, training, self._encoder_frozen()
            )

    def contextualize(self, token_embeddings, lengths, initial_state=None, training=False):
        """The outputs of :meth:`call` from framed context-free token vectors.

        Args:
            token_embeddings: ``(B, T + 2, P)``: ``<S>`` at 0, the tokens, ``</S>`` at
                ``length + 1``, zeros after (as :meth:`frame` and :meth:`encode_tokens` make).
            lengths: ``(B,)`` int32, real tokens per row.
            initial_state: optional ``LSTMState``.
        """
        return self._contextualize(token_embeddings, lengths, initial_state, training, False)

    def _contextualize(self, token_embeddings, lengths, initial_state, training, embeddings_frozen):
        lengths = ops.convert_to_tensor(lengths, "int32")
        # Called directly (the embed path), not through Keras's autocasting __call__.
        token_embeddings = ops.cast(token_embeddings, self.compute_dtype)
        bilm = self._bilm_from_embeddings(
            token_embeddings, lengths, initial_state, embeddings_frozen
        )
        max_len = ops.shape(token_embeddings)[1] - 2
        token_mask = _sequence_mask(lengths, max_len)  # (B, T)
        keep = ops.cast(token_mask, self.compute_dtype)[:, :, None]

        def strip(x):  # drop <S> and </S>; </S> of a shorter row lands on a masked position
            return x[:, 1 : max_len + 1] * keep

        layers = [strip(a) for a in bilm["activations"]]  # token layer, then each LSTM layer
        mixed = [
            self.dropout(mix(layers, token_mask=token_mask), training=training) * keep
            for mix in self.scalar_mixes
        ]
        count = ops.maximum(ops.cast(lengths, self.compute_dtype), 1.0)[:, None]
        default = ops.sum(mixed[0], axis=1) / count
        values = [strip(bilm["token_embeddings"]), *layers[1:], *mixed, default, lengths]
        keys = output_keys(self.config.n_lstm_layers, self.num_output_representations)
        outputs = dict(zip(keys, values, strict=True))
        if initial_state is not None:
            outputs["state"] = bilm["state"]
        return outputs

    # ------------------------------------------------------------------ host side

    def batch_to_ids(self, sentences, max_length=None):
        """The id rows this model takes for tokenised ``sentences``, ``(B, T,
        config.id_width)`` int32, zero at padded positions: ``elmo_tf.batch_to_ids`` for
        bilm-tf's UTF-8 bytes, the model's own code-point table and word vocabulary for a
        model converted from ELMoForManyLangs (``self.token_mapper``)."""
        return self.token_mapper.batch_to_ids(sentences, max_length)

    def output_shapes(self, batch_size=None, length=None):
        """``{key: shape}`` of :meth:`call`'s outputs (without ``state``), in key order.

        ``batch_size`` and ``length`` (T) fill the batch and position axes; ``None`` leaves
        them unknown.
        """
        return output_shapes(self.config, batch_size, length, self.num_output_representations)

    def zero_state(self, batch_size):
        """An all-zero ``LSTMState`` for ``batch_size`` rows, as numpy arrays."""
        c = self.config
        return LSTMState(
            np.zeros([batch_size, c.n_lstm_layers, 2, c.lstm_dim], np.float32),
            np.zeros([batch_size, c.n_lstm_layers, 2, c.projection_dim], np.float32),
        )

    @property
    def embedder(self):
        """The host-side runner behind :meth:`embed` (compiled once per model)."""
        if self._embedder is None:
            self._embedder = Embedder(self)
        return self._embedder

    @property
    def token_cache(self):
        """The model's token-vector cache (``elmo_tf.models.token_cache.TokenVectorCache``):
        ``hits``, ``misses``, ``len()``, ``nbytes``, ``clear()``,
        ``resize(max_tokens, max_bytes)``."""
        return self.embedder.token_cache

    def embed_batches(
        self,
        sentences,
        batch_size=DEFAULT_BATCH_SIZE,
        initial_state=None,
        token_cache_size=None,
        max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS,
    ):
        """Embeds sentences batch by batch, in groups of similar length (longest first).

        Yields ``(indices, outputs)`` per batch: the positions of the batch's sentences in
        ``sentences`` and the model's outputs for them as numpy arrays (padded to the batch's
        longest sentence). A batch holds at most ``batch_size`` sentences and at most
        ``max_batch_tokens`` padded tokens (its rows times its longest sentence; default
        ``DEFAULT_MAX_BATCH_TOKENS``, 128 x 48), so batches of long sentences have fewer rows
        and a batch's memory stays bounded; a sentence longer than the budget runs alone;
        ``None`` or 0: no budget. With ``initial_state`` (an ``LSTMState`` with one row per
        sentence) each batch starts from its rows' states and ``outputs["state"]`` holds them
        after each sentence. The context-free vector of each distinct token is computed once
        and kept in the model's ``token_cache`` across calls (bounded, thread-safe, emptied
        when the character encoder's weights change; ``elmo_tf.models.token_cache``);
        ``token_cache_size=N`` uses a private cache of N tokens for this call instead, 0 none.
        Compiled once; new batch shapes do not re-trace.
        """
        return self.embedder.batches(
            sentences, batch_size, initial_state, token_cache_size, max_batch_tokens
        )

    def embed(
        self,
        sentences,
        batch_size=DEFAULT_BATCH_SIZE,
        initial_state=None,
        return_state=False,
        token_cache_size=None,
        max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS,
    ):
        """Embeds tokenised sentences; returns numpy arrays in the order given.

        Args:
            sentences: a list of sentences, each a list of string tokens.
            batch_size: sentences per model call (at most).
            initial_state: optional ``LSTMState`` with one row per sentence (bilm-tf's
                stateful use: pass the ``state`` returned for the previous batch).
            return_state: also return each row's ``LSTMState`` after its last token.
            token_cache_size: see :meth:`embed_batches`.
            max_batch_tokens: padded tokens per model call (rows x longest sentence) at
                most, so long sentences run in smaller batches; see :meth:`embed_batches`.

        Returns:
            A dict with the keys and meaning of :meth:`call`'s outputs (the table in
            ``elmo_tf.models.outputs``; arrays padded to the longest sentence,
            shapes as :meth:`output_shapes` gives them), or ``(outputs, state)`` with
            ``return_state``.
        """
        return self.embedder.embed(
            sentences, batch_size, initial_state, return_state, token_cache_size, max_batch_tokens
        )

    @property
    def vocabulary(self):
        """A code-point model's token tables (``CodepointVocabulary``), or ``None``."""
        return getattr(self.token_mapper, "vocabulary", None)

    def save_assets(self, dir_path):
        """Keras's hook for a ``.keras`` file: a code-point model's token tables (its weight
        file's ``vocabulary/*`` datasets) go beside its weights."""
        token_mappers.save_tables(self.token_mapper, dir_path)

    def load_assets(self, dir_path):
        """Keras's hook: the tables ``save_assets`` wrote, checked as a weight file's are."""
        self.token_mapper = token_mappers.load_tables(self.config, dir_path, self.token_mapper)

    def get_config(self):
        config = super().get_config()
        config.update(
            config=self.config.to_options(),
            num_output_representations=self.num_output_representations,
            do_layer_norm=self.do_layer_norm,
            l2_coefficient=self.l2_coefficient,
            dropout=self.dropout_rate,
            dedupe_tokens=self.dedupe_tokens,
        )
        return config


def set_fine_tuning(model, fine_tune):
    """Makes ``model``'s weights trainable as ``fine_tune`` says (``FINE_TUNE_CHOICES``)."""
    check_fine_tune(fine_tune)
    model.trainable = fine_tune != "none"
    model.character_encoder.trainable = fine_tune == "all"
    model.bilstm.trainable = fine_tune == "all"


def fine_tuned_weights(model, fine_tune):
    """The weights ``fine_tune`` trains, in ``model.weights`` order."""
    check_fine_tune(fine_tune)
    if fine_tune == "all":
        return list(model.weights)
    if fine_tune == "mix":
        return [w for mix in model.scalar_mixes for w in mix.weights]
    return []


def _sequence_mask(lengths, maxlen):
    """``(B, maxlen)`` bool: ``True`` for each row's first ``lengths[b]`` positions."""
    return ops.arange(maxlen, dtype="int32")[None, :] < ops.cast(lengths, "int32")[:, None]


def _encode_real_tokens(model, char_ids, mask):
    """``ELMo.encode_tokens`` on TensorFlow: the CNN on the real tokens only, once per distinct
    token with ``dedupe_tokens`` (shapes that depend on the values: TensorFlow only)."""
    import tensorflow as tf  # lazy: the TensorFlow backend's path

    positions = tf.where(mask)  # (N, 2)
    tokens = tf.gather_nd(char_ids, positions)  # (N, 50)
    if model.dedupe_tokens:
        unique, index = tf.raw_ops.UniqueV2(x=tokens, axis=[0])
        vectors = tf.gather(model.character_encoder(unique), index)
    else:
        vectors = model.character_encoder(tokens)
    shape = tf.concat([tf.shape(mask, out_type=tf.int64), [model.config.projection_dim]], 0)
    return tf.scatter_nd(positions, vectors, shape)


def _encode_real_tokens_torch(model, char_ids, mask):
    """``_encode_real_tokens`` in eager PyTorch (shapes that depend on the values)."""
    import torch  # lazy: the PyTorch backend's path

    mask = torch.as_tensor(mask, dtype=torch.bool)
    tokens = char_ids[mask]  # (N, 50)
    if model.dedupe_tokens and tokens.shape[0]:
        unique, index = torch.unique(tokens, dim=0, return_inverse=True)
        vectors = model.character_encoder(unique)[index]
    else:
        vectors = model.character_encoder(tokens)
    embeddings = vectors.new_zeros(*mask.shape, model.config.projection_dim)
    embeddings[mask] = vectors
    return embeddings
