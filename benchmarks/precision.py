#!/usr/bin/env python
"""Reduced precision against float32 on the same runtime: how far the numbers move and how
fast it runs, side by side in one run.

    python benchmarks/precision.py --sentences sotu_1000_s7.txt              # every shape
    python benchmarks/precision.py --sentences my.txt --model my_model_dir \\
        --runtimes tensorflow,onnx --no-speed                                 # your model

Runtimes and their precisions (``elmo_tf.precision``): ``tensorflow`` and ``torch`` (Keras on
PyTorch) float32 and bfloat16 (``ELMo(precision=...)``; bfloat16 needs a CPU with AVX-512 BF16
or AMX, and says so otherwise), ``onnx`` float32 and int8 (``elmo-tf export onnx
--precision int8``, run by ``OnnxModel``), ``tflite`` float32 and int8 (``export tflite
--precision int8``, run by ``run_tflite``). Shapes: ``sotu`` (the bundled, trained model),
``small`` and ``full`` (random weights in the published shapes,
``elmo_tf.testing.random_weights``), or ``--model DIR`` (a directory with options.json and
weights.hdf5: yours).

Fidelity, per shape and runtime, in one child process: the first ``--fidelity-n`` sentences
embedded in float32 and in the reduced precision, compared token by token
(``elmo_tf.probes.fidelity``: per-token cosine mean and 1st percentile, largest absolute
difference, per output key), and the word-sense probe (``elmo_tf.probes.word_senses``, the
bundled probe set) per layer in both.

Speed, per shape, runtime and precision, in a child process of its own (its peak RSS is that
configuration's), float32 and the reduced precision alternating ``--rounds`` times: tokens/s
of ``embed`` over the first ``--n`` sentences at 64 sentences a call (``--batch``; no token
cache: each pass encodes every token again), the median of ``--repeats`` passes after one
untimed; one-sentence latency, the median of ``embed([s])`` over ``--latency-n`` sentences
after three untimed; the file a deployment ships (the weight file, the .onnx or the .tflite
file; the TFLite model has a fixed batch: a batch-64 file for throughput, a batch-1 file for
latency); the child's peak RSS. Each child's 1-minute load average is printed beside it.

Exports are made once per shape into ``--work-dir``. Progress goes to stderr, the two Markdown
tables to stdout, everything to ``--json``.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from timing import Timing, peak_rss_mib, read_sentences, seconds, timed

PRECISIONS = {
    "tensorflow": ("float32", "bfloat16"),
    "torch": ("float32", "bfloat16"),
    "onnx": ("float32", "int8"),
    "tflite": ("float32", "int8"),
}
SHAPES = ("sotu", "small", "full")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", required=True, help="one tokenised sentence per line")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--model", help="a model directory (options.json, weights.hdf5) instead")
    ap.add_argument("--runtimes", default="tensorflow,torch,onnx,tflite")
    ap.add_argument("--n", type=int, default=300, help="sentences of a timed pass")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="float32/reduced alternations")
    ap.add_argument("--latency-n", type=int, default=20)
    ap.add_argument("--fidelity-n", type=int, default=300)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-fidelity", action="store_true")
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "elmo-precision"))
    ap.add_argument("--torch-python", default=sys.executable, help="a Python with PyTorch")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "precision.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child), args)))
        return 0

    shapes = [args.model] if args.model else args.shapes.split(",")
    runtimes = args.runtimes.split(",")
    report = {"cpu": cpu_description(), "started": time.strftime("%Y-%m-%d %H:%M"), "rows": []}
    print(f"# {report['cpu']}", flush=True)
    fidelity_rows, speed_rows = [], []
    for shape in shapes:
        files = model_files(shape, args.work_dir)
        artefacts = make_exports(shape, files, runtimes, args)
        for runtime in runtimes:
            if not args.no_fidelity:
                job = {"mode": "fidelity", "runtime": runtime, "files": files,
                       "artefacts": artefacts}  # fmt: skip
                result = run_child(args, runtime, job)
                if result is not None:
                    fidelity_rows.append((shape, runtime, result))
            if not args.no_speed:
                per_precision = {p: [] for p in PRECISIONS[runtime]}
                for _ in range(args.rounds):
                    for precision in PRECISIONS[runtime]:
                        job = {"mode": "speed", "runtime": runtime, "precision": precision,
                               "files": files, "artefacts": artefacts}  # fmt: skip
                        result = run_child(args, runtime, job)
                        if result is not None:
                            per_precision[precision].append(result)
                speed_rows.append((shape, runtime, per_precision))
    report["fidelity"] = [dict(shape=s, runtime=r, **res) for s, r, res in fidelity_rows]
    report["speed"] = [dict(shape=s, runtime=r, runs=res) for s, r, res in speed_rows]
    print_tables(report["cpu"], fidelity_rows, speed_rows)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    return 0


# ------------------------------------------------------------------ the parent


def cpu_description():
    """The CPU's model name (lscpu) and its reduced-precision instruction sets."""
    from elmo_tf import precision

    name = platform.processor() or platform.machine()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next(
            line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line
        )
    except (OSError, StopIteration):
        pass
    flags = precision.cpu_flags()
    wanted = ("avx512_bf16", "amx_bf16", "avx512_vnni", "avx_vnni", "amx_int8", "avx512f", "avx2")
    have = [f for f in wanted if f in flags]
    return f"{name}, {os.cpu_count()} CPUs, flags: {' '.join(have) or 'none of ' + str(wanted)}"


