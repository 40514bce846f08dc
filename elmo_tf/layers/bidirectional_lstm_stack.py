"""BidirectionalLSTMStack: ELMo's forward and backward LSTM language-model stacks."""

import keras
import tensorflow as tf

from elmo_tf.layers import lstm_layout
from elmo_tf.layers.lstm_cell_with_projection import LSTMCellWithProjection

# Rows (batch rows x steps) whose input half is computed together (run_directions): the steps
# of a block are PROJECTION_ROWS // batch rows, 8 for the default 128 rows, every step for one
# sentence (a block reads the whole input kernel, however few its rows).
PROJECTION_ROWS = 1024


@keras.saving.register_keras_serializable(package="elmo_tf")
class BidirectionalLSTMStack(keras.layers.Layer):
    """Independent forward and backward stacks of ``LSTMCellWithProjection``.

    The forward stack reads each sentence left to right. The backward stack reads it right to
    left *within its own length* (padding stays at the end, so a sentence's vectors do not
    depend on how much padding the batch adds). From the second layer on, each layer adds its
    input to its output (skip connection); the state carried to the next step is the cell's own,
    without the skip. Layer ``l``'s output is ``concat(forward_l, backward_l)``.

    Each layer runs both directions in one ``tf.while_loop`` over time; the input half of each
    gate matmul is done for blocks of steps at once (``PROJECTION_ROWS``). ``run_streams`` is
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
            tf.zeros([batch_size, self.num_layers, 2, self.units], self.compute_dtype),
            tf.zeros([batch_size, self.num_layers, 2, self.projection_units], self.compute_dtype),
        )

    def call(self, inputs, mask, initial_state=None):
        mask = tf.cast(mask, tf.bool)
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)

        def reverse(x):
            return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)

        layers, final_state = self.run_streams(inputs, reverse(inputs), mask, initial_state)
        outputs = [tf.concat([forward, reverse(backward)], axis=-1) for forward, backward in layers]
        return outputs, final_state

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
                input (bilm-tf's ``DropoutWrapper(ResidualWrapper(cell))``). Stateless: the
                masks are a function of ``seed``.
            seed: shape-``[2]`` int tensor, needed when ``dropout > 0``; layer ``l`` of
                direction ``d`` (0 forward) draws its mask from ``fold_in(seed, 2 * l + d)``.
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
        mask = tf.cast(mask, tf.bool)
        if initial_state is None:
            initial_state = self.zero_state(tf.shape(forward)[0])
        init_cell, init_hidden = initial_state
        x = [forward, backward]
        layers, final_cell, final_hidden = [], [], []
        for layer in range(self.num_layers):
            if dropout:
                x = [stateless_dropout(v, dropout, seed, 2 * layer + d) for d, v in enumerate(x)]
            cells = (self.forward_cells[layer], self.backward_cells[layer])
            states = [(init_cell[:, layer, d], init_hidden[:, layer, d]) for d in (0, 1)]
            outputs, states = run_directions(cells, x, mask, states, resets)
            if self.use_skip_connections and layer > 0:
                outputs = [out + v for out, v in zip(outputs, x)]
            x = list(outputs)
            layers.append(tuple(outputs))
            final_cell.append(tf.stack([s[0] for s in states], axis=1))  # (B, 2, D)
            final_hidden.append(tf.stack([s[1] for s in states], axis=1))  # (B, 2, P)
        return layers, (tf.stack(final_cell, axis=1), tf.stack(final_hidden, axis=1))

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


def stateless_dropout(x, rate, seed, site):
    """Dropout whose mask is a function of ``seed`` (shape ``[2]``) and the integer ``site``."""
    site_seed = tf.random.experimental.stateless_fold_in(seed, site)
    return tf.nn.experimental.stateless_dropout(x, rate, site_seed)


def run_directions(cells, inputs, mask, states, resets=None):
    """Runs several cells over time in one loop, each on its own (right-padded) input.

    A row's state stops changing after its last real position and its output there is zero.
    ``resets`` (optional bool ``(B, T)``): the state of every cell is zeroed before the
    positions where it is true.

    The recurrence computes only the rows still running: rows are put in order of decreasing
    length, so at step ``t`` the rows that still have a real position are a prefix of the
    batch, and the step's matmuls run on that prefix alone. The input half of the gates is
    computed outside the steps, on the real positions alone. A batch's FLOPs are then
    proportional to its real positions, not to ``batch x longest``; the rows come back in
    their original order at the end.

    The input half is computed a block of steps at a time (``PROJECTION_ROWS`` rows: 8 steps
    of 128 rows), in an outer loop around the steps: all steps at once made a ``(real
    positions, 4D)`` array per cell, the largest of a batch (a batch of 6,144 tokens of the
    published shape: 400 MB per direction, 800 MB for both), where a block of 1,024 rows is
    67 MB, still one matmul of a thousand rows.
    """
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)  # (B,)
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    restore = tf.math.invert_permutation(order)
    inputs = [tf.gather(x, order) for x in inputs]
    states = [tuple(tf.gather(s, order) for s in state) for state in states]
    sorted_lengths = tf.gather(lengths, order)
    if resets is not None:
        # (T, B, 1): 0.0 where the state restarts, else 1.0.
        keeps = 1.0 - tf.cast(tf.transpose(tf.gather(resets, order)), inputs[0].dtype)
        keeps = keeps[:, :, None]
    num_steps = tf.shape(mask)[1]
    # active[t]: rows with a real position t (a prefix of the sorted batch).
    active = tf.reduce_sum(
        tf.cast(sorted_lengths[None, :] > tf.range(num_steps)[:, None], tf.int32), axis=1
    )
    # The input half of every gate pre-activation, on the real positions, packed in time-major
    # order: step t's rows are packed[k][offsets[t] : offsets[t] + active[t]].
    # Padding gets none (the recurrence never reads it): on length-sorted batches of 128 that
    # is a third to a half of the positions, and this matmul was half of the biLSTM's time.
    # Packed before the matmul: its input is 4D / input_dim times narrower than its output
    # (32x for the published shape), so packing the input moves that many times fewer bytes.
    offsets = tf.cumsum(active, exclusive=True)
    bounds = tf.concat([offsets, tf.reduce_sum(active, keepdims=True)], axis=0)  # (T + 1,)
    real = tf.range(tf.shape(mask)[0])[None, :] < active[:, None]  # (T, B)
    packed = [tf.boolean_mask(tf.transpose(x, [1, 0, 2]), real) for x in inputs]  # (N, input)
    # The gate matmuls' layout for this machine (lstm_layout): per gate, the input half is kept
    # as four (n, D) parts and the step splits nothing.
    per_gate = lstm_layout.layout_for(cells[0]) == "per_gate"
    recurrent_kernels = [  # sliced once, not per step
        cell.gate_recurrent_kernels() if per_gate else cell.recurrent_kernel for cell in cells
    ]
    arrays = [
        tf.TensorArray(
            inputs[0].dtype,
            size=num_steps,
            # The static batch size when known: TFLite can only lower a TensorArray whose
            # element shape is fully static (None keeps the SavedModel's dynamic batch).
            element_shape=tf.TensorShape([inputs[0].shape[0], cell.projection_units]),
        )
        for cell in cells
    ]

    def step(t, start, projected, states, arrays):
        """Step ``t``; its rows of ``projected`` begin at ``offsets[t] - start``."""
        n = active[t]
        first = offsets[t] - start
        rows = slice(first, first + n)
        new_states, new_arrays = [], []
        for k, cell in enumerate(cells):
            c_prev, h_prev = states[k]
            c_run, h_run = c_prev[:n], h_prev[:n]
            if resets is not None:
                keep = tf.cast(keeps[t][:n], c_run.dtype)
                c_run, h_run = c_run * keep, h_run * keep
            inputs_t = [x[rows] for x in projected[k]] if per_gate else projected[k][rows]
            output, (c, h) = cell.step(inputs_t, (c_run, h_run), recurrent_kernels[k])
            finished = tf.zeros_like(h_prev[n:])  # rows past their length output zero
            c = tf.concat([c, c_prev[n:]], axis=0)
            h = tf.concat([h, h_prev[n:]], axis=0)
            output = tf.concat([output, finished], axis=0)
            # Always B rows: keep a static batch size static across iterations, as while_loop
            # and TFLite need (set_shape adds no op; EnsureShape is no TFLite built-in).
            for x, like in ((c, c_prev), (h, h_prev), (output, h_prev)):
                x.set_shape(like.shape)
            new_states.append((c, h))
            new_arrays.append(arrays[k].write(t, output))
        return new_states, new_arrays

    block_steps = tf.maximum(1, PROJECTION_ROWS // tf.maximum(1, tf.shape(mask)[0]))

    def block(b, states, arrays):
        """Steps ``b * block_steps`` onwards: their input half first, in one matmul per cell
        on their packed rows, then the steps themselves."""
        first = b * block_steps
        last = tf.minimum(first + block_steps, num_steps)
        start = bounds[first]
        projected = [
            cell.project_inputs(x[start : bounds[last]], per_gate) for cell, x in zip(cells, packed)
        ]

        def body(t, states, arrays):
            states, arrays = step(t, start, projected, states, arrays)
            return t + 1, states, arrays

        _, states, arrays = tf.while_loop(
            lambda t, *_: t < last, body, (first, list(states), arrays)
        )
        return b + 1, states, arrays

    num_blocks = (num_steps + block_steps - 1) // block_steps
    _, states, arrays = tf.while_loop(
        lambda b, *_: b < num_blocks, block, (tf.constant(0), list(states), arrays)
    )
    outputs = [tf.gather(tf.transpose(a.stack(), [1, 0, 2]), restore) for a in arrays]  # (B, T, P)
    states = [tuple(tf.gather(s, restore) for s in state) for state in states]
    return outputs, states
