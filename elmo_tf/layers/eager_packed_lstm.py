"""The biLSTM's PyTorch path ("eager_packed", ``elmo_tf.backend.bilstm_path``): the packed
path of TensorFlow (``packed_lstm``) in eager PyTorch, whose shapes may change at every step.

Rows are put in order of decreasing length, so at step ``t`` the rows still running are a
prefix of the batch and the step's matmuls run on that prefix alone; the input half of the
gates is computed outside the loop, on the real positions alone. A batch's work is then
proportional to its real positions, not to ``batch x longest``. The gate matmuls follow
``lstm_layout``'s rule (per gate by default: on an AMD EPYC Zen 3 the full shape runs 1.3x as
fast as fused, a gate's (P, D) block staying in cache where the (P, 4D) kernel does not). The
kernels are used as they come (transposed views included: the matmuls read them in place, and
a copy would cost a pass over every weight per call). The maths of a step is the cell's own
(``LSTMCellWithProjection.step``).
"""

import torch

from elmo_tf.layers import lstm_layout, masked_lstm
from elmo_tf.layers.masked_lstm import dropout, reverse_within_lengths  # noqa: F401 (the path's)


def run_directions(cells, inputs, mask, states, resets=None):
    """Runs several cells over time in one loop, each on its own (right-padded) input; the
    interface of ``masked_lstm.run_directions``.

    Args:
        cells: ``LSTMCellWithProjection``s, one per input.
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
    order = torch.argsort(mask.sum(dim=1), descending=True, stable=True)
    restore = torch.argsort(order)
    sorted_mask = mask[order]
    # steps[t]: rows with a real position t, a prefix of the sorted batch.
    steps = sorted_mask.sum(dim=0).tolist()
    num_steps = next((t for t, n in enumerate(steps) if n == 0), len(steps))
    time_major = sorted_mask[:, :num_steps].T  # (T', B): the real positions, step by step
    starts = [0]
    for running in steps[:num_steps]:
        starts.append(starts[-1] + running)

    per_gate = lstm_layout.current_layout() == "per_gate"
    results = []
    for cell, x, (c, h) in zip(cells, inputs, states):
        # x W_x + b on the real positions, in time-major order: (N, 4D), one matmul (or
        # four (N, D), one per gate).
        real = x[order][:, :num_steps].transpose(0, 1)[time_major]
        # Every weight the loop reads, sliced (and, under a mixed policy, cast) once, not
        # per step.
        weights = cell.loop_weights(per_gate)
        if per_gate:
            dtype = weights.bias[0].dtype
            projected = [
                torch.addmm(b, real.to(dtype), k)
                for k, b in zip(weights.input_kernel, weights.bias)
            ]
        else:
            dtype = weights.bias.dtype
            projected = torch.addmm(weights.bias, real.to(dtype), weights.input_kernel)
        c, h = c[order].to(dtype), h[order].to(dtype)
        outputs, finished = [], []
        for t in range(num_steps):
            running = steps[t]
            if running < h.shape[0]:  # rows past their last position: their final state
                finished.append((c[running:], h[running:]))
                c, h = c[:running], h[:running]
            rows = slice(starts[t], starts[t + 1])
            step_inputs = [p[rows] for p in projected] if per_gate else projected[rows]
            h, (c, h) = cell.step(step_inputs, (c, h), weights)
            outputs.append(h)
        finished.append((c, h))
        finished.reverse()  # the longest rows first: the sorted order
        final = tuple(torch.cat(part)[restore] for part in zip(*finished))
        unpacked = h.new_zeros(mask.shape[1], mask.shape[0], cell.projection_units)
        if outputs:
            unpacked[:num_steps][time_major] = torch.cat(outputs)
        results.append((unpacked.transpose(0, 1)[restore], final))
    return [y for y, _ in results], [state for _, state in results]
