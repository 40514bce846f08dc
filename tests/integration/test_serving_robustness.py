"""Hostile input, faults and load: the server stays up, bounded and clean.

Requests that declare huge shapes, bodies that nest deep or lie about their length, bodies the
server does not read (request smuggling), many large bodies at once, client strings of 100 KB
in errors, requests larger than the batch queue, clients that go away, idle connections at
shutdown, versions that fail to load. Servers listen on 127.0.0.1 with ephemeral ports and
are stopped by finalizers; every call has a timeout.
"""

import concurrent.futures
import contextlib
import gzip
import json
import logging
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib

import grpc
import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_reordered
from support.paths import ROOT as REPOSITORY
from support.serving_gate import gate_servable_run
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from elmo_tf.cli.main import main
from elmo_tf.errors import ListenError
from elmo_tf.formats.embedding_file import read_sentences
from elmo_tf.serving import addresses, rest_api, rest_protocol
from elmo_tf.serving.client import make_request
from elmo_tf.serving.in_flight import ReceivedBodies, WrittenAnswers
from elmo_tf.serving.model_manager import ModelManager, State
from elmo_tf.serving.options import BatchingOptions
from elmo_tf.serving.request_limits import BodyBudget
from elmo_tf.serving.server import ModelServer, ServerOptions

TIMEOUT = 30  # seconds, for every call


CUT_OFF = 10  # seconds within which a 1 s REST deadline must have cut a client off


LIMITS = dict(max_request_rows=16, max_tokens_per_row=12, max_request_tokens=64, max_token_bytes=40)


BATCHING = BatchingOptions(
    max_batch_size=4, batch_timeout_micros=1000, max_enqueued_batches=6, num_batch_threads=1
)  # the queue holds 24 rows; the limits allow 16 rows


ROOT = str(REPOSITORY)


@pytest.fixture(scope="module")
def base_path(tiny_export):
    """A model base path holding version 1 of the tiny model (shared: never changed)."""
    return tiny_export


def _start(request, **kwargs):
    options = ServerOptions(kwargs.pop("base"), port=0, rest_port=0, poll_seconds=0, **kwargs)
    server = ModelServer(options)
    request.addfinalizer(lambda: server.stop(grace=5))
    return server.start()


@pytest.fixture(scope="module")
def server(request, base_path):
    return _start(request, base=str(base_path), batching=BATCHING, **LIMITS)


@pytest.fixture(scope="module")
def quick_server(request, base_path):
    """A server whose REST timeout is 1 s (for the slow tests of deadlines)."""
    return _start(request, base=str(base_path), rest_timeout_seconds=1.0)


@pytest.fixture(scope="module")
def stub(request, server):
    channel = grpc.insecure_channel(
        f"127.0.0.1:{server.port}", options=[("grpc.max_receive_message_length", -1)]
    )
    request.addfinalizer(channel.close)
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _still_up(stub):
    response = stub.Predict(make_request(["still up ."]), timeout=TIMEOUT)
    assert list(tf.make_ndarray(response.outputs["sequence_len"])) == [3]


