#!/usr/bin/env python
"""How much a REST server grows when many large bodies arrive at once, when clients send only
headers, and when a client leaves a large answer unread.

Starts ``elmo-tf serve`` (on 127.0.0.1, REST on a free port) on a model base path and prints the
server's resident memory (``VmRSS`` and peak ``VmHWM`` of ``/proc/PID/status``). One of:

- (default) sends ``--bodies`` concurrent ``:predict`` bodies of about ``--max-request-bytes``
  each (just under the limit, so each is read and parsed), waits for every answer;
- ``--headers-only N``: opens N connections that each send the headers of a ``:predict`` whose
  ``Content-Length`` is ``--max-request-bytes`` and no body, then closes them: the RSS before,
  while they are open, and after;
- ``--unread-answer ROWS``: asks for the embeddings of ROWS ten-token sentences and reads none
  of the answer: how long after the answer began the server cut the connection, against its
  ``--rest-timeout-seconds``, and the RSS meanwhile.

Bodies (``--shape``), each the worst of its kind for the parser's memory:

- ``lists``: ``{"instances": [[], [], ...]}``, one empty list per 3 bytes;
- ``words``: ``{"instances": ["ab", "ab", ...]}``, one short string per 5 bytes;
- ``ints``: ``{"signature_name": "char_ids", "inputs": [[[261, 261, ...]]]}``, one int per
  4 bytes (ints above 256 are not shared by CPython).

All are refused after parsing (over ``max_request_rows`` or malformed): the parse is what is
measured.

    python -m elmo_tf export saved-model /tmp/tiny_models --options \\
        tests/fixtures/tiny/options.json --weights tests/fixtures/tiny/weights.hdf5
    python benchmarks/rest_body_memory.py --model-base-path /tmp/tiny_models --shape lists
    python benchmarks/rest_body_memory.py --model-base-path /tmp/tiny_models --headers-only 128
    python benchmarks/rest_body_memory.py --model-base-path /tmp/tiny_models \\
        --unread-answer 512 --rest-timeout-seconds 2
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import re
import select
import socket
import sys
import time

from elmo_tf.testing.processes import ServerProcess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MAX_BODIES = 64
MAX_CONNECTIONS = 1000  # --headers-only: file descriptors, in this process and the server's
MAX_ROWS = 2048  # --unread-answer: the server's default max_request_rows
SETTLE_SECONDS = 30.0  # at most, for the server's RSS to stop changing before it is read
PIECES = {"lists": b"[]", "words": b'"ab"', "ints": b"261"}


def body(shape, size):
    """A JSON body of at most ``size`` bytes, made of ``shape``'s pieces."""
    piece = PIECES[shape]
    if shape == "ints":
        head, tail = b'{"signature_name": "char_ids", "inputs": [[[', b"]]]}"
    else:
        head, tail = b'{"instances": [', b"]}"
    count = (size - len(head) - len(tail)) // (len(piece) + 1)
    return head + b",".join([piece] * count) + tail


