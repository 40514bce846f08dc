"""ScalarMix: ELMo's learned, softmax-normalised weighted sum of layers."""

import keras

from elmo_tf.layers.finite_weights import FiniteWeights


@keras.saving.register_keras_serializable(package="elmo_tf")
class ScalarMix(FiniteWeights, keras.layers.Layer):
    """``gamma * sum_k softmax(w)_k * h_k`` (Peters et al. 2018, eq. 1).

    With ``do_layer_norm`` each layer is first normalised with the mean and variance of *all*
    its unmasked elements (one scalar pair per sentence batch, as bilm-tf's ``weight_layers``
    and AllenNLP's ``ScalarMix`` do), not per position. The normalisation runs in float32 under
    any dtype policy; the mix runs in the compute dtype.

    Args:
        num_layers: number of tensors mixed.
        do_layer_norm: normalise each layer first (needs ``token_mask``).
        l2_coefficient: λ of the paper's optional ``λ ||w||²`` penalty on the mix weights,
            added to the layer's ``losses``; 0 disables it.
        initial_weights: initial (pre-softmax) weights, zeros by default (a plain average).
        initial_gamma: initial ``gamma``.
        trainable_weights_and_gamma: whether ``w`` and ``gamma`` are trained.

    Call arguments:
        inputs: a list of ``num_layers`` float tensors ``(B, T, dim)``.
        token_mask: optional bool tensor ``(B, T)``, needed for layer normalisation.

    Returns:
        float tensor ``(B, T, dim)``.
    """

    def __init__(
        self,
        num_layers,
        do_layer_norm=False,
        l2_coefficient=0.0,
        initial_weights=None,
        initial_gamma=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.l2_coefficient = l2_coefficient
        self.initial_weights = list(initial_weights) if initial_weights is not None else None
        self.initial_gamma = initial_gamma
        if self.initial_weights is not None and len(self.initial_weights) != num_layers:
            raise ValueError(
                f"initial_weights has {len(self.initial_weights)} values for {num_layers} layers"
            )

    def build(self, input_shape):
        initial = self.initial_weights or [0.0] * self.num_layers
        self.scalar_weights = self.add_weight(
            name="scalar_weights",
            shape=(self.num_layers,),
            initializer=keras.initializers.Constant(initial),
            regularizer=keras.regularizers.L2(self.l2_coefficient) if self.l2_coefficient else None,
        )
        self.gamma = self.add_weight(
            name="gamma", shape=(), initializer=keras.initializers.Constant(self.initial_gamma)
        )

    def call(self, inputs, token_mask=None):
        if len(inputs) != self.num_layers:
            raise ValueError(f"ScalarMix expects {self.num_layers} layers, got {len(inputs)}")
        weights = keras.ops.softmax(self.scalar_weights)
        if self.do_layer_norm:
            if token_mask is None:
                raise ValueError("ScalarMix with do_layer_norm=True needs a token_mask")
            # The moments are taken in float32 whatever the compute dtype (as Keras's
            # LayerNormalization does): a float16 sum over B * T * dim elements overflows
            # (max 65504), and the epsilon 1e-12 underflows to 0 in float16 (smallest
            # subnormal ~6e-8), so an all-masked batch would give 0 / 0.
            mask = keras.ops.cast(token_mask, "float32")[..., None]  # (B, T, 1)
            count = keras.ops.maximum(
                keras.ops.sum(mask) * keras.ops.cast(keras.ops.shape(inputs[0])[-1], "float32"),
                1.0,
            )
            inputs = [
                keras.ops.cast(_layer_norm(keras.ops.cast(x, "float32"), mask, count), x.dtype)
                for x in inputs
            ]
        mixed = weights[0] * inputs[0]
        for k in range(1, self.num_layers):
            mixed = mixed + weights[k] * inputs[k]
        return self.gamma * mixed

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def get_config(self):
        config = super().get_config()
        config.update(
            num_layers=self.num_layers,
            do_layer_norm=self.do_layer_norm,
            l2_coefficient=self.l2_coefficient,
            initial_weights=self.initial_weights,
            initial_gamma=self.initial_gamma,
        )
        return config


def _layer_norm(x, mask, count):
    # Moments over every unmasked element of the whole batch (bilm-tf ``_do_ln``).
    masked = x * mask
    mean = keras.ops.sum(masked) / count
    variance = keras.ops.sum(keras.ops.square((masked - mean) * mask)) / count
    return (x - mean) / keras.ops.sqrt(variance + 1e-12)
