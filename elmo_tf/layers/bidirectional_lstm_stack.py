"""BidirectionalLSTMStack: ELMo's forward and backward LSTM language-model stacks."""

import importlib

import keras
from keras import ops

from elmo_tf import backend
from elmo_tf.layers.lstm_cell_with_projection import LSTMCellWithProjection


def _path():
    """The module of this backend's path: ``packed_lstm`` (TensorFlow) or ``masked_lstm``, or
    an exporter's loop (``elmo_tf.backend.tracing_bilstm_with``)."""
    return importlib.import_module(backend.bilstm_module())


@keras.saving.register_keras_serializable(package="elmo_tf")
class BidirectionalLSTMStack(keras.layers.Layer):
    """Independent forward and backward stacks of ``LSTMCellWithProjection``.

    The forward stack reads each sentence left to right. The backward stack reads it right to
    left *within its own length* (padding stays at the end, so a sentence's vectors do not
    depend on how much padding the batch adds). From the second layer on, each layer adds its
    input to its output (skip connection); the state carried to the next step is the cell's own,
    without the skip. Layer ``l``'s output is ``concat(forward_l, backward_l)``.

    Each layer runs both directions in one loop over time, on the path of the Keras backend
    (``elmo_tf.backend.bilstm_path``): on TensorFlow a ``tf.while_loop`` over length-sorted
    rows (``packed_lstm``), elsewhere a fixed-shape masked ``keras.ops.scan``
    (``masked_lstm``); both give each row the numbers of that row alone. ``run_streams`` is
    the layer loop itself, for callers that hold the backward stream already reversed and want
    dropout between layers (the training biLM); ``call`` runs it on one input.

    Args:
        num_layers: layers per direction.
        units: LSTM cell size D.
        projection_units: output size P.
        cell_clip, proj_clip: see ``LSTMCellWithProjection``.
        use_skip_connections: add the input of layers ``>= 2`` to their output.

    Call arguments:
        inputs: float tensor ``(B, T, input_dim)``; zero at padded positions.
        mask: bool tensor ``(B, T)``, each row ``True`` for its first ``length`` positions.
        initial_state: optional ``(cell, hidden)`` with shapes ``(B, num_layers, 2, D)`` and
            ``(B, num_layers, 2, P)``; index 0 of axis 2 is the forward direction. Zeros if
            omitted.

    Returns:
        ``(outputs, final_state)``: ``outputs`` a list of ``num_layers`` tensors
        ``(B, T, 2P)``, zero at padded positions; ``final_state`` like ``initial_state``, each
        row's state after its last real position (forward) or its first (backward).
    """

    def __init__(
        self,
        num_layers,
        units,
        projection_units,
        cell_clip=None,
        proj_clip=None,
        use_skip_connections=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.units = units
        self.projection_units = projection_units
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.use_skip_connections = use_skip_connections

        def cells(direction):
            return [
                LSTMCellWithProjection(
                    units,
                    projection_units,
                    cell_clip=cell_clip,
                    proj_clip=proj_clip,
                    dtype=self.dtype_policy,
                    name=f"{direction}_{layer}",
                )
                for layer in range(num_layers)
            ]

        self.forward_cells = cells("forward")
        self.backward_cells = cells("backward")

    def build(self, input_shape):
        for layer in range(self.num_layers):
            input_dim = input_shape[-1] if layer == 0 else self.projection_units
            self.forward_cells[layer].build((None, input_dim))
            self.backward_cells[layer].build((None, input_dim))

    def zero_state(self, batch_size):
        return (
            ops.zeros([batch_size, self.num_layers, 2, self.units], self.compute_dtype),
            ops.zeros([batch_size, self.num_layers, 2, self.projection_units], self.compute_dtype),
        )

    def call(self, inputs, mask, initial_state=None):
        mask = ops.cast(mask, "bool")
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
        path = _path()

        def reverse(x):
            return path.reverse_within_lengths(x, lengths)

        layers, final_state = self.run_streams(inputs, reverse(inputs), mask, initial_state)
        outputs = [
            ops.concatenate([forward, reverse(backward)], axis=-1) for forward, backward in layers
        ]
        return outputs, final_state

    def compute_output_spec(self, inputs, mask, initial_state=None):
        # What call returns, with every static dimension the input has (each backend's own
        # shape inference loses the length on TensorFlow's while loop, keeps it on JAX's scan).
        batch, steps = inputs.shape[0], inputs.shape[1]
        dtype = self.compute_dtype
        outputs = [
            keras.KerasTensor((batch, steps, 2 * self.projection_units), dtype=dtype)
            for _ in range(self.num_layers)
        ]
        state = (
            keras.KerasTensor((batch, self.num_layers, 2, self.units), dtype=dtype),
            keras.KerasTensor((batch, self.num_layers, 2, self.projection_units), dtype=dtype),
        )
        return outputs, state

    def run_streams(
        self, forward, backward, mask, initial_state=None, dropout=0.0, seed=None, resets=None
    ):
        """Runs the forward stack over ``forward`` and the backward stack over ``backward``.

        Both streams are read left to right, each in its own (reading) order: ``call`` passes
        the backward stack its input reversed within each row's length; a caller that holds
        the backward stream already reversed (the training biLM, which carries the backward
        state from one window into the next) passes it as is.

        Args:
            forward, backward: float tensors ``(B, T, input_dim)``; zero at masked positions.
            mask: bool tensor ``(B, T)``, a prefix of each row, shared by both streams.
            initial_state: as in ``call``; zeros if omitted.
            dropout: rate of the dropout on the input of every layer (so on the input
                vectors and between layers), applied before the skip connection adds that
                input (bilm-tf's ``DropoutWrapper(ResidualWrapper(cell))``).
            seed: needed when ``dropout > 0``. On TensorFlow a shape-``[2]`` int tensor and the
                dropout stateless: layer ``l`` of direction ``d`` (0 forward) draws its mask
                from ``fold_in(seed, 2 * l + d)``. Elsewhere a ``keras.random.SeedGenerator``
                (``keras.random.dropout``).
            resets: optional bool tensor ``(B, T)``, shared by both streams: where true,
                every layer's state is set to zero before that position is read (a new
                sentence starts there, as it does for ``call``'s stateless use).

        Returns:
            ``(layers, final_state)``: ``layers`` a list of ``num_layers`` pairs
            ``(forward, backward)`` of ``(B, T, P)`` tensors in the order of their streams,
            zero at masked positions; ``final_state`` as in ``call``.
        """
        if dropout and seed is None:
            raise ValueError("dropout needs a seed")
        path = _path()
        mask = ops.cast(mask, "bool")
        if initial_state is None:
            initial_state = self.zero_state(ops.shape(forward)[0])
        init_cell, init_hidden = initial_state
        x = [forward, backward]
        layers, final_cell, final_hidden = [], [], []
        for layer in range(self.num_layers):
            if dropout and path.__name__.endswith("packed_lstm"):
                x = [
                    path.stateless_dropout(v, dropout, seed, 2 * layer + d) for d, v in enumerate(x)
                ]
            elif dropout:
                x = [path.dropout(v, dropout, seed) for v in x]
            cells = (self.forward_cells[layer], self.backward_cells[layer])
            states = [(init_cell[:, layer, d], init_hidden[:, layer, d]) for d in (0, 1)]
            outputs, states = path.run_directions(cells, x, mask, states, resets)
            if self.use_skip_connections and layer > 0:
                outputs = [out + v for out, v in zip(outputs, x)]
            x = list(outputs)
            layers.append(tuple(outputs))
            final_cell.append(ops.stack([s[0] for s in states], axis=1))  # (B, 2, D)
            final_hidden.append(ops.stack([s[1] for s in states], axis=1))  # (B, 2, P)
        return layers, (ops.stack(final_cell, axis=1), ops.stack(final_hidden, axis=1))

    def get_config(self):
        config = super().get_config()
        config.update(
            num_layers=self.num_layers,
            units=self.units,
            projection_units=self.projection_units,
            cell_clip=self.cell_clip,
            proj_clip=self.proj_clip,
            use_skip_connections=self.use_skip_connections,
        )
        return config
