#!/usr/bin/env python
"""REST front ends compared by measurement: our ``http.server`` one against aiohttp.

One server process holds ONE ``ModelServer`` (gRPC, and our REST API of
``elmo_tf/serving/rest_api.py`` on ``http.server.ThreadingHTTPServer``) and, beside it on
another port, a prototype REST front end on aiohttp (``pip install aiohttp``) that calls the
same ``ModelServer``: it runs ``RestHandler``'s own ``_predict``, ``_status`` and
``_metadata`` through a stand-in object, so the JSON in and out, the errors and the batching
are those of our REST API; only the HTTP layer differs. The prototype lives here, not in the
library. A third front end, ``http.server-nagle``, is ours as it was before ``TCP_NODELAY``
was set on its connections (``RestHandler`` writes the headers and the body in two ``send``
calls, so with Nagle's algorithm on, the client's delayed ACK holds each answer's end back
about 40 ms on Linux): the before/after of that one setting.

The load comes from this (parent) process, so the clients do not share the server's GIL: N
client threads for T seconds, each on one persistent HTTP/1.1 keep-alive connection
(``http.client``), each request a one-sentence ``{"instances": [sentence]}`` predict (or,
with ``--request status``, ``GET /v1/models/NAME``: the HTTP layer alone). The front ends
take turns in one run, in reversed order every other repeat (``--repeats``), after an
untimed warm-up of each, and the table gives the median over the repeats of: requests,
errors, throughput, p50/p99 latency, the server's CPU time per request (user + system of the
whole server process, from ``/proc/PID/stat``), its resident memory (``VmRSS``) and thread
count at the end of the run.
All front ends live in the one server process, so RSS and threads are the process's.

Model: ``--model-base-path DIR`` (an ``elmo-tf export saved-model`` directory), else
``--model NAME_OR_DIR`` (a preset such as ``sotu``, the default, or a directory with
``options.json`` and ``weights.hdf5``; ``python tests/fixtures/make_weights.py small
/tmp/elmo_weights`` writes ``/tmp/elmo_weights/small``), exported to a temporary directory.
Sentences: ``--sentences FILE`` (one per line), else ``examples/sentences.txt``.

    python benchmarks/rest_frontends.py --model /tmp/elmo_weights/small \\
        --sentences benchmarks/results/sotu_1000.txt --threads 32 --seconds 60 --repeats 3
    python benchmarks/rest_frontends.py --quick          # smoke test: 4 threads x 5 s, once
"""

import argparse
import asyncio
import concurrent.futures
import http.client
import json
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# serving/loadtest.py is a script, not in a package: its directory goes on the path to import it.
sys.path.insert(0, os.path.join(ROOT, "serving"))
import loadtest  # noqa: E402 - ServerProcess, proc_stats, percentile, format_table

FRONT_ENDS = ("http.server", "aiohttp", "http.server-nagle")
MAX_SECONDS = 300
MAX_THREADS = 64
MAX_REPEATS = 10
STARTUP_SECONDS = 300  # export and load of a large model included
REQUEST_TIMEOUT = 60.0


# --------------------------------------------------------------------------------------------
# Server process: one ModelServer (gRPC + http.server REST) and the aiohttp front end.
# --------------------------------------------------------------------------------------------


class _Call:
    """Stands in for a ``RestHandler`` so that its ``_predict``, ``_status`` and ``_metadata``
    run unchanged: ``server`` has the ``model_server``, ``prediction_service`` and
    ``model_service`` a ``RestServer`` has."""

    def __init__(self, server, body=None, alive=None):
        self.server = server
        self._body = body
        self._alive = alive

    def _read_json(self):
        return self._body

    def _client_connected(self):
        return self._alive()