def test_a_declared_shape_is_checked_before_allocating_over_grpc(stub):
    """One case of the table (tests/model/test_serving_requests.py) over a real channel: a
    ~100-byte request declaring [2**40] sentences, refused before anything is allocated."""
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[b"a"])
    proto.tensor_shape.dim.add(size=2**40)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "elmo"
    request.model_spec.signature_name = "default"
    request.inputs["sentences"].CopyFrom(proto)
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(request, timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert f"{2**40} rows" in e.value.details()
    assert time.monotonic() - start < 20
    _still_up(stub)


def _raw_http(port, head, body=b""):
    """``(status, body)`` of one raw HTTP exchange on a fresh connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < _expected(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def _expected(data):
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(head) + 4 + int(line.split(b":")[1])
    return len(data) + 1


def _post(port, body, headers=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Length": str(len(data)), **(headers or {})}
    lines = ["POST /v1/models/elmo:predict HTTP/1.1", "Host: x", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items() if v is not None]
    return _raw_http(port, "\r\n".join(lines) + "\r\n", data)


# What the HTTP layer decides (a body's length and coding), and one body case end to end;
# the bodies themselves: tests/model/test_serving_requests.py.
REST_CASES = {
    "a negative Content-Length": (
        b'{"instances": ["a"]}',
        {"Content-Length": "-5"},
        400,
        "Invalid character in Content-Length",
    ),
    "no Content-Length": (
        b"",
        {"Content-Length": None},
        400,
        "a POST needs a Content-Length header",
    ),
    "a key given twice": (
        b'{"instances": ["a"], "signature_name": "tokens", "instances": ["b c"]}',
        {},
        400,
        "gives the key 'instances' twice in one object",
    ),
    "a body over the limit, not sent": (
        b"",
        {"Content-Length": str(10**12)},
        413,
        "over the limit",
    ),
    "a body over the limit once decoded (a gzip bomb)": (
        gzip.compress(b" " * (17 * 1024 * 1024)),
        {"Content-Encoding": "gzip"},
        413,
        "request body decodes to more than 16777216 bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(REST_CASES))
def test_rest_hostile_bodies(case, server, stub):
    body, headers, status, fragment = REST_CASES[case]
    got, answer = _post(server.rest_port, body, headers)
    assert got == status, answer
    error = json.loads(answer)["error"]
    assert fragment in error and len(error) < 300, error
    _still_up(stub)


def _exchange(port, raw, idle=2.0, closed=None, status_lines=None):
    """The answers ``[(status, headers, body)]`` to bytes ``raw`` sent on one connection, read
    until the server closes it or sends nothing more for ``idle`` seconds (``closed``, a list,
    gets whether the server closed it; ``status_lines``, a list, gets each answer's)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(raw)
        sock.settimeout(idle)
        data, ended = b"", False
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := sock.recv(65536):
                data += chunk
            ended = True
        if closed is not None:
            closed.append(ended)
    answers = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
        if status_lines is not None:
            status_lines.append(status_line)
        length = int(headers["content-length"])
        answers.append((int(status_line.split()[1]), headers, data[:length]))
        data = data[length:]
    return answers


# A request that, read as the next one, is answered 404 naming "smuggled" and closes.
SMUGGLED = b"GET /v1/models/smuggled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


# A request after it on the same connection, answered 200.
FOLLOWING = b"GET /v1/models/elmo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("GET", "/v1/models/elmo", 200),
        ("GET", "/v1/models/elmo/metadata", 200),
        ("POST", "/v1/models/elmo:classify", 501),
        ("POST", "/v2/unknown", 404),
        ("GET", "/v1/models/elmo/versions/99999999999999999999", 400),
    ],
)
def test_rest_unread_body_is_not_read_as_the_next_request(method, path, status, server):
    """A body the server answers without reading is still read as that request's body (the
    parser knows where it ends): it is never parsed as the next request (request smuggling),
    and the request after it is answered."""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(SMUGGLED)}\r\n\r\n"
    # FOLLOWING closes the connection: read until then (a predict may take seconds on a
    # loaded machine, past the default idle window)
    answers = _exchange(server.rest_port, head.encode() + SMUGGLED + FOLLOWING, idle=TIMEOUT)
    assert [got for got, _, _ in answers] == [status, 200], answers
    assert all(h["content-type"].startswith("application/json") for _, h, _ in answers)
    assert not any(b"smuggled" in body for _, _, body in answers)


def test_rest_keepalive_goes_on_after_a_body_read_whole(server):
    """A body read whole leaves the connection usable: the request after it is answered."""
    body = json.dumps({"instances": ["a b"]}).encode()
    head = (
        f"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    answers = _exchange(server.rest_port, head.encode() + body + SMUGGLED, idle=TIMEOUT)
    assert [status for status, _, _ in answers] == [200, 404]
    assert b"smuggled" in answers[1][2]


@pytest.mark.parametrize(
    "headers, fragment",
    [
        ("Content-Length: 2\r\nContent-Length: 70", "Duplicate Content-Length"),
        ("Content-Length: 2\r\nContent-Length: 2", "Duplicate Content-Length"),
        ("Content-Length: 10, 12", "Invalid character in Content-Length"),
        ("Content-Length : 70", "Invalid header field char"),
        ("X-Any: 1\r\n Content-Length: 70", "Unexpected whitespace after header value"),
        ("Transfer-Encoding: chunked\r\nContent-Length: 2", "Content-Length can't be present"),
        ("Transfer-Encoding: chunked", "Invalid character in chunk size"),
    ],
)
@pytest.mark.parametrize("method, path", [("POST", "elmo:predict"), ("GET", "elmo")])
def test_rest_ambiguous_body_length_is_refused(method, path, headers, fragment, server):
    """Headers two parsers could read differently (where the body ends) are refused and the
    connection closed; nothing after them is read as a request."""
    head = f"{method} /v1/models/{path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n\r\n"
    closed = []
    raw = head.encode() + b"{}" + SMUGGLED
    ((status, _, body),) = _exchange(server.rest_port, raw, idle=TIMEOUT, closed=closed)
    assert status == 400 and closed == [True]  # answered, then closed: nothing more read
    assert fragment in json.loads(body)["error"]


def test_rest_takes_a_chunked_body(server):
    """A body in chunks (HTTP/1.1's Transfer-Encoding) is read like one with a length; one
    that grows past max_request_bytes is refused as it arrives."""
    body = json.dumps({"instances": ["a b"]}).encode()
    chunks = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    head = b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    answers = _exchange(server.rest_port, head + chunks + FOLLOWING, idle=TIMEOUT)
    assert [status for status, _, _ in answers] == [200, 200]
    assert len(json.loads(answers[0][2])["predictions"]) == 1


REST_ERRORS = {
    "unknown path": (
        b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n",
        404,
        "Malformed request: GET /v1/nothing",
    ),
    "method not served": (
        b"POST /v1/models/elmo:classify HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        501,
        "'classify' is not served",
    ),
    "unknown HTTP method": (
        b"PUT /v1/models/elmo HTTP/1.1\r\nHost: x\r\n\r\n",
        501,
        "Unsupported method ('PUT')",
    ),
    "no Host": (b"GET /v1/models/elmo HTTP/1.1\r\n\r\n", 400, "Missing 'Host' header"),
    "request line of 70 KB": (
        b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        400,
        "Got more than 65536 bytes",
    ),
    "header line of 70 KB": (
        b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
        400,
        "Got more than 65536 bytes",
    ),
    "malformed request line": (
        b"GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n",
        400,
        "Bad status line",
    ),
    # answered on an HTTP/1.0 status line, as was every error of the parser's
    "too many headers": (
        b"GET / HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X%d: a\r\n" % i for i in range(200))
        + b"\r\n",
        400,
        "Too many headers received",
    ),
    "CONNECT": (
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        501,
        "Unsupported method ('CONNECT'): the REST API takes GET, HEAD, POST",
    ),
    "a transfer coding other than chunked": (
        b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\n"
        b"Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        501,
        "Transfer-Encoding 'gzip, chunked' is not supported: send the body with a Content-Length",
    ),
    "a content coding without its library (br)": (
        b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        415,
        "Content-Encoding 'br' is not supported: send the body as gzip or deflate (or none)",
    ),
    "a content coding of no name": (
        b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Encoding: bogus\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        415,
        "Content-Encoding 'bogus' is not supported",
    ),
    "a body that is not what its Content-Encoding says": (
        b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        400,
        "the body is not gzip data as its Content-Encoding says (",
    ),
    "a percent-encoded ':' (not a separator)": (
        b"POST /v1/models/elmo%3Apredict HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        404,
        "Malformed request: POST /v1/models/elmo%3Apredict",
    ),
    "a percent-encoded '/' (part of the name)": (
        b"GET /v1/models/elmo%2Fmetadata HTTP/1.1\r\nHost: x\r\n\r\n",
        404,
        "no model 'elmo%2Fmetadata'",
    ),
    "a version label (predict)": (
        b"POST /v1/models/elmo/labels/stable:predict HTTP/1.1\r\nHost: x\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        404,
        "version label 'stable' of model 'elmo' not found (this server has no version labels)",
    ),
    "a version label (status)": (
        b"GET /v1/models/elmo/labels/stable HTTP/1.1\r\nHost: x\r\n\r\n",
        404,
        "version label 'stable' of model 'elmo' not found (this server has no version labels)",
    ),
    # the parser quotes the request line: cut to 200 characters
    "long malformed request line": (
        b"GET / HTTP/9" + b"9" * 300 + b"\r\nHost: x\r\n\r\n",
        400,
        "... (",
    ),
}


