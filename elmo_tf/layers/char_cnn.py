"""CharCNN: the Conv1D filter bank over a token's characters, max-pooled over positions."""

import keras

from elmo_tf import backend
from elmo_tf.layers.finite_weights import FiniteWeights


@keras.saving.register_keras_serializable(package="elmo_tf")
class CharCNN(FiniteWeights, keras.layers.Layer):
    """A bank of 1-D convolutions, each max-pooled over character positions.

    For filter bank ``k`` of width ``w_k``: ``y_k = act(max_t(conv_valid(x, W_k)[t]) + b_k)``
    (bilm-tf adds the bias before the max; a per-channel constant commutes with it). The
    outputs of all banks are concatenated.

    Args:
        filters: ``((width, num_filters), ...)``.
        activation: ``"relu"`` or ``"tanh"``.

    Call arguments:
        inputs: float tensor ``(N, num_chars, E)`` of character embeddings.

    Returns:
        float tensor ``(N, F)`` with ``F = sum(num_filters)``.

    Reference: Kim et al. 2016, "Character-Aware Neural Language Models"; Peters et al. 2018.
    """

    def __init__(self, filters, activation="relu", **kwargs):
        super().__init__(**kwargs)
        self.filters = tuple(tuple(int(v) for v in f) for f in filters)
        self.activation = activation
        self._activation_fn = keras.activations.get(activation)

    def build(self, input_shape):
        embedding_dim = input_shape[-1]
        self.kernels = []
        self.biases = []
        for i, (width, num) in enumerate(self.filters):
            self.kernels.append(
                self.add_weight(
                    name=f"kernel_{i}",
                    shape=(width, embedding_dim, num),
                    initializer="glorot_uniform",
                )
            )
            self.biases.append(self.add_weight(name=f"bias_{i}", shape=(num,), initializer="zeros"))

    def call(self, inputs):
        # TF's CPU convolution returns a wrongly shaped result for an empty batch; one spare
        # zero row keeps the batch non-empty and is dropped at the end.
        num_tokens = keras.ops.shape(inputs)[0]
        inputs = keras.ops.pad(inputs, [[0, 1], [0, 0], [0, 0]])
        convolve = _convolve_as_matmul if backend.name() == "torch" else _convolve
        pooled = []
        for kernel, bias in zip(self.kernels, self.biases):
            conv = convolve(inputs, kernel)  # (N, L-w+1, n)
            pooled.append(keras.ops.max(conv, axis=1) + bias)
        return self._activation_fn(keras.ops.concatenate(pooled, axis=-1))[:num_tokens]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], sum(n for _, n in self.filters))

    def get_config(self):
        config = super().get_config()
        config.update(filters=[list(f) for f in self.filters], activation=self.activation)
        return config


def _convolve(inputs, kernel):
    """The valid convolution of ``inputs`` ``(N, L, E)`` with ``kernel`` ``(w, E, n)``."""
    return keras.ops.conv(inputs, kernel, strides=1, padding="valid")


def _convolve_as_matmul(inputs, kernel):
    """``_convolve`` as one matmul over the ``w`` shifted copies of ``inputs`` side by side
    (``(N, L-w+1, w*E)``): the same sums, on PyTorch's CPU 1.5x faster than its
    convolution, whose channels-last layout costs a transpose of the large output."""
    width, channels, count = kernel.shape
    positions = keras.ops.shape(inputs)[1] - width + 1
    windows = keras.ops.concatenate(
        [inputs[:, i : i + positions] for i in range(width)], axis=-1
    )  # column i * E + e holds character i + t's channel e, as the kernel's rows
    return keras.ops.matmul(windows, keras.ops.reshape(kernel, (width * channels, count)))