class AiohttpFrontEnd:
    """TF Serving's REST API for a ``ModelServer`` on aiohttp, in a thread of its own.

    The event loop does the HTTP; the blocking work (JSON decode, ``ModelServer.predict`` as
    ``RestHandler._predict`` calls it, JSON encode) runs in a pool of ``workers`` threads.
    Limits as ours: a POST needs a ``Content-Length`` (else 400), one over ``max_bytes`` is
    answered 413 unread (also on ``Expect: 100-continue``) and the connection closed at once;
    a connection silent, idle, or with a request line or headers unfinished for ``timeout``
    seconds is closed (aiohttp's keep-alive timer); a client that has closed its connection is
    not computed (``alive``); the listen backlog is ``backlog``. Unlike ours: a body not sent
    within ``timeout`` seconds is answered 408 before the close (ours closes without an
    answer); a malformed ``Content-Length`` gets aiohttp's own plain-text 400; an unknown
    method a JSON 501 (ours: ``http.server``'s HTML 501).
    """

    def __init__(self, model_server, host, max_bytes, timeout, workers, backlog=1024):
        from elmo_tf.serving import grpc_api

        self.model_server = model_server
        self.prediction_service = grpc_api.PredictionServicer(model_server)
        self.model_service = grpc_api.ModelServicer(model_server)
        self.max_request_bytes = max_bytes
        self.timeout_seconds = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="aio")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="aiohttp")
        self._thread.daemon = True
        self._thread.start()
        self._runner, self.port = asyncio.run_coroutine_threadsafe(
            self._start(host, backlog), self._loop
        ).result(60)

    async def _start(self, host, backlog):
        from aiohttp import web

        app = web.Application(client_max_size=self.max_request_bytes)
        app.router.add_route("*", "/{tail:.*}", self._handle, expect_handler=self._expect)
        runner = web.AppRunner(
            app,
            access_log=None,
            keepalive_timeout=self.timeout_seconds,
            lingering_time=0,  # a refused body is not drained (10 s by default): close at once
            handle_signals=False,
        )
        await runner.setup()
        site = web.TCPSite(runner, host, 0, backlog=backlog)
        await site.start()
        return runner, runner.addresses[0][1]

    def stop(self):
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- requests ------------------------------------------------------------------------

    async def _expect(self, request):
        """Refuses a body over the limit before the client sends it, else aiohttp's default
        (``100 Continue``)."""
        from aiohttp.web_urldispatcher import _default_expect_handler

        length = request.content_length
        if length is not None and length > self.max_request_bytes:
            return self._response(
                413, {"error": _too_large(length, self.max_request_bytes)}, close=True
            )
        return await _default_expect_handler(request)

    async def _handle(self, request):
        from elmo_tf.serving import rest_api

        path = request.raw_path.split("?")[0]
        if request.method == "GET":
            match = rest_api.GET_PATH.fullmatch(path)
            if match is None:
                return self._response(404, {"error": f"Malformed request: GET {request.raw_path}"})
            handler = rest_api.RestHandler
            method = handler._metadata if match["metadata"] else handler._status
            return await self._run(lambda: method(_Call(self), *_name_version(match)))
        if request.method != "POST":
            return self._response(501, {"error": f"Unsupported method ({request.method!r})"})
        match = rest_api.POST_PATH.fullmatch(path)
        if match is None:
            return self._response(404, {"error": f"Malformed request: POST {request.raw_path}"})
        if match["method"] != "predict":
            return self._response(501, {"error": f"method '{match['method']}' is not served"})
        if request.headers.get("Transfer-Encoding"):
            message = "send the body with a Content-Length, not a Transfer-Encoding"
            return self._response(400, {"error": message}, close=True)
        length = request.content_length  # aiohttp answers 400 itself to a malformed one
        if length is None:
            message = "a POST needs a Content-Length header"
            return self._response(400, {"error": message}, close=True)
        if length > self.max_request_bytes:
            error = _too_large(length, self.max_request_bytes)
            return self._response(413, {"error": error}, close=True)
        try:
            data = await asyncio.wait_for(request.read(), self.timeout_seconds)
        except (TimeoutError, asyncio.TimeoutError, ConnectionError):
            return self._response(408, {"error": "the body was not sent in time"}, close=True)

        def alive():
            transport = request.transport  # None once the connection is lost
            return transport is not None and not transport.is_closing()

        def predict():
            call = _Call(self, rest_api.parse_json_body(data), alive)
            return rest_api.RestHandler._predict(call, *_name_version(match))

        return await self._run(predict)

    async def _run(self, method):
        """``method()`` in the pool, answered as ``RestHandler._answer`` does."""
        loop = asyncio.get_running_loop()
        status, data = await loop.run_in_executor(self._pool, self._answer_bytes, method)
        return self._response(status, data)

    def _answer_bytes(self, method):
        from elmo_tf.serving.errors import ServingError

        try:
            answer = method()
        except ServingError as e:
            status, body = e.http_status, {"error": e.message}
        except Exception:  # noqa: BLE001 - a bug answers 500 and the server stays up
            logging.getLogger("serving").exception("internal error")
            status, body = 500, {"error": "internal error; see the server log"}
        else:
            status, body = 200, answer
        return status, json.dumps(body).encode("utf-8")

    def _response(self, status, body, close=False):
        from aiohttp import web

        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        response = web.Response(body=data, status=status, content_type="application/json")
        if close:
            response.force_close()
        return response