@pytest.mark.parametrize("case", list(REST_ERRORS))
def test_rest_errors_are_json(case, server, caplog):
    """Every error, the HTTP parser's own included, is a JSON ``{"error": ...}`` of one line,
    on an HTTP/1.1 status line, and logs no traceback."""
    raw, status, fragment = REST_ERRORS[case]
    lines = []
    with caplog.at_level(logging.DEBUG, logger="serving"):
        (got, headers, body), *_ = _exchange(server.rest_port, raw + SMUGGLED, status_lines=lines)
    assert got == status and headers["content-type"].startswith("application/json")
    assert lines[0].startswith(f"HTTP/1.1 {status} "), lines
    error = json.loads(body)["error"]
    assert fragment in error and "\n" not in error and len(error) < 300, error
    assert "install" not in error  # a library the server lacks is not the client's business
    assert not [r for r in caplog.records if r.exc_info], caplog.text


@pytest.mark.parametrize("version", ["0.9", "2.0"])
def test_rest_other_http_versions_are_a_505_on_an_http_1_1_status_line(version, server, caplog):
    """HTTP/0.9 or 2.0 is refused on an HTTP/1.1 status line (aiohttp would answer it as
    "HTTP/2.0 200"), then the connection closes."""
    line = "GET /v1/models/elmo" + ("" if version == "0.9" else f" HTTP/{version}\r\nHost: x")
    closed = []
    with caplog.at_level(logging.DEBUG, logger="serving"):
        answers = _exchange(server.rest_port, f"{line}\r\n\r\n".encode(), TIMEOUT, closed)
    ((status, headers, body),) = answers
    assert (status, closed) == (505, [True]) and headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": f"HTTP/{version} is not supported: send HTTP/1.1"}
    assert not [r for r in caplog.records if r.exc_info], caplog.text


def test_rest_head_is_get_without_its_body(server):
    """HEAD: GET's status and headers, no body; the connection goes on."""
    get = _exchange(server.rest_port, FOLLOWING)
    head = b"HEAD /v1/models/elmo HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=TIMEOUT) as sock:
        sock.sendall(head + FOLLOWING)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    first, _, rest = data.partition(b"\r\n\r\n")
    assert (
        first.startswith(b"HTTP/1.1 200") and f"Content-Length: {len(get[0][2])}".encode() in first
    )
    assert rest.startswith(b"HTTP/1.1 200")  # the next answer at once: HEAD's had no body
    assert json.loads(rest.partition(b"\r\n\r\n")[2]) == json.loads(get[0][2])


