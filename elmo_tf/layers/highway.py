"""Highway: one gated highway layer."""

import keras

from elmo_tf.layers.finite_weights import FiniteWeights


@keras.saving.register_keras_serializable(package="elmo_tf")
class Highway(FiniteWeights, keras.layers.Layer):
    """One highway layer in bilm-tf's formulation.

    ``c = sigmoid(x W_carry + b_carry)``, ``t = relu(x W_transform + b_transform)``,
    ``y = c * t + (1 - c) * x``. Note that bilm-tf calls the gate that multiplies the
    *transformed* input the "carry" gate; AllenNLP's ``Highway`` uses the opposite naming and
    stores the two projections stacked, so its weights need the halves swapped on import.

    Call arguments:
        inputs: float tensor ``(..., F)``.

    Returns:
        float tensor ``(..., F)``.

    Reference: Srivastava et al. 2015, "Highway Networks".
    """

    def build(self, input_shape):
        dim = input_shape[-1]
        self.carry_kernel = self.add_weight(
            name="carry_kernel", shape=(dim, dim), initializer="glorot_uniform"
        )
        # bilm-tf initialises the carry bias to -2 so that early training mostly passes x on.
        self.carry_bias = self.add_weight(
            name="carry_bias", shape=(dim,), initializer=keras.initializers.Constant(-2.0)
        )
        self.transform_kernel = self.add_weight(
            name="transform_kernel", shape=(dim, dim), initializer="glorot_uniform"
        )
        self.transform_bias = self.add_weight(
            name="transform_bias", shape=(dim,), initializer="zeros"
        )

    def call(self, inputs):
        carry = keras.ops.sigmoid(keras.ops.matmul(inputs, self.carry_kernel) + self.carry_bias)
        transform = keras.ops.relu(
            keras.ops.matmul(inputs, self.transform_kernel) + self.transform_bias
        )
        return carry * transform + (1.0 - carry) * inputs

    def compute_output_shape(self, input_shape):
        return input_shape
