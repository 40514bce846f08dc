"""LSTMCellWithProjection: bilm-tf's LSTM cell, as a Keras RNN cell."""

import typing

import keras

from elmo_tf.layers.finite_weights import FiniteWeights


class LoopWeights(typing.NamedTuple):
    """A cell's weights as a loop over time reads them (``LSTMCellWithProjection.loop_weights``):
    each a tensor, or four (one per gate) in the per-gate layout."""

    input_kernel: typing.Any
    bias: typing.Any
    recurrent_kernel: typing.Any
    projection_kernel: typing.Any


@keras.saving.register_keras_serializable(package="elmo_tf")
class LSTMCellWithProjection(FiniteWeights, keras.layers.Layer):
    """An LSTM cell whose output is projected to a smaller size, with clipping.

    With ``z = [x, h_prev] W + b`` split into gates ``i, j, f, o`` (bilm-tf / TF1
    ``LSTMCell`` order; ``j`` is the new-memory input):

    - ``c = sigmoid(f + forget_bias) * c_prev + sigmoid(i) * tanh(j)``, clipped to
      ``±cell_clip``;
    - ``h = (sigmoid(o) * tanh(c)) W_proj``, clipped to ``±proj_clip``.

    The state is ``[c, h]`` (sizes ``units`` and ``projection_units``); the output is ``h``.
    The forget bias of 1.0 is added at run time and is *not* part of the stored bias, exactly
    as in TF1's ``LSTMCell`` that wrote the official weights.

    The cell works inside ``keras.layers.RNN``. ``BidirectionalLSTMStack`` instead calls
    :meth:`project_inputs` once for all time steps and :meth:`step` in its own loop, which
    computes the same thing with one large input matmul instead of one per step.

    Args:
        units: size D of the cell state.
        projection_units: size P of the output and hidden state.
        cell_clip: clip value for ``c`` (``None``: no clip).
        proj_clip: clip value for ``h`` (``None``: no clip).
        forget_bias: added to the forget gate pre-activation.

    Call arguments:
        inputs: float tensor ``(B, input_dim)``.
        states: ``[c (B, D), h (B, P)]``.

    Returns:
        ``(h, [c, h])``.

    Example:
    >>> rnn = keras.layers.RNN(LSTMCellWithProjection(32, 16), return_sequences=True)
    >>> rnn(np.zeros([2, 5, 16], "float32")).shape
    TensorShape([2, 5, 16])

    Reference: Sak et al. 2014, "Long Short-Term Memory Based Recurrent Neural Network
    Architectures for Large Vocabulary Speech Recognition"; Peters et al. 2018.
    """

    def __init__(
        self,
        units,
        projection_units,
        cell_clip=None,
        proj_clip=None,
        forget_bias=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = units
        self.projection_units = projection_units
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.forget_bias = forget_bias
        self.state_size = [units, projection_units]
        self.output_size = projection_units

    def build(self, input_shape):
        self.input_dim = input_shape[-1]
        # One kernel over [x ; h_prev], as stored in the official files (W_0).
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.input_dim + self.projection_units, 4 * self.units),
            initializer="glorot_uniform",
        )
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,), initializer="zeros")
        self.projection_kernel = self.add_weight(
            name="projection_kernel",
            shape=(self.units, self.projection_units),
            initializer="glorot_uniform",
        )

    @property
    def input_kernel(self):
        return self.kernel[: self.input_dim]

    @property
    def recurrent_kernel(self):
        return self.kernel[self.input_dim :]

    def loop_weights(self, per_gate=False):
        """The weights a loop over time reads, each read once: ``LoopWeights`` of the input
        kernel and bias (four ``(input_dim, D)`` and ``(D,)`` blocks with ``per_gate``, else
        ``(input_dim, 4D)`` and ``(4D,)``), the recurrent kernel (four ``(P, D)`` or one
        ``(P, 4D)``) and the projection ``(D, P)``.

        A loop reads them here, before its first step, and passes them to
        :meth:`project_inputs` and :meth:`step`: read inside the loop, each step would slice
        the stored kernel again and, under a mixed policy, cast every weight it reads to the
        compute dtype (the projection alone is 8 MB a step in the published shape).
        """
        if per_gate:
            return LoopWeights(
                self.gate_input_kernels(),
                self.gate_biases(),
                self.gate_recurrent_kernels(),
                self.projection_kernel.value,
            )
        return LoopWeights(
            self.input_kernel, self.bias.value, self.recurrent_kernel, self.projection_kernel.value
        )

    def project_inputs(self, inputs, per_gate=False, weights=None):
        """``x W_x + b`` for any leading shape: the part of ``z`` that needs no recurrence;
        with ``per_gate``, as four ``(..., D)`` parts, one per gate (``lstm_layout``).
        ``weights``: this cell's ``loop_weights(per_gate)``, read once by the caller."""
        if weights is None:
            weights = self.loop_weights(per_gate)
        if per_gate:
            return [
                keras.ops.matmul(inputs, kernel) + bias
                for kernel, bias in zip(weights.input_kernel, weights.bias)
            ]
        return keras.ops.matmul(inputs, weights.input_kernel) + weights.bias

    def gate_input_kernels(self):
        """The input kernel's four gate blocks ``(input_dim, D)``: i, j, f, o."""
        d = self.units
        return [self.kernel[: self.input_dim, g * d : (g + 1) * d] for g in range(4)]

    def gate_recurrent_kernels(self):
        """The recurrent kernel's four gate blocks ``(P, D)``: i, j, f, o."""
        d = self.units
        return [self.kernel[self.input_dim :, g * d : (g + 1) * d] for g in range(4)]

    def gate_biases(self):
        d = self.units
        return [self.bias[g * d : (g + 1) * d] for g in range(4)]

    def step(self, projected_inputs, states, weights=None):
        """One time step from already projected inputs.

        ``projected_inputs`` is ``(B, 4D)`` (the fused layout) or four ``(B, D)`` (per gate,
        ``project_inputs(..., per_gate=True)``); ``weights`` is this cell's
        ``loop_weights()`` in the same layout, read once before the loop (``None``: read
        here). Both layouts compute every gate's ``x W_x + b + h W_h`` with the same
        additions in the same order; they differ only in how the matmul's columns are
        blocked, so in float32 round-off.
        """
        c_prev, h_prev = states
        per_gate = isinstance(projected_inputs, list | tuple)
        if weights is None:
            weights = self.loop_weights(per_gate)
        if per_gate:
            i, j, f, o = (
                x + keras.ops.matmul(h_prev, kernel)
                for x, kernel in zip(projected_inputs, weights.recurrent_kernel)
            )
        else:
            z = projected_inputs + keras.ops.matmul(h_prev, weights.recurrent_kernel)
            i, j, f, o = keras.ops.split(z, 4, axis=-1)
        c = keras.ops.sigmoid(f + self.forget_bias) * c_prev + keras.ops.sigmoid(
            i
        ) * keras.ops.tanh(j)
        if self.cell_clip is not None:
            c = keras.ops.clip(c, -self.cell_clip, self.cell_clip)
        h = keras.ops.matmul(keras.ops.sigmoid(o) * keras.ops.tanh(c), weights.projection_kernel)
        if self.proj_clip is not None:
            h = keras.ops.clip(h, -self.proj_clip, self.proj_clip)
        return h, [c, h]

    def call(self, inputs, states, training=None):
        return self.step(self.project_inputs(inputs), states)

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            projection_units=self.projection_units,
            cell_clip=self.cell_clip,
            proj_clip=self.proj_clip,
            forget_bias=self.forget_bias,
        )
        return config
