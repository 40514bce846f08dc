"""BidirectionalLanguageModel: ELMo's biLM with its softmax, for training and perplexity."""

import keras

from elmo_tf import backend

backend.require_tensorflow("biLM training")  # one line, before TensorFlow

import tensorflow as tf

from elmo_tf.config import ElmoConfig
from elmo_tf.layers.packed_lstm import stateless_dropout
from elmo_tf.models.elmo import ELMo, LSTMState
from elmo_tf.tokens import characters
from elmo_tf.training.log_uniform_sampler import LogUniformSampler

# The dropout site of the top outputs, folded into the dropout seed (the stack's layer inputs
# use sites 0 .. 2L - 1).
_TOP_DROPOUT_SITE = 1000


@keras.saving.register_keras_serializable(package="elmo_tf")
class BidirectionalLanguageModel(keras.Model):
    """The bidirectional language model of Peters et al. (2018), as bilm-tf trains it.

    An ``ELMo`` (character CNN + forward and backward LSTM stacks) and one softmax over the
    vocabulary, ``W`` ``(V, P)`` and ``b`` ``(V,)``, shared by both directions. The forward LM
    predicts token ``t + 1`` from the forward top layer at ``t``; the backward LM predicts
    token ``t - 1`` from the backward top layer at ``t``; the loss is the mean of the two
    directions' mean cross-entropies.

    Each direction reads its own stream (bilm-tf feeds the backward LM a reversed copy of the
    text), left to right in reading order: the forward stream holds ``<S> w1 .. wn`` for a
    sentence (targets ``w1 .. wn </S>``), the backward stream ``</S> wn .. w1`` (targets
    ``wn .. w1 <S>``). Long streams are cut into windows and each direction's LSTM state is
    carried from one window to the next (truncated back-propagation), which the stateless
    ``BidirectionalLSTMStack.call`` cannot do for the backward direction (it reverses its one
    input inside each window); :meth:`run_lstm` therefore hands the stack both streams as they
    are (``BidirectionalLSTMStack.run_streams``, the loop ``call`` runs too).

    Dropout (bilm-tf's ``DropoutWrapper(input_keep_prob)`` and its dropout before the
    softmax) is applied to the input of every LSTM layer, so to the token embeddings and
    between layers, before the skip connection adds that input (as bilm-tf's
    ``DropoutWrapper(ResidualWrapper(cell))``), and to the top outputs. It is stateless:
    masks are a function of the seed passed in, which makes resumed training exact.

    Args:
        config: an ``ElmoConfig`` (or its options dict).
        vocab_size: V, the softmax vocabulary size.
        dropout: dropout rate during training (bilm-tf: 0.1).
        num_sampled: candidates of the sampled softmax (capped at V).
        reset_state_per_sentence: start every sentence from the zero state (the state is
            zeroed where a stream reads ``<S>``/``</S>``), as ``ELMo.embed`` and the served
            signatures run each sentence; ``False`` (bilm-tf's): carry it across sentences.

    Call arguments:
        inputs: dict with ``forward_char_ids`` and ``backward_char_ids`` ``(B, T, 50)`` int32,
            and optionally ``mask`` ``(B, T)`` bool (a prefix of each row; default all true).
        initial_state: optional ``LSTMState`` ``(B, L, 2, D)`` / ``(B, L, 2, P)``.
        training: enables dropout.
        seed: shape-``[2]`` int tensor for the dropout masks (needed when training).

    Returns:
        A dict: ``forward`` and ``backward`` ``(B, T, P)``, the top-layer outputs of each
        stream (zero where masked), and ``state``, an ``LSTMState`` after each row's last
        unmasked position (the state to carry into the next window).

    Example:
    >>> lm = BidirectionalLanguageModel(elmo_tf.presets.preset("small"), vocab_size=1000)
    >>> ids = elmo_tf.batch_to_ids([["<S>", "Hello"]])
    >>> out = lm({"forward_char_ids": ids, "backward_char_ids": ids})
    >>> out["forward"].shape
    TensorShape([1, 2, 128])

    Reference: Peters et al. 2018, "Deep contextualized word representations"; Jozefowicz et
    al. 2016, "Exploring the Limits of Language Modeling" (sampled softmax, char CNN).
    """

    def __init__(
        self,
        config,
        vocab_size,
        dropout=0.1,
        num_sampled=8192,
        reset_state_per_sentence=False,
        **kwargs,
    ):
        # A fixed name: the softmax's variable paths (checkpoint keys) must not depend on
        # how many models the process has built.
        kwargs.setdefault("name", "bilm")
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ElmoConfig.from_options(config)
        self.config = config
        self.vocab_size = int(vocab_size)
        self.dropout_rate = float(dropout)
        self.num_sampled = int(num_sampled)
        self.reset_state_per_sentence = bool(reset_state_per_sentence)
        self.elmo = ELMo(config, name="elmo")
        self.sampler = LogUniformSampler(self.vocab_size, self.num_sampled)
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        p = self.config.projection_dim
        # bilm-tf's softmax initialiser: N(0, 1 / sqrt(P)).
        self.softmax_weights = self.add_weight(
            name="softmax_weights",
            shape=(self.vocab_size, p),
            initializer=keras.initializers.RandomNormal(stddev=1.0 / p**0.5),
        )
        self.softmax_bias = self.add_weight(
            name="softmax_bias", shape=(self.vocab_size,), initializer="zeros"
        )
        self.built = True

    @property
    def lm_variables(self):
        """The variables the LM objective trains (the ELMo mix weights are not among them)."""
        return (
            list(self.elmo.character_encoder.trainable_variables)
            + list(self.elmo.bilstm.trainable_variables)
            + [self.softmax_weights, self.softmax_bias]
        )

    def zero_state(self, batch_size):
        """An all-zero ``LSTMState`` of tensors for ``batch_size`` rows."""
        return LSTMState(*self.elmo.bilstm.zero_state(batch_size))

    # ------------------------------------------------------------------ graph

    def call(self, inputs, initial_state=None, training=False, seed=None):
        forward_ids = tf.convert_to_tensor(inputs["forward_char_ids"], tf.int32)
        backward_ids = tf.convert_to_tensor(inputs["backward_char_ids"], tf.int32)
        mask = inputs.get("mask")
        if mask is None:
            mask = tf.ones(tf.shape(forward_ids)[:2], tf.bool)
        mask = tf.cast(mask, tf.bool)
        # One pass of the character CNN over both streams: each distinct token once.
        embeddings = self.elmo.encode_tokens(
            tf.concat([forward_ids, backward_ids], 0), tf.concat([mask, mask], 0)
        )
        forward, backward = tf.split(embeddings, 2, axis=0)  # (B, T, P) each
        if initial_state is None:
            initial_state = self.zero_state(tf.shape(forward_ids)[0])
        resets = None
        if self.reset_state_per_sentence:
            # Sentences start at the same positions of both streams (<S> forward, </S>
            # backward: see elmo_tf.training.data.frame_sentences).
            resets = tf.reduce_all(forward_ids == characters.BOS_CHAR_IDS, axis=-1)
        return self.run_lstm(forward, backward, mask, initial_state, training, seed, resets)

    def run_lstm(
        self, forward, backward, mask, initial_state, training=False, seed=None, resets=None
    ):
        """Both LSTM stacks over their own streams; returns the dict of :meth:`call`.

        ``resets``: optional bool ``(B, T)``, where the state restarts from zero."""
        rate = self.dropout_rate if training else 0.0
        if rate and seed is None:
            raise ValueError("training with dropout needs a seed")
        layers, state = self.elmo.bilstm.run_streams(
            forward, backward, mask, initial_state, dropout=rate, seed=seed, resets=resets
        )
        x = layers[-1]
        if rate:
            x = [stateless_dropout(v, rate, seed, _TOP_DROPOUT_SITE + d) for d, v in enumerate(x)]
        return {"forward": x[0], "backward": x[1], "state": LSTMState(*state)}

    def sampled_loss(self, outputs, targets, mask, seed):
        """Mean sampled-softmax cross-entropy over the unmasked positions.

        ``outputs`` ``(B, T, P)``, ``targets`` ``(B, T)`` vocabulary ids, ``mask`` ``(B, T)``,
        ``seed`` shape ``[2]`` (draws the candidates, shared by every position).
        """
        x, labels, weights = _flatten(outputs, targets, mask)
        losses = tf.nn.sampled_softmax_loss(
            weights=self.softmax_weights,
            biases=self.softmax_bias,
            labels=labels,
            inputs=x,
            num_sampled=self.sampler.num_sampled,
            num_classes=self.vocab_size,
            sampled_values=self.sampler.sample(labels, seed),
            remove_accidental_hits=True,
        )
        return tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)

    def full_loss(self, outputs, targets, mask):
        """``(sum of full-softmax cross-entropies, number of positions)`` over the mask."""
        x, labels, weights = _flatten(outputs, targets, mask)
        logits = tf.matmul(x, self.softmax_weights, transpose_b=True) + self.softmax_bias
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 0], logits)
        return tf.reduce_sum(losses * weights), tf.reduce_sum(weights)

    def get_config(self):
        config = super().get_config()
        config.update(
            config=self.config.to_options(),
            vocab_size=self.vocab_size,
            dropout=self.dropout_rate,
            num_sampled=self.num_sampled,
            reset_state_per_sentence=self.reset_state_per_sentence,
        )
        return config


def _flatten(outputs, targets, mask):
    """``(N, P)`` inputs, ``(N, 1)`` int64 labels and ``(N,)`` float weights."""
    width = tf.shape(outputs)[-1]
    x = tf.reshape(outputs, [-1, width])
    labels = tf.reshape(tf.cast(targets, tf.int64), [-1, 1])
    weights = tf.reshape(tf.cast(mask, x.dtype), [-1])
    return x, labels, weights