def test_rest_takes_bodies_compressed_with_gzip_or_deflate(server):
    """A body sent with Content-Encoding gzip (one or several members) or deflate answers as
    the same body sent plain."""
    body = json.dumps({"instances": ["a b c", "d"]}).encode()
    plain = _post(server.rest_port, body)
    assert plain[0] == 200
    for coding, data in [
        ("gzip", gzip.compress(body)),
        ("gzip", gzip.compress(body[:10]) + gzip.compress(body[10:])),
        ("x-gzip", gzip.compress(body)),
        ("deflate", zlib.compress(body)),
    ]:
        assert _post(server.rest_port, data, {"Content-Encoding": coding}) == plain, coding


def _wait_for(condition):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_rest_bodies_parse_in_turn_within_the_budget(server, stub, monkeypatch):
    """With a budget of one body, a second body waits, read but not parsed, until the first
    has been read into arrays; then both are answered."""
    budget = BodyBudget(60)
    monkeypatch.setattr(server._rest.protocol, "body_budget", budget)
    entered, release, parsed = threading.Event(), threading.Event(), []
    parse = rest_protocol.parse_json_body

    def gated_parse(data):
        parsed.append(bytes(data))
        entered.set()
        assert release.wait(TIMEOUT)
        return parse(data)

    monkeypatch.setattr(rest_protocol, "parse_json_body", gated_parse)
    bodies = [{"instances": [f"body {i} " + "w" * 40]} for i in range(2)]  # over 60 bytes each
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        try:
            first = pool.submit(_post, server.rest_port, bodies[0])
            assert entered.wait(TIMEOUT)
            second = pool.submit(_post, server.rest_port, bodies[1])
            _wait_for(lambda: budget.waiting == 1)
            assert len(parsed) == 1 and b"body 0" in parsed[0]  # the second waits its turn
        finally:
            release.set()
        for future in (first, second):
            status, answer = future.result(TIMEOUT)
            assert status == 200 and len(json.loads(answer)["predictions"]) == 1
    assert len(parsed) == 2 and budget.used == 0


def _send_head(port, length, first=b""):
    """A socket that has sent a POST's headers declaring ``length`` bytes, then ``first``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    head = (
        f"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n"
        "Connection: close\r\n\r\n"
    )
    sock.sendall(head.encode() + first)
    return sock


def _answer(sock):
    """``(status, body)`` of the answer on ``sock`` (sent with ``Connection: close``)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_rest_headers_alone_hold_no_body_memory(server):
    """Eight connections whose headers declare a body at the limit (16 MiB) and send none of it
    hold no body: a body grows as its bytes arrive (nothing is allocated at its declared
    length), and only bytes received take room in the server's budget."""
    import tracemalloc

    limit = server.options.max_request_bytes
    bodies = server._rest.bodies
    tracemalloc.start()
    socks = []
    try:
        socks = [_send_head(server.rest_port, limit) for _ in range(8)]
        _wait_for(lambda: len(bodies.receiving) == 8)  # each handler waits for its body
        held, _ = tracemalloc.get_traced_memory()
        assert held < 8 * 1024 * 1024, held  # not 8 x 16 MiB
        assert bodies.used == 0
        for sock in socks:
            sock.sendall(b" " * 1000)
        _wait_for(lambda: bodies.used == 8 * 1000)  # the bytes received, counted
    finally:
        tracemalloc.stop()
        for sock in socks:
            sock.close()
    _wait_for(lambda: not bodies.receiving and bodies.used == 0)  # given back on close
    _still_up_rest(server)


def _still_up_rest(server):
    status, answer = _post(server.rest_port, {"instances": ["still up ."]})
    assert status == 200 and json.loads(answer)["predictions"][0]["sequence_len"] == 3


def test_rest_bodies_wait_for_room_in_the_budget(server, monkeypatch):
    """Past the budget of bodies in flight, a body waits for room (unread) while the one that
    began first goes on; once that one is answered, the other is read and answered."""
    bodies = ReceivedBodies(1000)
    monkeypatch.setattr(server._rest, "bodies", bodies)
    first_body = b'{"instances": ["first"]' + b" " * 3000 + b"}"
    first = _send_head(server.rest_port, len(first_body), first_body[:2000])
    _wait_for(lambda: bodies.used == 2000)  # the first body goes on past the budget
    second_body = json.dumps({"instances": ["second one"]}).encode()
    second = _send_head(server.rest_port, len(second_body), second_body)
    try:
        _wait_for(lambda: len(bodies.receiving) == 2)
        second.settimeout(0.2)
        with pytest.raises(TimeoutError):  # waits for room: no answer yet
            second.recv(1)
        assert bodies.used == 2000
        second.settimeout(TIMEOUT)
        first.sendall(first_body[2000:])
        for sock, rows in [(first, 1), (second, 1)]:
            status, answer = _answer(sock)
            assert status == 200 and len(json.loads(answer)["predictions"]) == rows
    finally:
        first.close()
        second.close()
    _wait_for(lambda: bodies.used == 0 and not bodies.receiving)


