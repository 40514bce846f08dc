#!/usr/bin/env python
"""REST front ends compared by measurement, side by side in one run: this checkout's against a
baseline checkout's (an earlier commit, as ``git worktree add``), each served by its own
``elmo-tf serve`` process on the same exported model.

Each server is ``python -m elmo_tf serve`` with ``PYTHONPATH`` naming its checkout, gRPC and
REST on ephemeral ports, dynamic batching on. The load comes from this process: N client
threads for T seconds, each on one persistent HTTP/1.1 keep-alive connection
(``http.client``), each request a one-sentence ``{"instances": [sentence]}`` predict (or, with
``--request status``, ``GET /v1/models/elmo``: the HTTP layer alone). The front ends take turns,
in reversed order every other repeat, after an untimed warm-up of each; the table gives the
median over the repeats of: requests, errors, throughput, p50/p99 latency, the server's CPU
time per request (user + system, ``/proc/PID/stat``), its resident memory and thread count at
the end of the run.

    git worktree add /tmp/baseline 73e8b79      # the http.server front end
    python benchmarks/rest_frontends.py --baseline-tree /tmp/baseline --threads 4,32 \\
        --seconds 20 --repeats 3 --sentences sotu_1000_s7.txt
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from elmo_tf.testing.processes import ServerProcess, format_table, percentile, proc_stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_SECONDS = 300
MAX_THREADS = 64
MAX_REPEATS = 10
STARTUP_SECONDS = 300
REQUEST_TIMEOUT = 60.0


class Server(ServerProcess):
    """``elmo-tf serve`` of checkout ``tree`` on ``model_base_path``, stopped by SIGTERM."""

    def __init__(self, tree, model_base_path):
        command = [sys.executable, "-m", "elmo_tf", "serve", "--model-base-path", model_base_path,
                   "--port", "0", "--rest-port", "0", "--poll-seconds", "0"]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=tree, TF_CPP_MIN_LOG_LEVEL="2")
        super().__init__(
            command, startup_seconds=STARTUP_SECONDS, env=env, cwd=tempfile.gettempdir()
        )
        match = re.search(r"REST \S+:(\d+)", self.first_line)
        if match is None:
            self.stop()
            sys.exit(f"rest_frontends.py: the server of {tree} did not start (run elmo-tf serve)")
        self.port = int(match.group(1))


def make_requests(args, sentences):
    """``(method, path, body or None)`` per request, cycled through by the clients."""
    if args.request == "status":
        return [("GET", "/v1/models/elmo", None)]
    path = "/v1/models/elmo:predict"
    return [
        ("POST", path, json.dumps({"instances": [s]}).encode("utf-8")) for s in sentences[:1000]
    ]


def run_load(port, requests, threads, seconds, pid=None):
    """``threads`` clients on keep-alive connections to ``port`` for ``seconds``; metrics."""
    deadline = time.monotonic() + seconds
    results = [None] * threads
    headers = {"Content-Type": "application/json"}

    def client(index):
        latencies, errors, connections = [], {}, 0
        connection = None
        n = index
        while time.monotonic() < deadline:
            method, path, body = requests[n % len(requests)]
            n += threads
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
                connections += 1
            start = time.perf_counter()
            try:
                connection.request(method, path, body, headers)
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as e:
                kind = type(e).__name__
                errors[kind] = errors.get(kind, 0) + 1
                connection.close()
                connection = None
                continue
            elapsed = time.perf_counter() - start
            if response.status == 200:
                latencies.append(elapsed)
            else:
                kind = f"HTTP {response.status}"
                errors[kind] = errors.get(kind, 0) + 1
            if response.will_close:
                connection.close()
                connection = None
        if connection is not None:
            connection.close()
        results[index] = latencies, errors, connections

    cpu_start, _, _ = proc_stats(pid)
    start = time.monotonic()
    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 2 * REQUEST_TIMEOUT)
    wall = time.monotonic() - start
    cpu_end, rss, server_threads = proc_stats(pid)
    latencies, errors, connections = [], {}, 0
    for result in results:
        if result is None:  # a thread still stuck in a request
            errors["stuck"] = errors.get("stuck", 0) + 1
            continue
        latencies += result[0]
        connections += result[2]
        for kind, count in result[1].items():
            errors[kind] = errors.get(kind, 0) + count
    latencies.sort()
    ok = len(latencies)
    cpu = None if cpu_start is None or cpu_end is None or not ok else cpu_end - cpu_start
    return {
        "requests": ok,
        "errors": sum(errors.values()),
        "errors_by_kind": errors,
        "connections": connections,
        "seconds": round(wall, 3),
        "requests_per_s": ok / wall,
        "p50_ms": _ms_percentile(latencies, 50),
        "p99_ms": _ms_percentile(latencies, 99),
        "server_cpu_ms_per_request": None if cpu is None else 1000 * cpu / ok,
        "server_rss_mib": rss,
        "server_threads": server_threads,
    }


def _ms_percentile(values, q):
    """The ``q``-th percentile, in ms, of sorted ``values`` (seconds); ``None`` if none."""
    seconds = percentile(values, q)
    return None if seconds is None else 1000 * seconds


COLUMNS = (
    ("front end", "front_end", "{}"),
    ("clients", "threads", "{}"),
    ("runs", "runs", "{}"),
    ("requests", "requests", "{:.0f}"),
    ("errors", "errors", "{:.0f}"),
    ("req/s", "requests_per_s", "{:.1f}"),
    ("p50 ms", "p50_ms", "{:.1f}"),
    ("p99 ms", "p99_ms", "{:.1f}"),
    ("server CPU ms/req", "server_cpu_ms_per_request", "{:.2f}"),
    ("server RSS MiB", "server_rss_mib", "{:.0f}"),
    ("server threads", "server_threads", "{:.0f}"),
)


def medians(runs):
    """One row per front end and client count: the median of each metric over its runs."""
    rows = []
    for key in dict.fromkeys((run["front_end"], run["threads"]) for run in runs):
        own = [run for run in runs if (run["front_end"], run["threads"]) == key]
        row = {"front_end": key[0], "threads": key[1], "runs": len(own)}
        for _, name, _ in COLUMNS[3:]:
            values = [run[name] for run in own if run[name] is not None]
            row[name] = statistics.median(values) if values else None
        rows.append(row)
    return rows


def export_model(model, directory):
    """``elmo-tf export saved-model`` of ``model`` (a preset or directory) into ``directory``."""
    command = [
        sys.executable,
        "-m",
        "elmo_tf",
        "export",
        "saved-model",
        directory,
        "--model",
        model,
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return directory


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline-tree", required=True, metavar="DIR",
                        help="a checkout whose front end to compare with")  # fmt: skip
    parser.add_argument("--model-base-path", metavar="DIR", help="an exported model to serve")
    parser.add_argument("--model", default="sotu", help="else export this (default sotu)")
    parser.add_argument("--sentences", metavar="FILE", help="one sentence per line")
    parser.add_argument("--threads", default="4,32", help="client counts (default 4,32)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup-seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--request", choices=("predict", "status"), default="predict")
    parser.add_argument("--json", metavar="FILE", help="also write every run here")
    args = parser.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",")]
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be in (0, {MAX_SECONDS}]")
    if not all(0 < t <= MAX_THREADS for t in args.threads):
        parser.error(f"--threads must be in [1, {MAX_THREADS}]")
    if not 0 < args.repeats <= MAX_REPEATS:
        parser.error(f"--repeats must be in [1, {MAX_REPEATS}]")
    if not os.path.isdir(os.path.join(args.baseline_tree, "elmo_tf")):
        parser.error(f"--baseline-tree {args.baseline_tree}: no elmo_tf package in it")
    return args


def main(argv=None):
    args = parse_args(argv)
    path = args.sentences or os.path.join(ROOT, "examples", "sentences.txt")
    with open(path, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    requests = make_requests(args, sentences)
    trees = {"this checkout": ROOT, "baseline": os.path.abspath(args.baseline_tree)}
    runs = []
    with tempfile.TemporaryDirectory() as directory:
        model = args.model_base_path or export_model(args.model, os.path.join(directory, "elmo"))
        servers = {name: Server(tree, model) for name, tree in trees.items()}
        try:
            for server in servers.values():
                run_load(server.port, requests, max(args.threads), args.warmup_seconds)
            for repeat in range(args.repeats):
                order = list(servers) if repeat % 2 == 0 else list(servers)[::-1]
                for threads in args.threads:
                    for name in order:
                        server = servers[name]
                        run = run_load(server.port, requests, threads, args.seconds, server.pid)
                        runs.append({"front_end": name, "threads": threads, **run})
                        rate, p99 = run["requests_per_s"], run["p99_ms"]
                        print(f"  {name} {threads} clients: {rate:.1f} req/s, p99 {p99:.1f} ms, "
                              f"{run['errors']} errors", flush=True)  # fmt: skip
        finally:
            for server in servers.values():
                server.stop()
    print()
    print(format_table(COLUMNS, medians(runs), style="markdown"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"config": vars(args), "runs": runs}, f, indent=2)
    return 1 if any(run["errors"] for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