def _name_version(match):
    return match["name"], None if match["version"] is None else int(match["version"])


def _too_large(length, limit):
    return f"request of {length} bytes is over the limit of {limit} bytes (--max-request-bytes)"


def start_nagle_rest(model_server, options):
    """A second ``RestServer`` of ``model_server`` whose connections keep Nagle's algorithm
    (``socketserver``'s ``disable_nagle_algorithm`` off): ours before ``TCP_NODELAY``."""
    from elmo_tf.serving import grpc_api
    from elmo_tf.serving.rest_api import RestHandler, RestServer

    class NagleHandler(RestHandler):
        disable_nagle_algorithm = False

    rest = RestServer(
        (options.host, 0),
        model_server,
        grpc_api.PredictionServicer(model_server),
        grpc_api.ModelServicer(model_server),
        options.max_request_bytes,
        options.rest_timeout_seconds,
    )
    rest.RequestHandlerClass = NagleHandler
    threading.Thread(target=rest.serve_forever, name="rest-nagle", daemon=True).start()
    return rest


def _interrupt(*_):
    raise KeyboardInterrupt


def serve(args):
    """The server process: prints one JSON line with its ports, serves until stdin closes."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, ROOT)
    logging.basicConfig(level=logging.WARNING)
    from elmo_tf.serving.options import BatchingOptions
    from elmo_tf.serving.server import ModelServer, ServerOptions

    base, exported = args.model_base_path, None
    if base is None:
        import elmo_tf
        from elmo_tf.export.saved_model import export_saved_model

        exported = tempfile.mkdtemp(prefix="elmo-rest-bench-")
        base = os.path.join(exported, "elmo")
        export_saved_model(elmo_tf.ELMo.from_preset(args.model), base)
    batching = BatchingOptions(
        max_batch_size=args.max_batch_size, batch_timeout_micros=args.batch_timeout_micros
    )
    if args.no_batching:
        batching = None
    options = ServerOptions(
        base,
        model_name=args.model_name,
        port=0,
        rest_port=0,
        poll_seconds=0,
        batching=batching,
        rest_timeout_seconds=args.rest_timeout_seconds,
    )
    server = ModelServer(options).start()
    front = AiohttpFrontEnd(
        server,
        options.host,
        options.max_request_bytes,
        options.rest_timeout_seconds,
        args.aiohttp_workers,
    )
    nagle = start_nagle_rest(server, options)
    ports = {
        "grpc": server.port,
        "http.server": server.rest_port,
        "aiohttp": front.port,
        "http.server-nagle": nagle.server_address[1],
    }
    print(json.dumps({"ports": ports, "model_base_path": base}), flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        sys.stdin.readline()  # the parent closes stdin to stop us
    except (KeyboardInterrupt, ValueError, OSError):
        pass
    front.stop()
    nagle.stop(time.monotonic() + 5)
    server.stop(grace=5)
    if exported:
        shutil.rmtree(exported, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Load (parent process): stdlib only.
# --------------------------------------------------------------------------------------------


class BenchServer(loadtest.ServerProcess):
    """This script with ``--serve`` in a child process; stopped by closing its stdin."""

    def __init__(self, args):
        command = [sys.executable, os.path.abspath(__file__), "--serve"]
        command += ["--model-name", args.model_name, "--aiohttp-workers", str(args.aiohttp_workers)]
        command += ["--max-batch-size", str(args.max_batch_size)]
        command += ["--batch-timeout-micros", str(args.batch_timeout_micros)]
        command += ["--rest-timeout-seconds", str(args.rest_timeout_seconds)]
        if args.model_base_path:
            command += ["--model-base-path", args.model_base_path]
        else:
            command += ["--model", args.model]
        if args.no_batching:
            command.append("--no-batching")
        self.log = tempfile.NamedTemporaryFile("w+", prefix="rest-bench-server-", suffix=".log")
        paths = [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        super().__init__(
            command,
            stop_by="stdin",
            startup_seconds=STARTUP_SECONDS,
            stderr=self.log,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)),
        )
        if not self.first_line.strip():
            super().stop()
            self.log.seek(0)  # the log is read before stop() closes (and deletes) it
            tail = self.log.read()[-4000:]
            self.log.close()
            sys.exit(f"rest_frontends.py: the server did not start; its log ends:\n{tail}")
        ready = json.loads(self.first_line)
        self.ports = ready["ports"]
        self.model_base_path = ready["model_base_path"]

    def stop(self):
        super().stop()
        self.log.close()


def make_requests(args, sentences):
    """``(method, path, body or None)`` per request, cycled through by the clients."""
    if args.request == "status":
        return [("GET", f"/v1/models/{args.model_name}", None)]
    path = f"/v1/models/{args.model_name}:predict"
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

    cpu_start, _, _ = loadtest.proc_stats(pid)
    start = time.monotonic()
    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 2 * REQUEST_TIMEOUT)
    wall = time.monotonic() - start
    cpu_end, rss, server_threads = loadtest.proc_stats(pid)
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
    seconds = loadtest.percentile(values, q)
    return None if seconds is None else 1000 * seconds


def check_same_answers(ports, requests):
    """Both front ends answer a predict, a status and two errors alike (else exits)."""
    probes = [requests[0], ("GET", "/v1/models/nope", None), ("POST", "/v1/models/x:predict", b"{")]
    if requests[0][0] == "POST":
        probes.append(("GET", requests[0][1].split(":")[0], None))
    for method, path, body in probes:
        answers = {}
        for name in FRONT_ENDS:
            connection = http.client.HTTPConnection("127.0.0.1", ports[name], timeout=60)
            connection.request(method, path, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answers[name] = response.status, json.loads(response.read())
            connection.close()
        if len({json.dumps(a, sort_keys=True) for a in answers.values()}) != 1:
            summary = {name: (s, str(b)[:200]) for name, (s, b) in answers.items()}
            sys.exit(f"rest_frontends.py: the front ends answer {method} {path} unlike: {summary}")


COLUMNS = (
    ("front end", "front_end", "{}"),
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
    """One row per front end: the median of each metric over its runs."""
    rows = []
    for name in FRONT_ENDS:
        own = [run for run in runs if run["front_end"] == name]
        if not own:
            continue
        row = {"front_end": name, "runs": len(own)}
        for _, key, _ in COLUMNS[2:]:
            values = [run[key] for run in own if run[key] is not None]
            row[key] = statistics.median(values) if values else None
        rows.append(row)
    return rows


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model-base-path", metavar="DIR", help="an exported model to serve")
    parser.add_argument(
        "--model", default="sotu", metavar="NAME_OR_DIR", help="else export this (default sotu)"
    )
    parser.add_argument("--model-name", default="elmo")
    parser.add_argument("--sentences", metavar="FILE", help="one sentence per line")
    parser.add_argument("--threads", type=int, default=32, help="client threads (default 32)")
    parser.add_argument("--seconds", type=float, default=60.0, help="per run (default 60)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per front end (default 3)")
    parser.add_argument(
        "--warmup-seconds", type=float, default=10.0, help="untimed, per front end (default 10)"
    )
    parser.add_argument("--request", choices=("predict", "status"), default="predict")
    parser.add_argument(
        "--front-ends", default=",".join(FRONT_ENDS), help=f"subset of {','.join(FRONT_ENDS)}"
    )
    parser.add_argument(
        "--aiohttp-workers", type=int, default=64, help="aiohttp's pool for blocking work"
    )
    parser.add_argument("--no-batching", action="store_true")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout-micros", type=int, default=2000)
    parser.add_argument(
        "--rest-timeout-seconds", type=float, default=30.0, help="idle/slow client (default 30)"
    )
    parser.add_argument("--quick", action="store_true", help="4 threads x 5 s, 1 repeat")
    parser.add_argument("--json", metavar="FILE", help="also write every run here")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.threads, args.seconds, args.repeats, args.warmup_seconds = 4, 5.0, 1, 1.0
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be in (0, {MAX_SECONDS}]")
    if not 0 < args.threads <= MAX_THREADS:
        parser.error(f"--threads must be in [1, {MAX_THREADS}]")
    if not 0 < args.repeats <= MAX_REPEATS:
        parser.error(f"--repeats must be in [1, {MAX_REPEATS}]")
    if not 0 <= args.warmup_seconds <= MAX_SECONDS:
        parser.error(f"--warmup-seconds must be in [0, {MAX_SECONDS}]")
    args.front_ends = [f.strip() for f in args.front_ends.split(",") if f.strip()]
    if not args.front_ends or set(args.front_ends) - set(FRONT_ENDS):
        parser.error(f"--front-ends: a subset of {','.join(FRONT_ENDS)}")
    if args.sentences and not os.path.isfile(args.sentences):
        parser.error(f"--sentences {args.sentences}: no such file")
    if args.model_base_path and not os.path.isdir(args.model_base_path):
        parser.error(f"--model-base-path {args.model_base_path}: no such directory")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.serve:
        return serve(args)
    path = args.sentences or os.path.join(ROOT, "examples", "sentences.txt")
    with open(path, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    requests = make_requests(args, sentences)
    runs = []
    with BenchServer(args) as server:
        print(
            f"server pid {server.pid}, model {server.model_base_path}, ports {server.ports}; "
            f"{args.threads} threads x {args.seconds:g} s x {args.repeats} repeat(s), "
            f"'{args.request}' requests ({len(requests)} distinct, from {path})",
            flush=True,
        )
        check_same_answers(server.ports, requests)
        for name in args.front_ends:
            if args.warmup_seconds:
                run_load(server.ports[name], requests, args.threads, args.warmup_seconds)
        for repeat in range(args.repeats):
            order = args.front_ends if repeat % 2 == 0 else args.front_ends[::-1]
            for name in order:
                run = run_load(server.ports[name], requests, args.threads, args.seconds, server.pid)
                run = {"front_end": name, "repeat": repeat, **run}
                runs.append(run)
                print(
                    f"  {name:20s} repeat {repeat}: {run['requests']} ok, {run['errors']} "
                    f"errors{_kinds(run['errors_by_kind'])}, {run['requests_per_s']:.1f} req/s, "
                    f"p50 {_ms(run['p50_ms'])}, p99 {_ms(run['p99_ms'])}, "
                    f"{run['connections']} connections",
                    flush=True,
                )
    print()
    print(loadtest.format_table(COLUMNS, medians(runs), style="markdown"))
    if args.json:
        config = {k: v for k, v in vars(args).items() if k != "serve"}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"config": config, "runs": runs}, f, indent=2)
    return 1 if any(run["errors"] for run in runs) else 0


def _kinds(errors):
    return f" {errors}" if errors else ""


def _ms(value):
    return "n/a" if value is None else f"{value:.1f} ms"


if __name__ == "__main__":
    sys.exit(main())
