"""The biLSTM's portable path ("masked", ``elmo_tf.backend.bilstm_path``): one fixed-shape loop
over every position in ``keras.ops``, for JAX and PyTorch.

Every row runs every step; a mask keeps a row's state after its last real position and zeroes
its outputs there. The loop is ``keras.ops.scan``: one ``lax.scan`` that JAX compiles whole, a
Python loop of eager steps on PyTorch. Each row's numbers depend on that row alone, as on the
packed TensorFlow path, so the two agree to float32 round-off (the matmuls are blocked
differently).
"""

import keras
from keras import ops


def reverse_within_lengths(x, lengths):
    """``x`` ``(B, T, ...)`` with each row's first ``lengths[b]`` positions reversed (its
    padding stays where it is)."""
    steps = ops.shape(x)[1]
    t = ops.arange(steps, dtype="int32")[None, :]
    n = ops.cast(lengths, "int32")[:, None]
    index = ops.where(t < n, n - 1 - t, t)  # (B, T)
    index = ops.reshape(index, (*ops.shape(index), *([1] * (len(x.shape) - 2))))
    return ops.take_along_axis(x, ops.broadcast_to(index, ops.shape(x)), axis=1)


def dropout(x, rate, seed, site):
    """Dropout of ``rate`` on ``x`` with ``keras.random``; ``seed`` a ``SeedGenerator``, which
    draws a new mask at every call (``site`` is the packed path's; each call here is one)."""
    del site
    return keras.random.dropout(x, rate, seed=seed)


def run_directions(cells, inputs, mask, states, resets=None):
    """Runs several cells over time in one loop, each on its own (right-padded) input.

    Args:
        cells: ``LSTMCellWithProjection``s, one per input.
        inputs: float tensors ``(B, T, input_dim)``, each in its cell's reading order.
        mask: bool ``(B, T)``, a prefix of each row, shared by the inputs.
        states: ``(c, h)`` per cell, ``(B, D)`` and ``(B, P)``.
        resets: optional bool ``(B, T)``: every cell's state is zeroed before the positions
            where it is true.

    Returns:
        ``(outputs, states)``: ``(B, T, P)`` per cell, zero at masked positions, and each
        row's state after its last real position.
    """
    dtype = inputs[0].dtype
    # The input half of every gate for every position at once: one large matmul per cell.
    # Every weight the loop reads, sliced (and, under a mixed policy, cast) once, not per step.
    weights = [cell.loop_weights() for cell in cells]
    projected = [
        ops.transpose(cell.project_inputs(x, weights=w), (1, 0, 2))
        for cell, x, w in zip(cells, inputs, weights)
    ]
    keep = ops.cast(ops.transpose(mask), dtype)[:, :, None]  # (T, B, 1)
    sequences = [projected, keep]
    if resets is not None:
        sequences.append(1 - ops.cast(ops.transpose(resets), dtype)[:, :, None])

    def step(carry, inputs_t):
        projected_t, keep_t = inputs_t[0], inputs_t[1]
        new_states, outputs = [], []
        for k, cell in enumerate(cells):
            c_prev, h_prev = carry[k]
            if resets is not None:
                c_prev, h_prev = c_prev * inputs_t[2], h_prev * inputs_t[2]
            output, (c, h) = cell.step(projected_t[k], (c_prev, h_prev), weights[k])
            # A finished row keeps its state and outputs zero (a select, not arithmetic).
            running = keep_t > 0
            c_kept, h_kept = carry[k]
            new_states.append((ops.where(running, c, c_kept), ops.where(running, h, h_kept)))
            outputs.append(ops.where(running, output, ops.zeros_like(output)))
        return new_states, outputs

    states = [tuple(ops.cast(s, dtype) for s in state) for state in states]
    final, outputs = ops.scan(step, states, sequences)
    return [ops.transpose(y, (1, 0, 2)) for y in outputs], [tuple(s) for s in final]
