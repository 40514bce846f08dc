#!/usr/bin/env python
"""How long an export takes with each function traced once (in the save context) and twice
(traced, then traced again by ``tf.saved_model.save``), alternated in one process.

    python benchmarks/export_time.py --model sotu --rounds 3

Prints the medians (and every run) of ``export_saved_model`` and ``export_tflite`` for both;
"twice" is the exporter with ``elmo_tf.export.saved_model.save_context`` switched off.
"""

import argparse
import statistics
import tempfile
import time

import elmo_tf
from elmo_tf.export import saved_model
from elmo_tf.export.tflite import export_tflite


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sotu", help="a preset name or model directory")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    context = saved_model._tf_save_context
    times = {"traced twice": [], "traced once": []}
    for _ in range(args.rounds):
        for mode in times:
            saved_model._tf_save_context = context if mode == "traced once" else None
            model = elmo_tf.ELMo.from_preset(args.model)
            with tempfile.TemporaryDirectory() as directory:
                start = time.perf_counter()
                saved_model.export_saved_model(model, f"{directory}/saved")
                middle = time.perf_counter()
                export_tflite(model, f"{directory}/elmo.tflite")
                times[mode].append((middle - start, time.perf_counter() - middle))
    saved_model._tf_save_context = context
    print("| export | " + " | ".join(times) + " |")
    print("|---|" + "---:|" * len(times))
    for index, name in enumerate(("SavedModel", "TFLite")):
        cells = [f"{statistics.median(t[index] for t in runs):.2f} s" for runs in times.values()]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for mode, runs in times.items():
        print(mode, ", ".join(f"{a:.2f}/{b:.2f}" for a, b in runs))


if __name__ == "__main__":
    main()