def test_rest_answer_past_the_budget_of_answers_is_a_503(server, monkeypatch):
    """When the answers being written hold the whole budget, another answer is refused (503:
    retry later) and its connection closed, instead of held."""
    answers = WrittenAnswers(1000)
    monkeypatch.setattr(server._rest, "answers", answers)
    answers.take(1000)  # as a client that does not read a long answer would hold it
    try:
        closed = []
        ((status, _, body),) = _exchange(server.rest_port, FOLLOWING, idle=TIMEOUT, closed=closed)
        assert status == 503 and closed == [True]
        assert "answers that their clients have not read yet; retry later" in body.decode()
    finally:
        answers.give_back(1000)
    assert _exchange(server.rest_port, FOLLOWING)[0][0] == 200


def test_rest_large_answers_are_sent_in_chunks_as_encoded(server, stub, monkeypatch):
    """An answer over SMALL_ANSWER_BYTES is encoded a row at a time and sent in chunks: the
    same values as gRPC's, the keep-alive connection usable after it; to an HTTP/1.0 client
    it ends where the connection closes."""
    import http.client

    monkeypatch.setattr(rest_api, "SMALL_ANSWER_BYTES", 2000)
    monkeypatch.setattr(rest_api, "ANSWER_CHUNK_BYTES", 3000)
    sentences = [f"row {i} of a long answer" for i in range(8)]
    expected = {
        alias: tf.make_ndarray(proto)
        for alias, proto in stub.Predict(make_request(sentences), timeout=TIMEOUT).outputs.items()
    }
    body = json.dumps({"instances": sentences})
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=TIMEOUT)
    try:
        connection.request("POST", "/v1/models/elmo:predict", body)
        response = connection.getresponse()
        assert response.status == 200 and response.getheader("Content-Length") is None
        assert response.getheader("Transfer-Encoding") == "chunked"
        rows = json.loads(response.read())["predictions"]
        for alias, values in expected.items():
            assert_reordered(np.array([row[alias] for row in rows]), values, err_msg=alias)
        connection.request("GET", "/v1/models/elmo")  # the same connection goes on
        assert connection.getresponse().status == 200
    finally:
        connection.close()

    head = f"POST /v1/models/elmo:predict HTTP/1.0\r\nContent-Length: {len(body)}\r\n"
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=TIMEOUT) as sock:
        sock.sendall(head.encode() + b"\r\n" + body.encode())
        data = b""
        while chunk := sock.recv(65536):  # the answer ends where the connection closes
            data += chunk
    answer_head, _, answer = data.partition(b"\r\n\r\n")
    assert answer_head.startswith(b"HTTP/1.0 200") and b"Transfer-Encoding" not in answer_head
    assert len(json.loads(answer)["predictions"]) == len(sentences)


LONG = "x" * 100_000


def _long_grpc_request(field):
    """A gRPC call whose ``field`` is a 100 KB string: ``(method name, request)``."""
    if field == "metadata_field":
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=[LONG])
        request.model_spec.name = "elmo"
        return "GetModelMetadata", request
    request = make_request(["a b"])
    if field == "output_filter":
        request.output_filter.append(LONG)
    elif field == "input name":
        request.inputs[LONG].CopyFrom(request.inputs["sentences"])
    else:  # a field of the model_spec
        setattr(request.model_spec, field, LONG)
    return "Predict", request


@pytest.mark.parametrize(
    "field, code",
    [
        ("metadata_field", "INVALID_ARGUMENT"),
        ("output_filter", "INVALID_ARGUMENT"),
        ("input name", "INVALID_ARGUMENT"),
        ("signature_name", "NOT_FOUND"),
        ("name", "NOT_FOUND"),
        ("version_label", "NOT_FOUND"),
    ],
)
def test_long_client_strings_are_clipped_in_errors(field, code, stub):
    """A 100 KB string the client sent is quoted in the error cut to 100 characters and its
    length (the status would not fit the HTTP/2 trailers)."""
    method, request = _long_grpc_request(field)
    with pytest.raises(grpc.RpcError) as e:
        getattr(stub, method)(request, timeout=TIMEOUT)
    assert e.value.code().name == code, e.value.details()
    assert "x" * 100 + "... (100000 characters)" in e.value.details()
    assert len(e.value.details()) < 400
    _still_up(stub)