def model_files(shape, work_dir):
    """``(options.json, weights.hdf5)`` of a shape: the bundled model, random weights in a
    published shape (written once into ``work_dir``), or a model directory."""
    if shape == "sotu":
        from elmo_tf.presets import preset_files

        return [str(p) for p in preset_files("sotu", download=False)]
    if os.path.isdir(shape):
        return [os.path.join(shape, "options.json"), os.path.join(shape, "weights.hdf5")]
    from elmo_tf.testing import random_weights

    directory = os.path.join(work_dir, shape)
    options, weights = (
        os.path.join(directory, "options.json"),
        os.path.join(directory, "weights.hdf5"),
    )
    if not os.path.isfile(weights):
        os.makedirs(directory, exist_ok=True)
        config = random_weights.options_for(shape)
        with open(options, "w", encoding="utf-8") as f:
            json.dump(config, f)
        random_weights.write_weights(config, weights, random_weights.SEEDS[shape])
    return [options, weights]


def make_exports(shape, files, runtimes, args):
    """The ONNX and TFLite files the runtimes need, made once (by the command line, in a child
    process: the exports run on TensorFlow)."""
    tag = os.path.basename(os.path.dirname(files[1])) if shape != "sotu" else "sotu"
    directory = os.path.join(args.work_dir, "exports", tag)
    os.makedirs(directory, exist_ok=True)
    artefacts = {}
    wanted = []
    if "onnx" in runtimes:
        for precision in PRECISIONS["onnx"]:
            path = os.path.join(directory, f"{precision}.onnx")
            artefacts[f"onnx-{precision}"] = path
            wanted.append((path, ["onnx", path, "--precision", precision]))
    if "tflite" in runtimes:
        for precision in PRECISIONS["tflite"]:
            for batch in (args.batch, 1):
                path = os.path.join(directory, f"{precision}-b{batch}.tflite")
                artefacts[f"tflite-{precision}-b{batch}"] = path
                argv = ["tflite", path, "--precision", precision, "--batch-size", str(batch)]
                wanted.append((path, argv))
    for path, argv in wanted:
        if os.path.isfile(path):
            continue
        print(f"exporting {path}", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "elmo_tf", "export", *argv,
                   "--options", files[0], "--weights", files[1]]  # fmt: skip
        env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"export failed: {' '.join(command)}\n{done.stderr[-3000:]}")
    return artefacts


