#!/usr/bin/env python
"""The first request after a version loads, with and without TF Serving's warm-up records,
against a steady request: what ``assets.extra/tf_serving_warmup_requests`` saves a client.

    python benchmarks/first_request.py                      # the bundled model, 3 rounds
    python benchmarks/first_request.py --model small --rounds 5

The model is exported once (``elmo-tf export saved-model``, warm-up records included) into
--workdir. Each round loads it in a fresh process as ``elmo-tf serve`` does
(``elmo_tf.serving.model_manager.Servable``), then either runs nothing or replays the records
(``Servable.warm_up``), then times one ``default`` request of a sentence (the first), then
--steady more of other sentences of the same length (their median is the steady figure). The
two modes alternate, a process each. Prints a markdown table: medians over the rounds.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

from timing import Timing, seconds

HERE = os.path.dirname(os.path.abspath(__file__))
SENTENCES = [
    "The bank closed its doors to new customers on Monday .",
    "A river bank in spring is a fine place to sit and read .",
    "She asked the bank for a loan to open a small shop here .",
    "We walked along the bank until the rain began to fall hard .",
]


def child(path, mode, steady):
    """One fresh load: ``{"load_s", "warmup_s", "first_ms", "steady_ms"}``."""
    import numpy as np

    from elmo_tf.serving.model_manager import Servable

    loaded = []
    load_s = seconds(lambda: loaded.append(Servable("elmo", 1, path)))
    servable, replayed = loaded[0], []
    warmup_s = seconds(lambda: replayed.append(servable.warm_up() if mode == "records" else 0))
    if mode == "records" and not replayed[0]:
        raise SystemExit(f"{path} has no warm-up records")

    def request(sentence):
        inputs = {"sentences": np.array([sentence.encode()], dtype=object)}
        return seconds(lambda: servable.run("default", inputs))

    first = request(SENTENCES[0])
    steady_run = Timing(request(SENTENCES[1 + i % (len(SENTENCES) - 1)]) for i in range(steady))
    return {
        "load_s": load_s,
        "warmup_s": warmup_s,
        "first_ms": 1000 * first,
        "steady_ms": 1000 * steady_run.median,
    }


def export(model, workdir):
    base = os.path.join(workdir, f"saved_model_{model}")
    if not os.path.isdir(os.path.join(base, "1")):
        subprocess.run(
            [sys.executable, "-m", "elmo_tf", "export", "saved-model", base, "--model", model],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return os.path.join(base, "1")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="sotu", help="a name or directory (elmo-tf's --model)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per mode (default 3)")
    ap.add_argument("--steady", type=int, default=10, help="requests after the first (10)")
    ap.add_argument("--workdir", default="/tmp/elmo_first_request")
    ap.add_argument("--_child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        print(json.dumps(child(args._child[0], args._child[1], args.steady)))
        return
    os.makedirs(args.workdir, exist_ok=True)
    path = export(args.model, args.workdir)
    results = {"none": [], "records": []}
    for _ in range(args.rounds):
        for mode in results:
            done = subprocess.run(
                [sys.executable, __file__, "--steady", str(args.steady), "--_child", path, mode],
                check=True,
                capture_output=True,
                text=True,
            )
            results[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.model}, {args.rounds} rounds, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print()
    print("| warm-up | load s | warm-up s | first request ms | steady ms | first / steady |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode, label in (("none", "none"), ("records", "the export's records")):
        rows = results[mode]

        def median(key, rows=rows):
            return statistics.median(r[key] for r in rows)

        print(
            f"| {label} | {median('load_s'):.2f} | {median('warmup_s'):.2f} | "
            f"{median('first_ms'):.1f} | {median('steady_ms'):.1f} | "
            f"{median('first_ms') / median('steady_ms'):.1f}x |"
        )


if __name__ == "__main__":
    main()
