"""The biLSTM's PyTorch path ("eager_packed", ``elmo_tf.backend.bilstm_path``): the packed
path of TensorFlow (``packed_lstm``) in eager PyTorch, whose shapes may change at every step.

Rows are put in order of decreasing length, so at step ``t`` the rows still running are a
prefix of the batch and the step's matmuls run on that prefix alone; the input half of the
gates is computed outside the loop on the real positions alone; the directions run side by
side, each step one batched matmul over both. A batch's work is then proportional to its real
positions, not to ``batch x longest``. The maths of a step is the cell's own
(``LSTMCellWithProjection.step``).
"""

import torch

from elmo_tf.layers import masked_lstm
from elmo_tf.layers.masked_lstm import dropout, reverse_within_lengths  # noqa: F401 (the path's)


def run_directions(cells, inputs, mask, states, resets=None):
    """Runs several cells over time in one loop, each on its own (right-padded) input; the
    interface of ``masked_lstm.run_directions``.

    Args:
        cells: ``LSTMCellWithProjection``s of one configuration, one per input.
        inputs: float tensors ``(B, T, input_dim)``, each in its cell's reading order.
        mask: bool ``(B, T)``, a prefix of each row, shared by the inputs.
        states: ``(c, h)`` per cell, ``(B, D)`` and ``(B, P)``.
        resets: optional bool ``(B, T)`` (training's; it runs ``masked_lstm``'s loop).

    Returns:
        ``(outputs, states)``: ``(B, T, P)`` per cell, zero at masked positions, and each
        row's state after its last real position.
    """
    if resets is not None:
        return masked_lstm.run_directions(cells, inputs, mask, states, resets)
    mask = torch.as_tensor(mask, dtype=torch.bool)
    lengths = mask.sum(dim=1)
    order = torch.argsort(lengths, descending=True, stable=True)
    restore = torch.argsort(order)
    sorted_mask = mask[order]
    # steps[t]: rows with a real position t, a prefix of the sorted batch.
    steps = sorted_mask.sum(dim=0).tolist()
    num_steps = next((t for t, n in enumerate(steps) if n == 0), len(steps))
    time_major = sorted_mask[:, :num_steps].T  # (T', B): the real positions, step by step

    # The input half of every gate, x W_x + b, on the real positions in time-major order:
    # (cells, N, 4D), one batched matmul.
    real = torch.stack([x[order][:, :num_steps].transpose(0, 1)[time_major] for x in inputs])
    bias = torch.stack([cell.bias.value for cell in cells])[:, None, :]
    input_kernel = torch.stack([cell.input_kernel for cell in cells])  # (cells, in, 4D)
    projected = torch.baddbmm(bias, real.to(bias.dtype), input_kernel)
    recurrent = torch.stack([cell.recurrent_kernel for cell in cells])  # (cells, P, 4D)
    projection = torch.stack([cell.projection_kernel.value for cell in cells])  # (cells, D, P)
    cell_state = torch.stack([c for c, _ in states])[:, order]  # (cells, B, D)
    hidden = torch.stack([h for _, h in states])[:, order]  # (cells, B, P)
    dtype = projected.dtype
    cell_state, hidden = cell_state.to(dtype), hidden.to(dtype)

    outputs, finished, start = [], [], 0
    for t in range(num_steps):
        running = steps[t]
        if running < hidden.shape[1]:  # rows past their last position: their final state
            finished.append((cell_state[:, running:], hidden[:, running:]))
            cell_state, hidden = cell_state[:, :running], hidden[:, :running]
        projected_t = projected[:, start : start + running]
        start += running
        hidden, (cell_state, hidden) = cells[0].step(
            projected_t, (cell_state, hidden), recurrent, projection
        )
        outputs.append(hidden)
    finished.append((cell_state, hidden))
    finished.reverse()  # the longest rows first: the sorted order
    final_c = torch.cat([c for c, _ in finished], dim=1)[:, restore]
    final_h = torch.cat([h for _, h in finished], dim=1)[:, restore]

    batch, max_len = mask.shape
    size = projection.shape[-1]
    packed = torch.cat(outputs, dim=1) if outputs else projected.new_zeros(len(cells), 0, size)
    unpacked = packed.new_zeros(len(cells), max_len, batch, size)
    unpacked[:, :num_steps][:, time_major] = packed
    unpacked = unpacked.transpose(1, 2)[:, restore]  # (cells, B, T, P)
    return list(unpacked.unbind(0)), list(zip(final_c.unbind(0), final_h.unbind(0)))
