#!/usr/bin/env python
"""How much a REST server grows when many large bodies arrive at once.

Starts ``elmo-tf serve`` (on 127.0.0.1, REST on a free port) on a model base path, sends
``--bodies`` concurrent ``:predict`` bodies of about ``--max-request-bytes`` each (just under
the limit, so each is read and parsed), waits for every answer, and prints the server's peak
resident memory (``VmHWM`` of ``/proc/PID/status``) and its ``VmRSS`` before and after.

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
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import re
import sys

from elmo_tf.testing.processes import ServerProcess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MAX_BODIES = 64
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-base-path", required=True, metavar="DIR")
    parser.add_argument("--shape", choices=sorted(PIECES), default="lists")
    parser.add_argument("--bodies", type=int, default=8, help="concurrent bodies (default 8)")
    parser.add_argument("--max-request-bytes", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--rounds", type=int, default=1, help="send the bodies this many times")
    args = parser.parse_args(argv)
    if not 1 <= args.bodies <= MAX_BODIES:
        parser.error(f"--bodies must be from 1 to {MAX_BODIES}")
    command = [
        sys.executable, "-m", "elmo_tf", "serve", "--model-base-path", args.model_base_path,
        "--port", "0", "--rest-port", "0", "--poll-seconds", "0",
        "--max-request-bytes", str(args.max_request_bytes),
    ]  # fmt: skip
    data = body(args.shape, args.max_request_bytes - 16)
    with ServerProcess(command) as server:
        found = re.search(r"REST 127\.0\.0\.1:(\d+)", server.first_line)
        if not found:
            sys.exit(f"the server did not start: {server.first_line!r}")
        port = int(found.group(1))
        before = memory(server.pid)
        answers = set()
        for _ in range(args.rounds):
            with concurrent.futures.ThreadPoolExecutor(args.bodies) as pool:
                futures = [pool.submit(post, port, data, 600) for _ in range(args.bodies)]
                answers |= {future.result() for future in futures}
        after = memory(server.pid)
    print(f"{args.bodies} x {len(data)} bytes ({args.shape}), {args.rounds} round(s)")
    for status, error in sorted(answers):
        print(f"  answered {status}: {error}")
    print(f"  peak RSS (VmHWM) before {before['VmHWM']:.0f} MiB, after {after['VmHWM']:.0f} MiB")
    print(f"  RSS (VmRSS)      before {before['VmRSS']:.0f} MiB, after {after['VmRSS']:.0f} MiB")
    print(f"  grew by (peak)   {after['VmHWM'] - before['VmRSS']:.0f} MiB")


if __name__ == "__main__":
    main()
