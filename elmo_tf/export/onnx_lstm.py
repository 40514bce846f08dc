"""The biLSTM loop the ONNX export traces: ``layers.packed_lstm``'s work in a form tf2onnx
converts into one ONNX ``Loop`` per layer (``elmo_tf.backend.tracing_bilstm_with``).

tf2onnx turns a ``tf.while_loop`` into an ONNX ``Loop`` when every ``TensorArray`` the loop
writes is written once per iteration at the loop's own counter (its scan outputs).
``packed_lstm`` computes the input half a block of steps at a time in an outer loop around the
steps, so its arrays are written in a nested loop, which tf2onnx refuses ("While loop couldn't
find scan output index"). Here the input half is computed once, before the loop, on the real
positions only; the steps are those of ``packed_lstm``: rows in order of decreasing length, each
step's matmuls on the rows still running. The maths is the cell's own
(``LSTMCellWithProjection.project_inputs`` and ``step``), so the exported numbers are the
model's. It runs the stateless model only: no state resets and no dropout (inference).
"""


def reverse_within_lengths(x, lengths):
    """``x`` ``(B, T, ...)`` with each row's first ``lengths[b]`` positions reversed (ONNX
    ``ReverseSequence``)."""
    from elmo_tf.layers import packed_lstm  # lazy: TensorFlow, imported while tracing

    return packed_lstm.reverse_within_lengths(x, lengths)


def dropout(x, rate, seed, site):
    raise ValueError("the ONNX export traces the model for inference: no dropout")


def run_directions(cells, inputs, mask, states, resets=None):
    """Runs several cells over time in one loop, each on its own (right-padded) input.

    Args:
        cells: ``LSTMCellWithProjection``s, one per input.
        inputs: float tensors ``(B, T, input_dim)``, each in its cell's reading order.
        mask: bool ``(B, T)``, a prefix of each row, shared by the inputs.
        states: ``(c, h)`` per cell, ``(B, D)`` and ``(B, P)``.
        resets: must be ``None`` (the training biLM's; not exported).

    Returns:
        ``(outputs, states)``: ``(B, T, P)`` per cell, zero at masked positions, and each
        row's state after its last real position.
    """
    import tensorflow as tf  # lazy: this loop is traced on TensorFlow only, by the exporter

    if resets is not None:
        raise ValueError("the ONNX export traces the stateless model: no state resets")
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)  # (B,)
    batch, num_steps = tf.shape(mask)[0], tf.shape(mask)[1]
    # Longest rows first, so that the rows still running at step t are a prefix [:active[t]].
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    restore = tf.argsort(order)  # the inverse permutation (ONNX has no InvertPermutation)
    inputs = [tf.gather(x, order) for x in inputs]
    states = [tuple(tf.gather(s, order) for s in state) for state in states]
    sorted_lengths = tf.gather(lengths, order)
    active = tf.reduce_sum(
        tf.cast(sorted_lengths[None, :] > tf.range(num_steps)[:, None], tf.int32), axis=1
    )  # (T,)
    # The input half of the gates on the real positions only, time-major: step t's rows are
    # projected[k][offsets[t] : offsets[t] + active[t]].
    offsets = tf.cumsum(active, exclusive=True)
    positions = tf.where(tf.range(batch)[None, :] < active[:, None])  # (N, 2): (t, row)
    # Every weight the loop reads, sliced (and, under a mixed policy, cast) once, not per step.
    weights = [cell.loop_weights() for cell in cells]
    projected = [
        cell.project_inputs(tf.gather_nd(tf.transpose(x, [1, 0, 2]), positions), weights=w)
        for cell, x, w in zip(cells, inputs, weights)
    ]  # (N, 4D) each
    arrays = [
        tf.TensorArray(inputs[0].dtype, size=num_steps, element_shape=[None, cell.projection_units])
        for cell in cells
    ]

    def step(t, states, arrays):
        n, first = tf.gather(active, t), tf.gather(offsets, t)
        new_states, new_arrays = [], []
        for k, cell in enumerate(cells):
            c_prev, h_prev = states[k]
            output, (c, h) = cell.step(
                projected[k][first : first + n], (c_prev[:n], h_prev[:n]), weights[k]
            )
            # Rows past their length keep their state and output zero.
            new_states.append((tf.concat([c, c_prev[n:]], 0), tf.concat([h, h_prev[n:]], 0)))
            output = tf.concat([output, tf.zeros_like(h_prev[n:])], 0)
            new_arrays.append(arrays[k].write(t, output))  # at the loop's counter: a scan output
        return t + 1, new_states, new_arrays

    states = [tuple(state) for state in states]
    _, final, arrays = tf.while_loop(lambda t, *_: t < num_steps, step, (0, states, arrays))
    outputs = [tf.gather(tf.transpose(a.stack(), [1, 0, 2]), restore) for a in arrays]
    return outputs, [tuple(tf.gather(s, restore) for s in state) for state in final]