def memory(pid):
    """``{"VmHWM": MiB, "VmRSS": MiB}`` of process ``pid``."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        status = f.read()
    return {
        key: int(re.search(rf"^{key}:\s+(\d+) kB", status, re.M).group(1)) / 1024
        for key in ("VmHWM", "VmRSS")
    }


def post(port, data, timeout):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(
            "POST", "/v1/models/elmo:predict", data, {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read())["error"][:80]
    finally:
        connection.close()


def headers_only(port, count, length):
    """Opens ``count`` connections that send the headers of a body of ``length`` bytes and none
    of it; returns them."""
    head = (
        f"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
    ).encode()
    connections = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.sendall(head)
        connections.append(sock)
    return connections


def unread_answer(port, rows, timeout):
    """Asks for ``rows`` sentences' embeddings and reads nothing: ``(seconds from the answer's
    first byte to the server's cut, or None if it was not cut within ``timeout``)``."""
    body = json.dumps({"instances": [" ".join(["word"] * 10)] * rows}).encode()
    head = (
        f"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # takes almost nothing
        sock.settimeout(60)
        sock.connect(("127.0.0.1", port))
        sock.sendall(head + body)
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if not poller.poll(600_000):
            return None
        began = time.monotonic()  # the answer's first bytes are here, unread
        poller.modify(sock, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
        while time.monotonic() - began < timeout:
            if poller.poll(50):
                return time.monotonic() - began
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-base-path", required=True, metavar="DIR")
    parser.add_argument("--shape", choices=sorted(PIECES), default="lists")
    parser.add_argument("--bodies", type=int, default=8, help="concurrent bodies (default 8)")
    parser.add_argument("--max-request-bytes", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--rounds", type=int, default=1, help="send the bodies this many times")
    parser.add_argument("--rest-timeout-seconds", type=float, default=30.0, metavar="S")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--headers-only", type=int, metavar="N", help="N connections, headers only")
    mode.add_argument("--unread-answer", type=int, metavar="ROWS", help="leave an answer unread")
    args = parser.parse_args(argv)
    if not 1 <= args.bodies <= MAX_BODIES:
        parser.error(f"--bodies must be from 1 to {MAX_BODIES}")
    if args.headers_only is not None and not 1 <= args.headers_only <= MAX_CONNECTIONS:
        parser.error(f"--headers-only must be from 1 to {MAX_CONNECTIONS}")
    if args.unread_answer is not None and not 1 <= args.unread_answer <= MAX_ROWS:
        parser.error(f"--unread-answer must be from 1 to {MAX_ROWS}")
    command = [
        sys.executable, "-m", "elmo_tf", "serve", "--model-base-path", args.model_base_path,
        "--port", "0", "--rest-port", "0", "--poll-seconds", "0",
        "--max-request-bytes", str(args.max_request_bytes),
        "--rest-timeout-seconds", str(args.rest_timeout_seconds),
    ]  # fmt: skip
    with ServerProcess(command) as server:
        found = re.search(r"REST 127\.0\.0\.1:(\d+)", server.first_line)
        if not found:
            sys.exit(f"the server did not start: {server.first_line!r}")
        port = int(found.group(1))
        before = memory(server.pid)
        if args.headers_only is not None:
            measure_headers_only(server.pid, port, args, before)
        elif args.unread_answer is not None:
            measure_unread_answer(server.pid, port, args, before)
        else:
            measure_bodies(server.pid, port, args, before)


def settled(pid):
    """``memory(pid)`` once its RSS has stayed within 1 MiB for a second (or after
    ``SETTLE_SECONDS``)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    last = memory(pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = memory(pid)
        if abs(now["VmRSS"] - last["VmRSS"]) <= 1:
            return now
        last = now
    return last


def measure_headers_only(pid, port, args, before):
    connections = headers_only(port, args.headers_only, args.max_request_bytes)
    held = settled(pid)
    for sock in connections:
        sock.close()
    after = settled(pid)
    grew = held["VmRSS"] - before["VmRSS"]
    print(f"{args.headers_only} connections, headers declaring {args.max_request_bytes} bytes")
    print(f"  RSS (VmRSS) before        {before['VmRSS']:6.0f} MiB")
    print(f"  with them open            {held['VmRSS']:6.0f} MiB (grew by {grew:.0f})")
    print(f"  after they closed         {after['VmRSS']:6.0f} MiB")
    print(f"  peak (VmHWM)              {after['VmHWM']:6.0f} MiB")


def measure_unread_answer(pid, port, args, before):
    timeout = args.rest_timeout_seconds
    cut = unread_answer(port, args.unread_answer, timeout + 60)
    after = memory(pid)
    print(f"an answer of {args.unread_answer} rows left unread, --rest-timeout-seconds {timeout:g}")
    if cut is None:
        print(f"  not cut within {timeout + 60:g} s of its first byte")
    else:
        print(f"  cut {cut:.1f} s after its first byte arrived")
    print(f"  RSS (VmRSS) before {before['VmRSS']:.0f} MiB, after {after['VmRSS']:.0f} MiB;")
    print(f"  peak (VmHWM) {after['VmHWM']:.0f} MiB")


def measure_bodies(pid, port, args, before):
    data = body(args.shape, args.max_request_bytes - 16)
    answers = set()
    for _ in range(args.rounds):
        with concurrent.futures.ThreadPoolExecutor(args.bodies) as pool:
            futures = [pool.submit(post, port, data, 600) for _ in range(args.bodies)]
            answers |= {future.result() for future in futures}
    after = memory(pid)
    print(f"{args.bodies} x {len(data)} bytes ({args.shape}), {args.rounds} round(s)")
    for status, error in sorted(answers):
        print(f"  answered {status}: {error}")
    print(f"  peak RSS (VmHWM) before {before['VmHWM']:.0f} MiB, after {after['VmHWM']:.0f} MiB")
    print(f"  RSS (VmRSS)      before {before['VmRSS']:.0f} MiB, after {after['VmRSS']:.0f} MiB")
    print(f"  grew by (peak)   {after['VmHWM'] - before['VmRSS']:.0f} MiB")


if __name__ == "__main__":
    main()
