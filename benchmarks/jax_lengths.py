#!/usr/bin/env python
"""What sentences of many different lengths cost on each backend: ``ELMo.embed`` called once
per sentence, one sentence of each length, in a new process per backend.

    python benchmarks/jax_lengths.py --lengths 40 --model sotu
    python benchmarks/jax_lengths.py --lengths 60 --start 100 --step 10 --model small

XLA compiles one executable per input shape: before the embed path bucketed its shapes, JAX
compiled (and kept) one per multiple of 8 positions. Run it on two commits for a before and
after. Prints, per backend: the seconds to embed every sentence, the process's peak memory,
and on JAX the shapes its embed path keeps compiled.
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, resource, sys, time
import elmo_tf
from elmo_tf import backend

name, lengths = sys.argv[1], json.loads(sys.argv[2])
model = elmo_tf.ELMo.from_preset(name)
model.embed([["warm"]])  # the first compile is set-up, as elmo-tf embed counts it
start = time.perf_counter()
tokens = 0
for n in lengths:
    model.embed([[f"w{i % 50}" for i in range(n)]])
    tokens += n
seconds = time.perf_counter() - start
calls = model.embedder.calls
shapes = calls.compiled_shapes()["contextualize"] if hasattr(calls, "compiled_shapes") else None
print(json.dumps({
    "backend": backend.name(),
    "seconds": seconds,
    "tokens": tokens,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "kept_shapes": None if shapes is None else len(shapes),
}))
"""


def run_child(backend, model, lengths):
    done = subprocess.run(
        [sys.executable, "-c", CHILD, model, json.dumps(lengths)],
        env={**os.environ, "KERAS_BACKEND": backend},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"{backend}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, default=40, help="distinct sentence lengths")
    parser.add_argument("--start", type=int, default=1, help="the shortest, in tokens")
    parser.add_argument("--step", type=int, default=1, help="tokens between two lengths")
    parser.add_argument("--model", default="sotu", help="a model name or directory")
    parser.add_argument("--backends", nargs="+", default=["jax", "tensorflow"])
    args = parser.parse_args()
    lengths = [args.start + i * args.step for i in range(args.lengths)]
    print(f"{len(lengths)} sentences of {lengths[0]} to {lengths[-1]} tokens, one call each")
    print("| backend | seconds | tokens/s | peak memory | shapes kept compiled |")
    print("|---|---:|---:|---:|---:|")
    for backend in args.backends:
        r = run_child(backend, args.model, lengths)
        kept = "-" if r["kept_shapes"] is None else r["kept_shapes"]
        print(
            f"| {r['backend']} | {r['seconds']:.1f} | {r['tokens'] / r['seconds']:,.0f} | "
            f"{r['peak_mb']:,.0f} MB | {kept} |"
        )


if __name__ == "__main__":
    main()
