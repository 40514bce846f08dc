#!/usr/bin/env python
"""How long the README's classifier takes to build and to ``fit`` the first time, per
``fine_tune=`` choice, with the frozen-gradient cut on and off, each run in a new process.

    python benchmarks/first_fit.py --fine-tune none mix all --rounds 3

Exports the bundled model once, then runs, per round, every choice with the cut
(``ELMo._encoder_frozen`` as it is) and without it (patched to say nothing is frozen, as
before the cut), alternated. Prints the medians: import, build, first and second ``fit``.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import json, sys, time
start = time.perf_counter()
import keras
import numpy as np
import elmo_tf
from elmo_tf.models.elmo import ELMo
imported = time.perf_counter()
path, fine_tune, cut = sys.argv[1], sys.argv[2], sys.argv[3] == "cut"
if not cut:
    ELMo._encoder_frozen = lambda self: False
texts = np.array(["a fine and moving film", "a dull , tedious film"], dtype=object)
labels = np.array([1, 0])
inputs = keras.Input(shape=(), dtype="string")
vectors = elmo_tf.ElmoLayer(path, fine_tune=fine_tune)(inputs)
classifier = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(vectors))
classifier.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
built = time.perf_counter()
classifier.fit(texts, labels, epochs=1, verbose=0)
first = time.perf_counter()
classifier.fit(texts, labels, epochs=1, verbose=0)
second = time.perf_counter()
weights = sum(int(np.prod(w.shape)) for w in classifier.trainable_weights)
print(json.dumps([imported - start, built - imported, first - built, second - first, weights]))
"""


def run_child(path, fine_tune, mode):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, fine_tune, mode],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fine-tune", nargs="+", default=["none", "mix", "all"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import elmo_tf
    from elmo_tf.export.saved_model import export_saved_model

    with tempfile.TemporaryDirectory() as directory:
        path = export_saved_model(elmo_tf.ELMo.from_preset("sotu"), directory)
        runs = {(f, m): [] for f in args.fine_tune for m in ("uncut", "cut")}
        for round_ in range(args.rounds):
            for key in runs:
                started = time.perf_counter()
                runs[key].append(run_child(path, *key))
                print(f"round {round_ + 1}: {key} {time.perf_counter() - started:.1f}s", flush=True)
    print(
        "| fine_tune | trainable weights | import | build | first fit uncut | first fit cut |"
        " second fit |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for fine_tune in args.fine_tune:
        uncut, cut = runs[fine_tune, "uncut"], runs[fine_tune, "cut"]

        def med(rows, i):
            return f"{statistics.median(r[i] for r in rows):.1f} s"

        print(
            f"| {fine_tune} | {cut[0][4]:,} | {med(cut, 0)} | {med(cut, 1)} | {med(uncut, 2)} "
            f"| {med(cut, 2)} | {med(cut, 3)} |"
        )


if __name__ == "__main__":
    main()