def test_rest_keeps_the_connection_alive(server):
    """HTTP/1.1: two requests on one connection."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=TIMEOUT)
    try:
        for _ in range(2):
            connection.request("GET", "/v1/models/elmo")
            response = connection.getresponse()
            assert response.status == 200 and response.version == 11
            assert json.loads(response.read())["model_version_status"][0]["state"] == "AVAILABLE"
    finally:
        connection.close()


@pytest.mark.numerics
def test_request_larger_than_a_batch_is_split_and_equal(stub, base_path):
    """15 rows (4 chunks of max_batch_size 4) answer as the SavedModel answers them alone."""
    local = tf.saved_model.load(str(base_path / "1")).signatures["default"]
    sentences = [" ".join(["w"] * (1 + i % 3)) + f" s{i}" for i in range(15)]
    response = stub.Predict(make_request(sentences), timeout=TIMEOUT)
    expected = local(sentences=tf.constant(sentences))
    for key in ("elmo", "default", "sequence_len"):
        assert_reordered(tf.make_ndarray(response.outputs[key]), expected[key].numpy())


def test_request_larger_than_the_queue_is_invalid_not_retry(request, base_path):
    small_queue = BatchingOptions(max_batch_size=2, max_enqueued_batches=3, num_batch_threads=1)
    server = _start(request, base=str(base_path), batching=small_queue)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    request.addfinalizer(channel.close)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(make_request(["a"] * 7), timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "7 rows, more than the batch queue" in e.value.details()
    assert "max_enqueued_batches 3 x max_batch_size 2" in e.value.details()
    response = stub.Predict(make_request(["a b"] * 6), timeout=TIMEOUT)  # 3 chunks, in turn
    assert list(tf.make_ndarray(response.outputs["sequence_len"])) == [2] * 6


@contextlib.contextmanager
def _behind_a_running_request(server, stub, monkeypatch):
    """Holds one gRPC request of the ``default`` signature inside the model (so the next
    request waits in the queue) while the body runs; yields the ``default`` batcher. On
    exit releases it and waits until the batcher has dropped one more request."""
    entered, release = gate_servable_run(monkeypatch, TIMEOUT)
    with server.manager.servable() as servable:
        batcher = servable._batchers["default"]
        dropped = batcher.dropped
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            first = pool.submit(stub.Predict, make_request(["runs"]), timeout=TIMEOUT)
            assert entered.wait(TIMEOUT)
            yield batcher
        finally:
            release.set()
        first.result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while batcher.dropped == dropped:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert batcher.dropped == dropped + 1


def test_grpc_deadline_passed_in_the_queue_is_not_computed(server, stub, monkeypatch):
    with _behind_a_running_request(server, stub, monkeypatch) as batcher:
        queued = batcher.queued_rows
        # A deadline long enough to reach the queue on a loaded machine (one that passed
        # before the handler ran would never be queued), then it passes while queued.
        call = stub.Predict.future(make_request(["too late"]), timeout=3.0)
        deadline = time.monotonic() + TIMEOUT
        while batcher.queued_rows == queued:
            assert time.monotonic() < deadline and not call.done(), "never queued"
            time.sleep(0.01)
        with pytest.raises(grpc.RpcError) as e:
            call.result(TIMEOUT)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_rest_client_gone_while_queued_is_not_computed(server, stub, monkeypatch):
    """A REST client that closes its connection while its request waits in the queue: the
    request is dropped before it is computed (as a cancelled gRPC call). Another client's
    connection stays open meanwhile: the server is shared, so this one's must be found."""
    other = socket.create_connection(("127.0.0.1", server.rest_port), TIMEOUT)
    with other, _behind_a_running_request(server, stub, monkeypatch) as batcher:
        body = json.dumps({"signature_name": "default", "instances": ["gone"]}).encode()
        head = (
            "POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", server.rest_port), TIMEOUT) as sock:
            sock.sendall(head.encode() + body)
            deadline = time.monotonic() + TIMEOUT
            while batcher.queued_rows == 0:  # the request is queued behind the first
                assert time.monotonic() < deadline
                time.sleep(0.01)
            # this client's connection on the server (others may be open: the server is shared)
            (connection,) = [
                c
                for c in server._rest.web_server.connections
                if c.transport is not None
                and c.transport.get_extra_info("peername") == sock.getsockname()
            ]
        # closed: the client is gone, once the server's loop has seen it (releasing the first
        # request before that raced the close on a loaded machine)
        while connection.transport is not None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    _still_up(stub)


