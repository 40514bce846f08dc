#!/usr/bin/env python
"""What bounds the biLSTM's FLOP rate: one LSTM step's parts, timed alone, against the matmul rate.

One direction of one layer of the published shape (D = 4096, P = 512, clip 3) at B rows, a
``tf.while_loop`` of --steps steps in a ``tf.function`` (as ``run_directions`` runs it), with
the input half of the gates precomputed. Each variant is the loop with only some of the step's
work:

- recurrent: ``h W_h`` (B x P by P x 4D), the step's large matmul;
- projection: ``m W_proj`` (B x D by D x P);
- matmuls: both, chained as in the step;
- gates: the elementwise part alone (add the input half, split, 3 sigmoids, 2 tanh, clip);
- step: the whole step, as ``LSTMCellWithProjection.step`` computes it;
- step, XLA gates: the same with the elementwise part compiled by XLA into one fused kernel
  (``jit_compile``), the one way to fuse it in TensorFlow.

GFLOP/s counts the matmul FLOPs of each variant; "% of matmul" divides by tf.matmul 2048²'s
rate (``profile_embed.matmul_gflops``: the best of three medians), measured first in the same
process with TensorFlow's default pools.

    python benchmarks/lstm_step.py [--batch 64] [--steps 40] [--repeats 7]
"""

import argparse
import statistics
import time

import tensorflow as tf
from profile_embed import matmul_gflops


def timed(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--units", type=int, default=4096)
    ap.add_argument("--projection", type=int, default=512)
    args = ap.parse_args()
    b, d, p, steps = args.batch, args.units, args.projection, args.steps
    rate = matmul_gflops(repeats=args.repeats)

    recurrent_kernel = tf.Variable(tf.random.normal([p, 4 * d], stddev=0.02))
    projection_kernel = tf.Variable(tf.random.normal([d, p], stddev=0.02))
    inputs = tf.random.normal([steps, b, 4 * d])

    def gates(z, c):
        i, j, f, o = tf.split(z, 4, axis=-1)
        c = tf.clip_by_value(tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j), -3.0, 3.0)
        return c, tf.sigmoid(o) * tf.tanh(c)

    fused_gates = tf.function(gates, jit_compile=True)

    def step(gate_fn):
        def body(x, c, h):
            c, m = gate_fn(x + tf.matmul(h, recurrent_kernel), c)
            return c, tf.clip_by_value(tf.matmul(m, projection_kernel), -3.0, 3.0)

        return body

    def recurrent(x, c, h):
        return c, h + 1e-3 * tf.matmul(h, recurrent_kernel)[:, :p]

    def projection(x, c, h):
        return c, tf.matmul(c, projection_kernel)  # c unchanged: TF does not hoist it

    def matmuls(x, c, h):
        z = tf.matmul(h, recurrent_kernel)
        return c, 1e-3 * tf.matmul(z[:, :d], projection_kernel)

    def gates_only(x, c, h):
        c, m = gates(x + h[:1, :1], c)
        return c, m[:, :p]

    recurrent_flops, projection_flops = 2 * b * p * 4 * d, 2 * b * d * p
    variants = [
        ("recurrent", recurrent, recurrent_flops),
        ("projection", projection, projection_flops),
        ("matmuls", matmuls, recurrent_flops + projection_flops),
        ("gates", gates_only, 0),
        ("step", step(gates), recurrent_flops + projection_flops),
        ("step, XLA gates", step(fused_gates), recurrent_flops + projection_flops),
    ]
    print(f"B = {b}, D = {d}, P = {p}, {steps} steps; tf.matmul 2048²: {rate:.1f} GFLOP/s")
    print("| variant | ms per step | GFLOP/s | % of matmul |")
    print("|---|---:|---:|---:|")
    for name, body, flops in variants:

        @tf.function
        def loop(body=body):
            c, h = tf.zeros([b, d]), tf.zeros([b, p])
            for t in tf.range(steps):
                c, h = body(inputs[t], c, h)
            return tf.reduce_sum(c) + tf.reduce_sum(h)

        seconds = timed(lambda loop=loop: loop().numpy(), args.repeats) / steps
        gflops = flops / seconds / 1e9
        share = f"{100 * gflops / rate:.0f}%" if flops else "-"
        print(f"| {name} | {1e3 * seconds:.3f} | {gflops:.1f} | {share} |")


if __name__ == "__main__":
    main()
