"""The biLSTM's TensorFlow path ("packed", ``elmo_tf.backend.bilstm_path``): rows sorted by
length, each step run on the rows still running, the input half on the real positions only."""

import tensorflow as tf

from elmo_tf.layers import lstm_layout

# Rows (batch rows x steps) whose input half is computed together (run_directions): the steps
# of a block are PROJECTION_ROWS // batch rows, 8 for the default 128 rows, every step for one
# sentence (a block reads the whole input kernel, however few its rows).
PROJECTION_ROWS = 1024


def reverse_within_lengths(x, lengths):
    """``x`` ``(B, T, ...)`` with each row's first ``lengths[b]`` positions reversed."""
    return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)


def dropout(x, rate, seed, site):
    """The stack's dropout on this path: ``stateless_dropout``."""
    return stateless_dropout(x, rate, seed, site)


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
    of 128 rows), in an outer loop around the steps: all steps at once would make a ``(real
    positions, 4D)`` array per cell, the largest array of a batch, where a block keeps it to
    a thousand rows, still one large matmul (docs/performance.md, "Where the time goes").
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
    # Padding gets none (the recurrence never reads it): a large share of the positions of a
    # length-sorted batch, and a large share of the biLSTM's time (docs/performance.md).
    # Packed before the matmul: its input is 4D / input_dim times narrower than its output,
    # so packing the input moves that many times fewer bytes.
    offsets = tf.cumsum(active, exclusive=True)
    bounds = tf.concat([offsets, tf.reduce_sum(active, keepdims=True)], axis=0)  # (T + 1,)
    real = tf.range(tf.shape(mask)[0])[None, :] < active[:, None]  # (T, B)
    packed = [tf.boolean_mask(tf.transpose(x, [1, 0, 2]), real) for x in inputs]  # (N, input)
    # The gate matmuls' layout (lstm_layout): per gate, the input half is kept as four (n, D)
    # parts and the step splits nothing.
    per_gate = lstm_layout.current_layout() == "per_gate"
    # Every weight the loops read, sliced (and, under a mixed policy, cast) once per call,
    # not once per block or step.
    weights = [cell.loop_weights(per_gate) for cell in cells]
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
            output, (c, h) = cell.step(inputs_t, (c_run, h_run), weights[k])
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
            cell.project_inputs(x[start : bounds[last]], per_gate, w)
            for cell, x, w in zip(cells, packed, weights)
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