def test_rest_expect_100_continue(server):
    """``Expect: 100-continue``: a body over the limit is refused (413) before it is sent; a
    body within it is invited (100 Continue) and answered."""
    head = "POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
    status, answer = _raw_http(server.rest_port, head + f"Content-Length: {10**9}\r\n")
    assert status == 413 and "over the limit" in json.loads(answer)["error"]

    body = json.dumps({"instances": ["a b"]}).encode()
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=TIMEOUT) as sock:
        sock.sendall(f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = sock.recv(4096)
            assert chunk, f"closed before the interim answer: {interim!r}"
            interim += chunk
        assert interim.startswith(b"HTTP/1.1 100 Continue"), interim
        sock.sendall(body)
        data = interim.split(b"\r\n\r\n", 1)[1]
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 200")
    assert len(json.loads(data.split(b"\r\n\r\n", 1)[1])["predictions"]) == 1


@pytest.mark.stress
def test_rest_answer_left_unread_is_cut_off_within_the_timeout(quick_server):
    """A client that asks for a long answer (512 rows: MBs of JSON) and reads none of it: the
    server waits 1 s (--rest-timeout-seconds) in all for it to read, then cuts the connection
    and drops the answer."""
    server = quick_server
    body = json.dumps({"instances": [" ".join(["w"] * 10)] * 512}).encode()
    head = (
        f"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # reads nothing meanwhile
        sock.settimeout(TIMEOUT)
        sock.connect(("127.0.0.1", server.rest_port))
        sock.sendall(head.encode() + body)
        answers = server._rest.answers
        _wait_for(lambda: answers.answers == 1)  # computed: being written
        writing = time.monotonic()
        _wait_for(lambda: answers.answers == 0)
        assert time.monotonic() - writing < CUT_OFF  # 1 s of waiting, plus encoding
        assert answers.used == 0
        _wait_for(lambda: server._rest.open_connections() == 0)
        # reset: what waited to be sent is dropped, not left for the kernel to send
        poller = select.poll()
        poller.register(sock, select.POLLERR | select.POLLHUP)
        assert poller.poll(CUT_OFF * 1000), "the connection was not reset"
        with pytest.raises(ConnectionResetError):
            while sock.recv(65536):
                pass
    status, _ = _raw_http(
        server.rest_port, "GET /v1/models/elmo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    )
    assert status == 200


@pytest.mark.stress
def test_rest_slow_and_idle_clients_are_cut_off(quick_server):
    """--rest-timeout-seconds: a client that stalls mid-headers, stalls mid-body or idles on a
    keep-alive connection is disconnected after the timeout and holds no thread; so is one
    that drips its headers or, headers complete, its body (never idle for the timeout)."""
    server = quick_server
    port = server.rest_port

    def closed_within(sock, seconds):
        sock.settimeout(seconds)
        start = time.monotonic()
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return time.monotonic() - start, data
            data += chunk

    stalls = {
        "mid-headers": b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\n",
        "mid-body": b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\n"
        b"Content-Length: 100\r\n\r\n" + b'{"instances": [',
        "idle": b"",
    }
    for name, sent in stalls.items():
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
            sock.sendall(sent)
            waited, data = closed_within(sock, CUT_OFF)  # a broken deadline fails in CUT_OFF
            assert 0.5 < waited < CUT_OFF, (name, waited)
            assert data == b"" or data.startswith(b"HTTP/1.1 4"), (name, data)
    # slowloris: a byte of headers every 0.2 s (never idle for the timeout) is cut off too
    head = b"POST /v1/models/elmo:predict HTTP/1.1\r\n" + b"X-Drip: " + b"a" * 1000
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        start = time.monotonic()
        with contextlib.suppress(OSError):  # the server closed the connection
            for byte in head:
                sock.sendall(bytes([byte]))
                time.sleep(0.2)
                # 1 s of timeout, not the 200 s the whole drip would take
                assert time.monotonic() - start < CUT_OFF, "a slowloris client was not cut off"
        try:
            answer = closed_within(sock, CUT_OFF)[1]
        except ConnectionResetError:  # bytes sent after the close were answered by a reset
            answer = b""
        assert answer == b"", answer
    # the same with complete headers and a body dripped (the request's own deadline, which
    # aiohttp's keep-alive timer does not give: it only cuts a connection waiting for headers)
    head = b"POST /v1/models/elmo:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(head)
        start = time.monotonic()
        with contextlib.suppress(OSError):  # the server closed the connection
            for byte in b'{"instances": ["' + b"a" * 1000:
                sock.sendall(bytes([byte]))
                time.sleep(0.2)
                assert time.monotonic() - start < CUT_OFF, "a slowly sent body was not cut off"
    deadline = time.monotonic() + TIMEOUT
    while server._rest.open_connections():  # every connection closed
        assert time.monotonic() < deadline, server._rest.open_connections()
        time.sleep(0.01)
    status, _ = _raw_http(port, "GET /v1/models/elmo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n")
    assert status == 200


# One tokenizer: the served default signature and `elmo-tf embed` split alike.
ODD_SPACES = [
    "a\u00a0b",
    "Tokyo\u3000Osaka\u3000Kyoto",
    "x\u2009y\u202fz",
    "\u3000lead trail\u00a0",
]


def test_served_default_signature_splits_like_embed(stub, tmp_path):
    path = tmp_path / "odd.txt"
    path.write_text("\n".join(ODD_SPACES) + "\n", encoding="utf-8")
    token_lists = read_sentences(str(path))
    assert token_lists == [s.split() for s in ODD_SPACES]
    assert token_lists[1] == ["Tokyo", "Osaka", "Kyoto"]
    by_sentences = stub.Predict(make_request(ODD_SPACES, "default"), timeout=TIMEOUT)
    by_tokens = stub.Predict(make_request(token_lists, "tokens"), timeout=TIMEOUT)
    lengths = tf.make_ndarray(by_sentences.outputs["sequence_len"])
    assert list(lengths) == [len(t) for t in token_lists]
    for key in ("word_emb", "elmo", "default"):
        assert_reordered(
            tf.make_ndarray(by_sentences.outputs[key]), tf.make_ndarray(by_tokens.outputs[key])
        )


def test_exported_graph_has_core_ops_only(base_path):
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((base_path / "1" / "saved_model.pb").read_bytes())
    graph = saved_model.meta_graphs[0].graph_def
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    assert "StaticRegexReplace" in ops and "StringSplitV2" in ops
    assert not [op for op in ops if op_def_registry.get(op) is None and op not in _functions(graph)]


def _functions(graph):
    return {f.signature.name for f in graph.library.function}


def test_sigterm_exits_within_grace_with_an_idle_keepalive_connection(base_path):
    grace = 2.0
    command = [
        sys.executable, "-m", "elmo_tf", "serve", "--model-base-path", str(base_path),
        "--port", "0", "--rest-port", "0", "--poll-seconds", "0",
        "--shutdown-grace-seconds", str(grace),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        lines = queue.Queue()
        threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
        port = int(re.search(r"REST 127\.0\.0\.1:(\d+)", lines.get(timeout=120)).group(1))
        keepalive = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        silent = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)  # sends nothing
        try:
            keepalive.sendall(b"GET /v1/models/elmo HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer or len(answer) < _expected(answer):
                data = keepalive.recv(65536)
                assert data, f"the server closed the connection mid-answer: {answer!r}"
                answer += data
            assert answer.startswith(b"HTTP/1.1 200")  # then idle, kept open
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            assert keepalive.recv(65536) == b""  # the server closes the idle connection
            closed = time.monotonic() - signalled
            # The exit itself (interpreter and TensorFlow teardown) is bounded, not timed.
            assert process.wait(timeout=grace + 60) == 0
        finally:
            keepalive.close()
            silent.close()
        assert closed < grace + 5, closed  # within the grace period, not the 30 s timeout
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.parametrize("flag", ["--port", "--rest-port"])
def test_busy_port_is_named_in_one_line(flag, base_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ports = {"--port": "0", "--rest-port": "0", flag: str(port)}
        argv = ["serve", "--model-base-path", str(base_path), "--poll-seconds", "0"]
        argv += [x for item in ports.items() for x in item]
        assert main(argv) == 1  # checked before the model loads
        (line,) = [x for x in capsys.readouterr().err.splitlines() if "cannot listen" in x]
        option = flag[2:].replace("-", "_")  # the option's name: its flag with dashes
        assert f"cannot listen on 127.0.0.1:{port}" in line and f"{option})" in line
        # a port taken between that check and the server's bind: the server says so itself
        values = {name[2:].replace("-", "_"): int(value) for name, value in ports.items()}
        server = ModelServer(ServerOptions(str(base_path), poll_seconds=0, **values))
        with pytest.raises(ListenError, match=rf"cannot listen on 127.0.0.1:{port} .*{option}\)"):
            server.start()
    assert main([*argv[:-4], "--port", "9999", "--rest-port", "9999"]) == 1
    assert "--port and --rest-port are both 9999" in capsys.readouterr().err


def test_the_listen_check_takes_what_the_servers_bind():
    """A bracketed IPv6 address and "" (every interface) are the servers' forms: the check
    before the model loads must not refuse them (it once passed them to getaddrinfo as given)."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    addresses.check_can_listen("", port)
    addresses.check_can_listen("localhost", port)
    try:
        with socket.socket(socket.AF_INET6) as v6:
            v6.bind(("::1", 0))
    except OSError:
        return  # no IPv6 loopback on this machine
    addresses.check_can_listen("[::1]", port)


def test_failed_version_is_retried_without_a_directory_change(base_path, tmp_path):
    base = tmp_path / "models"
    shutil.copytree(base_path / "1", base / "1")
    (base / "²").mkdir()  # str.isdigit() but not a version
    shutil.copy(base / "1" / "saved_model.pb", base / "²" / "saved_model.pb")
    data = base / "1" / "variables" / "variables.data-00000-of-00001"
    data.rename(tmp_path / "data")  # changes variables/, not the version's directory
    manager = ModelManager("elmo", str(base), poll_seconds=0)
    assert manager.versions_on_disk() == [1]
    try:
        manager.poll()
        ((version, state, message),) = manager.status()
        assert (version, state) == (1, State.END) and message.startswith("failed to load")
        assert "<model base path>/1/variables/variables.data" in message
        assert str(tmp_path) not in message
        (tmp_path / "data").rename(data)
        manager.poll()  # within the backoff (1 s): not tried again yet
        assert manager.status()[0][1] == State.END
        failed_at = time.monotonic()
        while manager.status()[0][1] != State.AVAILABLE:  # polled until the backoff ends
            assert time.monotonic() < failed_at + TIMEOUT, manager.status()
            time.sleep(0.05)
            manager.poll()
        assert time.monotonic() - failed_at > 0.5  # not before the backoff
        assert manager.status()[0][1:] == (State.AVAILABLE, "")
    finally:
        manager.stop(5)


@pytest.mark.stress
def test_rest_answers_past_a_thousand_open_connections(request, base_path):
    """2,000 idle keep-alive connections hold descriptors past 1,024, where select() fails: a
    predict on a new connection is still answered (the server waits on epoll)."""
    import resource

    wanted = 2 * 2_000 + 512  # the clients' sockets and the server's, in this one process
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the open-file limit ({hard}) holds fewer than {wanted} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    request.addfinalizer(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
    server = _start(request, base=str(base_path), rest_timeout_seconds=60.0)
    idle = []
    try:
        for _ in range(2_000):
            idle.append(socket.create_connection(("127.0.0.1", server.rest_port), timeout=TIMEOUT))
        _wait_for(lambda: server._rest.open_connections() >= 2_000)
        assert max(s.fileno() for s in idle) > 1024
        status, answer = _post(server.rest_port, {"instances": ["a b c"]})
        assert status == 200 and json.loads(answer)["predictions"][0]["sequence_len"] == 3
    finally:
        for sock in idle:
            sock.close()