def run_child(args, runtime, job):
    """``job`` in a child process of this script; its JSON answer, or ``None`` (said on
    stderr) where the runtime refused the precision."""
    python = args.torch_python if runtime == "torch" else sys.executable
    env = {**os.environ, "KERAS_BACKEND": "torch" if runtime == "torch" else "tensorflow",
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    argv = [python, os.path.abspath(__file__), "--sentences", args.sentences, "--n", str(args.n),
            "--batch", str(args.batch), "--repeats", str(args.repeats), "--latency-n",
            str(args.latency_n), "--fidelity-n", str(args.fidelity_n),
            "--child", json.dumps(job)]  # fmt: skip
    label = f"{job['mode']} {runtime} {job.get('precision', '')}".strip()
    print(f"  {label} ...", file=sys.stderr, flush=True)
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        print(f"  {label}: failed: {last}", file=sys.stderr, flush=True)
        return None
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"  {label}: {result if job['mode'] == 'speed' else 'done'}", file=sys.stderr, flush=True)
    return result


def print_tables(cpu, fidelity_rows, speed_rows):
    if fidelity_rows:
        print(f"\nFidelity against float32 of the same runtime ({cpu})\n")
        print("| shape | runtime | precision | key | tokens | cos mean | cos 1st pct | "
              "max abs diff (scale) | probe float32 → reduced |")  # fmt: skip
        print("|---|---|---|---|---:|---:|---:|---:|---|")
        for shape, runtime, result in fidelity_rows:
            precision = result["precision"]
            for key, row in result["fidelity"].items():
                probe = ""
                if key in result["probe"]["float32"]:
                    probe = (f"{result['probe']['float32'][key]:.3f} → "
                             f"{result['probe'][precision][key]:.3f}")  # fmt: skip
                print(f"| {shape} | {runtime} | {precision} | {key} | {row['tokens']:,} | "
                      f"{row['cos_mean']:.5f} | {row['cos_p1']:.5f} | "
                      f"{row['max_abs']:.3g} ({row['scale']:.3g}) | {probe} |")  # fmt: skip
    if speed_rows:
        print(f"\nSpeed, each precision against float32 of the same runtime ({cpu})\n")
        print("| shape | runtime | precision | tokens/s (batch 64) | × float32 | one sentence ms | "
              "× float32 | file MB | peak RSS MiB | load (1 min) |")  # fmt: skip
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
        for shape, runtime, runs in speed_rows:
            base = runs.get("float32") or []
            base_rate = _median(r["tokens_per_s"] for r in base)
            base_latency = _median(r["latency_ms"] for r in base)
            for precision, results in runs.items():
                if not results:
                    print(f"| {shape} | {runtime} | {precision} | refused or failed | | | | | | |")
                    continue
                rate = _median(r["tokens_per_s"] for r in results)
                latency = _median(r["latency_ms"] for r in results)
                loads = "/".join(f"{r['load']:.1f}" for r in results)
                print(f"| {shape} | {runtime} | {precision} | {rate:,.0f} | "
                      f"{_ratio(rate, base_rate)} | {latency:,.1f} | "
                      f"{_ratio(latency, base_latency)} | {results[0]['file_mb']:,.1f} | "
                      f"{max(r['peak_rss_mib'] for r in results):,.0f} | {loads} |")  # fmt: skip


def _median(values):
    values = list(values)
    return statistics.median(values) if values else None


def _ratio(value, base):
    return "-" if not base or value is None else f"{value / base:.2f}x"


# ------------------------------------------------------------------ the children


