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

``--bound`` instead asks what the biLSTM could reach if nothing but its matmuls ran: one
thread (each LSTM direction runs on its own core under ``elmo_tf.configure_threads``), each of
its three matmul shapes at every ``--batch`` (the input half of the gates on B x 24 rows at
once, the recurrent half (B, P) x (P, 4D) and the projection (B, D) x (D, P) once a step), each
as a fraction of a one-thread 2048² matmul, and their FLOP-weighted mean: the biLSTM's
fraction of the matmul rate with zero elementwise work, no step overhead and both cores never
slowing each other. The recurrent half streams its (P, 4D) kernel, 32 MB in the published
shape, once per step for only B rows, so its rate depends on B.

``--rows`` asks what a step costs as the rows still running shrink, as they do at the end of
every length-sorted batch (``run_directions`` runs each step on the rows that still have a real
position): both directions side by side under ``elmo_tf.configure_threads()``'s pools (as the
model runs: on 2 cores, one thread each), at each ``--batch`` row count, the whole step and its
two matmuls alone, in ms per step and as FLOP rate against two concurrent 2048² matmuls under
the same pools.

    python benchmarks/lstm_step.py [--batch 64] [--steps 40] [--repeats 7]
    python benchmarks/lstm_step.py --bound [--batch 64 --batch 128 ...]
    python benchmarks/lstm_step.py --rows [--batch 1 --batch 8 ...]
"""

import argparse
import statistics
import time

import tensorflow as tf
from profile_embed import matmul_gflops

import elmo_tf


def timed(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bound(batches, d, p, repeats, steps=10, input_rows_per_batch_row=24):
    """Prints the one-thread rate of each biLSTM matmul shape and their FLOP-weighted mean."""
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rate = matmul_gflops(repeats=repeats)
    gate_kernel = tf.Variable(tf.random.normal([p, 4 * d], stddev=0.02))
    projection_kernel = tf.Variable(tf.random.normal([d, p], stddev=0.02))

    def gflops(x, kernel):
        @tf.function
        def loop():
            total = tf.zeros([])
            for _ in tf.range(steps):  # [:1, :1]: keep the product, sum almost nothing
                total += tf.reduce_sum(tf.matmul(x, kernel)[:1, :1])
            return total

        seconds = timed(lambda: loop().numpy(), repeats) / steps
        return 2 * x.shape[0] * kernel.shape[0] * kernel.shape[1] / seconds / 1e9

    print(f"one thread; D = {d}, P = {p}; tf.matmul 2048²: {rate:.1f} GFLOP/s")
    print("| B | input half | recurrent half | projection | FLOP-weighted |")
    print("|---:|---:|---:|---:|---:|")
    # FLOPs per position and direction: 2P·4D (input half), 2P·4D (recurrent half), 2DP.
    weights = (4, 4, 1)
    for b in batches:
        rates = (
            gflops(tf.random.normal([b * input_rows_per_batch_row, p]), gate_kernel),
            gflops(tf.random.normal([b, p]), gate_kernel),
            gflops(tf.random.normal([b, d]), projection_kernel),
        )
        mean = sum(weights) / sum(w / r for w, r in zip(weights, rates))
        cells = " | ".join(f"{r:.1f} ({100 * r / rate:.0f}%)" for r in (*rates, mean))
        print(f"| {b} | {cells} |")


def rows_sweep(batches, d, p, steps, repeats):
    """Prints a two-direction step's cost at each row count, matmuls alone and whole."""
    threads = elmo_tf.configure_threads()
    a, b = tf.random.normal([2048, 2048]), tf.random.normal([2048, 2048])
    two_matmuls = tf.function(
        lambda: tf.reduce_sum(tf.matmul(a, b)) + tf.reduce_sum(tf.matmul(b, a))
    )
    rate = 2 * 2 * 2048**3 / timed(lambda: two_matmuls().numpy(), repeats) / 1e9
    kernels = [
        (
            tf.Variable(tf.random.normal([p, 4 * d], stddev=0.02)),
            tf.Variable(tf.random.normal([d, p], stddev=0.02)),
        )
        for _ in range(2)
    ]

    def loop(rows, with_gates):
        inputs = [tf.random.normal([rows, 4 * d]) for _ in kernels]

        @tf.function
        def run():
            states = [(tf.zeros([rows, d]), tf.zeros([rows, p])) for _ in kernels]
            for _ in tf.range(steps):
                new_states = []
                for (recurrent_kernel, projection_kernel), x, (c, h) in zip(
                    kernels, inputs, states
                ):
                    z = tf.matmul(h, recurrent_kernel)
                    if with_gates:
                        c, m = gates(x + z, c)
                    else:  # keep the chain; the elementwise work is one small op
                        c, m = c, z[:, :d]
                    h = tf.clip_by_value(tf.matmul(m, projection_kernel), -3.0, 3.0)
                    new_states.append((c, h))
                states = new_states
            return [tf.reduce_sum(c) + tf.reduce_sum(h) for c, h in states]

        return timed(lambda: [v.numpy() for v in run()], repeats) / steps

    print(
        f"both directions side by side, (intra-op, inter-op) threads {threads}; D = {d}, P = {p}, "
        f"{steps} steps; two concurrent tf.matmul 2048²: {rate:.1f} GFLOP/s"
    )
    print("| rows | step ms | GFLOP/s | % of matmul | matmuls alone ms | GFLOP/s | % of matmul |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for rows in batches:
        flops = 2 * 2 * rows * (p * 4 * d + d * p)  # two directions
        cells = []
        for with_gates in (True, False):
            seconds = loop(rows, with_gates)
            gflops = flops / seconds / 1e9
            cells.append(f"{1e3 * seconds:.2f} | {gflops:.1f} | {100 * gflops / rate:.0f}%")
        print(f"| {rows} | {' | '.join(cells)} |", flush=True)


def gates(z, c):
    """The step's elementwise part, as ``LSTMCellWithProjection.step`` computes it (clip 3)."""
    i, j, f, o = tf.split(z, 4, axis=-1)
    c = tf.clip_by_value(tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j), -3.0, 3.0)
    return c, tf.sigmoid(o) * tf.tanh(c)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, action="append", help="repeatable (default 64)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--units", type=int, default=4096)
    ap.add_argument("--projection", type=int, default=512)
    ap.add_argument(
        "--bound", action="store_true", help="one-thread rates of the biLSTM's matmul shapes"
    )
    ap.add_argument(
        "--rows", action="store_true", help="a two-direction step's cost at each row count"
    )
    args = ap.parse_args()
    if args.bound and args.rows:
        ap.error("--bound and --rows: one at a time")
    if args.rows:
        batches = args.batch or [1, 2, 4, 8, 16, 32, 51, 64, 96, 128]
        rows_sweep(batches, args.units, args.projection, args.steps, args.repeats)
        return
    if args.bound:
        bound(args.batch or [64, 128, 256], args.units, args.projection, args.repeats)
        return
    if args.batch and len(args.batch) > 1:
        ap.error("--batch: one value, except with --bound or --rows")
    b, d, p, steps = (args.batch or [64])[0], args.units, args.projection, args.steps
    rate = matmul_gflops(repeats=args.repeats)

    recurrent_kernel = tf.Variable(tf.random.normal([p, 4 * d], stddev=0.02))
    projection_kernel = tf.Variable(tf.random.normal([d, p], stddev=0.02))
    inputs = tf.random.normal([steps, b, 4 * d])

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