class TfliteRunner:
    """The TFLite files (a batch-64 one, a batch-1 one) with ``embed``'s interface, through
    ``run_tflite``: length-sorted batches as ``embed`` makes them, padded to the file's batch."""

    def __init__(self, path_batch, path_one, options, batch):
        from ai_edge_litert.interpreter import Interpreter

        from elmo_tf.config import ElmoConfig

        threads = len(os.sched_getaffinity(0))
        self.batch = batch
        self.interpreters = {
            batch: Interpreter(model_path=path_batch, num_threads=threads),
            1: Interpreter(model_path=path_one, num_threads=threads),
        }
        self.config = ElmoConfig.from_file(options)

    def embed(self, sentences, batch_size=64, **_):
        import numpy as np

        from elmo_tf import batch_to_ids
        from elmo_tf.export.litert import run_tflite
        from elmo_tf.models.length_batches import DEFAULT_MAX_BATCH_TOKENS, length_batches

        interpreter = self.interpreters[1 if len(sentences) == 1 else self.batch]
        longest = max(len(s) for s in sentences)
        results = {}
        lengths = [len(s) for s in sentences]
        for indices in length_batches(lengths, batch_size, DEFAULT_MAX_BATCH_TOKENS):
            outputs = run_tflite(interpreter, batch_to_ids([sentences[i] for i in indices]))
            for key, value in outputs.items():
                if key not in results:
                    shape = (len(sentences), longest, *value.shape[2:]) if value.ndim == 3 else (
                        len(sentences), *value.shape[1:])  # fmt: skip
                    results[key] = np.zeros(shape, value.dtype)
                if value.ndim == 3:
                    results[key][indices, : value.shape[1]] = value
                else:
                    results[key][indices] = value
        return results


def load_runner(runtime, precision, files, artefacts, batch):
    """The model of ``runtime`` in ``precision``, with ``embed``; and the file it ships."""
    if runtime in ("tensorflow", "torch"):
        import elmo_tf

        if runtime == "tensorflow":
            elmo_tf.configure_threads()
        model = elmo_tf.load_pretrained(*files, precision=precision)

        class NoCache:  # every pass encodes every token, as the exports do
            config = model.config

            def embed(self, sentences, batch_size=64):
                return model.embed(sentences, batch_size=batch_size, token_cache_size=0)

        return NoCache(), files[1]
    if runtime == "onnx":
        from elmo_tf.export.onnx import OnnxModel

        path = artefacts[f"onnx-{precision}"]
        return OnnxModel(path), path
    path_batch = artefacts[f"tflite-{precision}-b{batch}"]
    path_one = artefacts[f"tflite-{precision}-b1"]
    return TfliteRunner(path_batch, path_one, files[0], batch), path_batch


def _child(job, args):
    sentences = read_sentences(args.sentences)
    if job["mode"] == "fidelity":
        return _fidelity(job, sentences[: args.fidelity_n], args.batch)
    return _speed(job, sentences, args)


def _fidelity(job, sentences, batch):
    from elmo_tf.probes import fidelity, word_senses

    runtime = job["runtime"]
    reduced = PRECISIONS[runtime][1]
    examples = word_senses.load_examples()
    outputs, probe = {}, {}
    for precision in PRECISIONS[runtime]:
        runner, _ = load_runner(runtime, precision, job["files"], job["artefacts"], batch)
        outputs[precision] = runner.embed(sentences, batch_size=batch)
        probe[precision] = word_senses.nearest_neighbour_accuracy(runner, examples, batch)
        del runner
    table = fidelity.compare(outputs["float32"], outputs[reduced])
    return {
        "precision": reduced,
        "fidelity": {key: vars(row) for key, row in table.items()},
        "probe": probe,
    }


def _speed(job, sentences, args):
    runner, shipped = load_runner(
        job["runtime"], job["precision"], job["files"], job["artefacts"], args.batch
    )
    timed_sentences = sentences[: args.n]
    tokens = sum(len(s) for s in timed_sentences)
    run = timed(lambda: runner.embed(timed_sentences, batch_size=args.batch), args.repeats)
    one = sentences[args.n : args.n + args.latency_n + 3] or sentences[: args.latency_n + 3]
    for s in one[:3]:
        runner.embed([s])
    latency = Timing(seconds(lambda s=s: runner.embed([s])) for s in one[3:])
    return {
        "tokens_per_s": tokens / run.median,
        "tokens": tokens,
        "pass_seconds": list(run.seconds),
        "latency_ms": 1000 * latency.median,
        "file_mb": os.path.getsize(shipped) / 1e6,
        "peak_rss_mib": peak_rss_mib(),
        "load": os.getloadavg()[0],
    }


if __name__ == "__main__":
    sys.exit(main())
