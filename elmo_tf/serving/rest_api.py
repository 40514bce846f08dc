"""TF Serving's REST API on the standard library's ``http.server``.

=========================================================  ====================================
request                                                    answer
=========================================================  ====================================
``GET /v1/models/NAME[/versions/N]``                       model status
``GET /v1/models/NAME[/versions/N]/metadata``              ``model_spec`` and ``signature_def``
``POST /v1/models/NAME[/versions/N]:predict``              ``{"predictions": ...}`` (row form,
                                                           ``"instances"``) or ``{"outputs":
                                                           ...}`` (columnar form, ``"inputs"``)
=========================================================  ====================================

The body may name ``"signature_name"`` (default ``serving_default``). Strings are JSON strings
or ``{"b64": "..."}``. In the row form a signature with one input takes the values themselves
(``{"instances": ["a sentence", ...]}``), one with several takes objects (``{"instances":
[{"tokens": [...], "sequence_len": 2}, ...]}``). Errors answer ``{"error": "..."}`` with 400
(bad request), 404 (unknown model, version or signature), 413 (body or request over a limit),
429 (batch queue full). The answers are those of the gRPC API, converted the way TF Serving does.

Connections: HTTP/1.1 with keep-alive; a listen backlog of ``REQUEST_QUEUE_SIZE``; a connection
idle, or slow to send its request, for ``timeout`` seconds is closed, so a slow client cannot
hold a thread. A client that closes its connection while its request waits is not computed
(the batcher asks before each chunk, as for a cancelled gRPC call).
A POST needs a ``Content-Length`` (400 if it is missing, negative or not a
number); a body over the limit is answered 413 without being parsed (also on ``Expect:
100-continue``), and the connection closed after a lingering close: what the client still sends
is read and dropped, for at most ``LINGER_SECONDS`` and ``LINGER_BYTES``, so that a client
still writing its body reads the 413 instead of a connection reset. JSON nested too deep for
the parser or holding an integer of more than 4300 digits is a 400. ``stop`` closes idle
connections at once and the others when their request is answered or the grace period ends.
"""

from elmo_tf import extras

extras.require("serving", __name__)

import http.server
import json
import logging
import re
import select
import socket
import threading
import time

from google.protobuf import json_format
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
)

from elmo_tf.serving.errors import ServingError, invalid_argument, resource_exhausted
from elmo_tf.serving.tensors import from_json, to_json

log = logging.getLogger("serving")

_MODEL = r"/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>\d+))?"
GET_PATH = re.compile(_MODEL + r"(?P<metadata>/metadata)?/?")
POST_PATH = re.compile(_MODEL + r":(?P<method>[a-z]+)")
REQUEST_QUEUE_SIZE = 1024  # listen backlog: bursts of new connections wait instead of failing
# A refused body is drained (read and dropped) for at most this long and this much.
LINGER_SECONDS = 10.0
LINGER_BYTES = 64 * 1024 * 1024


class RestHandler(http.server.BaseHTTPRequestHandler):
    """One REST request; ``server`` is a ``RestServer``."""

    server_version = "elmo-tf-serving"
    protocol_version = "HTTP/1.1"  # keep-alive; every answer has a Content-Length
    # An answer is written as headers, then body: without TCP_NODELAY, Nagle's algorithm holds
    # the body until the client's delayed ACK of the headers (~40 ms on Linux) on every
    # keep-alive request (benchmarks/rest_frontends.py).
    disable_nagle_algorithm = True

    def setup(self):
        self.timeout = self.server.timeout_seconds  # socket timeout: idle and slow clients
        self.body_refused = False  # a body left unread: drain it before closing
        super().setup()
        self.server.track(self, busy=False)

    def finish(self):
        try:
            super().finish()  # the answer is flushed
            if self.body_refused:
                self._linger()
        finally:
            self.server.untrack(self)

    def _linger(self):
        """Reads and drops what the client still sends of a refused body, within
        ``LINGER_SECONDS`` and ``LINGER_BYTES``.

        Closing a socket whose received data is unread sends a reset: a client still writing
        its body would get EPIPE or ECONNRESET instead of the answer already sent. The write
        side is shut first, so the client reads the answer and then end of file.
        """
        sock = self.connection
        deadline = time.monotonic() + LINGER_SECONDS
        left = LINGER_BYTES
        try:
            sock.shutdown(socket.SHUT_WR)
            while left > 0 and (remaining := deadline - time.monotonic()) > 0:
                sock.settimeout(remaining)
                data = sock.recv(min(left, 1 << 16))
                if not data:  # the client closed: nothing is left to drain
                    return
                left -= len(data)
        except OSError:  # timed out, reset, or closed by stop()
            pass

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (TimeoutError, ConnectionError):  # a slow or vanished client: drop it
            self.close_connection = True
        finally:
            if self.server.track(self, busy=False):  # stopping: no further request
                self.close_connection = True

    def parse_request(self):
        self.server.track(self, busy=True)  # a request line arrived: in flight until answered
        return super().parse_request()

    def handle_expect_100(self):
        """Refuses a body over the limit before the client sends it."""
        length = _content_length(self.headers)
        if isinstance(length, int) and length > self.server.max_request_bytes:
            self.close_connection = True
            self.body_refused = True  # in case the client sends it anyway
            self._send(413, {"error": _too_large(length, self.server.max_request_bytes)})
            return False
        return super().handle_expect_100()

    def do_GET(self):  # noqa: N802 - http.server's method name
        match = GET_PATH.fullmatch(self.path.split("?")[0])
        if match is None:
            return self._send(404, {"error": f"Malformed request: GET {self.path}"})
        self._answer(self._metadata if match["metadata"] else self._status, match)

    def do_POST(self):  # noqa: N802
        match = POST_PATH.fullmatch(self.path.split("?")[0])
        if match is None:
            return self._send(404, {"error": f"Malformed request: POST {self.path}"})
        if match["method"] != "predict":
            return self._send(501, {"error": f"method '{match['method']}' is not served"})
        self._answer(self._predict, match)

    def log_message(self, format, *args):  # noqa: A002 - http.server's signature
        log.debug("%s %s", self.address_string(), format % args)

    def _answer(self, method, match):
        try:
            answer = method(match["name"], _version(match))
        except (TimeoutError, ConnectionError):  # no one to answer
            self.close_connection = True
            return
        except ServingError as e:
            self._send(e.http_status, {"error": e.message})
        except Exception:  # noqa: BLE001 - a bug answers 500 and the server stays up
            log.exception("internal error")
            self._send(500, {"error": "internal error; see the server log"})
        else:
            self._send(200, answer)

    def _send(self, status, body):
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection or self.server.stopping:
                self.close_connection = True
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up; nothing to tell
            self.close_connection = True

    def _status(self, name, version):
        request = get_model_status_pb2.GetModelStatusRequest()
        _set_model_spec(request.model_spec, name, version)
        response = self.server.model_service.status(request)
        return json_format.MessageToDict(
            response, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )

    def _metadata(self, name, version):
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        _set_model_spec(request.model_spec, name, version)
        response = self.server.prediction_service.metadata(request)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        return {
            "model_spec": {
                "name": name,
                "signature_name": "",
                "version": str(response.model_spec.version.value),
            },
            "metadata": {
                "signature_def": json_format.MessageToDict(
                    signature_map,
                    always_print_fields_with_no_presence=True,
                    preserving_proto_field_name=True,
                )
            },
        }

    def _predict(self, name, version):
        body = self._read_json()
        signature = body.get("signature_name") or "serving_default"
        if not isinstance(signature, str):
            raise invalid_argument("'signature_name' must be a string")
        if ("instances" in body) == ("inputs" in body):
            raise invalid_argument("the body must hold exactly one of 'instances' or 'inputs'")
        row_format = "instances" in body
        reader = _row_inputs if row_format else _columnar_inputs
        payload = body["instances" if row_format else "inputs"]
        limits = self.server.model_server.limits
        _, outputs = self.server.model_server.predict(
            name,
            version,
            signature,
            lambda spec: reader(payload, spec, limits),
            [],
            alive=self._client_connected,
        )
        values = {alias: to_json(value) for alias, value in outputs.items()}
        if not row_format:
            return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
        if len(values) == 1:
            return {"predictions": next(iter(values.values()))}
        rows = len(next(iter(values.values())))
        return {"predictions": [{a: v[i] for a, v in values.items()} for i in range(rows)]}

    def _client_connected(self):
        """Whether the client still waits for the answer: false once it has closed its
        connection (the batcher asks before computing each chunk of the request).

        A closed connection reads as end of file; a client that already sent its next
        request (pipelining) or sent nothing more is still waiting.
        """
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return True
            return self.connection.recv(1, socket.MSG_PEEK) != b""
        except (OSError, ValueError):  # reset, or the socket is already closed
            return False

    def _read_json(self):
        length = _content_length(self.headers)
        if not isinstance(length, int):
            self.close_connection = True  # the body's end is unknown: the connection is unusable
            self.body_refused = True
            raise invalid_argument(length)
        limit = self.server.max_request_bytes
        if length > limit:
            self.close_connection = True  # the body is not read
            self.body_refused = True
            raise resource_exhausted(_too_large(length, limit), http_status=413)
        return parse_json_body(self._read_body(length))

    def _read_body(self, length):
        """``length`` bytes of body, within ``timeout`` seconds in all (not per read)."""
        deadline = time.monotonic() + self.server.timeout_seconds
        parts, left = [], length
        while left > 0:
            if time.monotonic() > deadline:
                raise TimeoutError("the client is sending its body too slowly")
            chunk = self.rfile.read1(min(left, 1 << 16))
            if not chunk:
                raise ConnectionError("the client closed the connection mid-body")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)


class RestServer(http.server.ThreadingHTTPServer):
    """The REST front end of a ``ModelServer``; a thread per connection.

    ``stop(deadline)`` stops accepting, closes idle connections, waits for the requests in
    flight until ``deadline`` (``time.monotonic()``), then closes whatever is still open.

    Args:
        timeout: seconds a connection may be idle, or take to send one request.
    """

    daemon_threads = True  # stop() does the waiting, bounded by its deadline
    block_on_close = False
    request_queue_size = REQUEST_QUEUE_SIZE

    def __init__(
        self, address, model_server, prediction_service, model_service, max_bytes, timeout=30.0
    ):
        self.model_server = model_server
        self.prediction_service = prediction_service
        self.model_service = model_service
        self.max_request_bytes = max_bytes
        self.timeout_seconds = timeout
        self.stopping = False
        self._connections = {}  # handler -> whether a request is in flight
        self._lock = threading.Condition()
        super().__init__(address, RestHandler)

    def track(self, handler, busy):
        """Records whether ``handler``'s connection has a request in flight; returns whether
        the server is stopping (so that the connection closes after this request)."""
        with self._lock:
            self._connections[handler] = busy
            self._lock.notify_all()
            return self.stopping

    def untrack(self, handler):
        with self._lock:
            self._connections.pop(handler, None)
            self._lock.notify_all()

    def stop(self, deadline):
        """Stops accepting; idle connections close now, busy ones by ``deadline``."""
        self.shutdown()  # serve_forever returns: no new connections are accepted
        self.server_close()
        with self._lock:
            self.stopping = True
            for handler, busy in self._connections.items():
                if not busy:
                    _close(handler.connection)
            while self._connections and time.monotonic() < deadline:
                self._lock.wait(max(0.0, min(0.5, deadline - time.monotonic())))
                for handler, busy in self._connections.items():
                    if not busy:  # answered its request in flight, now idle
                        _close(handler.connection)
            for handler in self._connections:
                _close(handler.connection)


def _close(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it
    except OSError:
        pass


def parse_json_body(data):
    """The JSON object of a request body; ``INVALID_ARGUMENT`` (400) naming what is wrong."""
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise invalid_argument(f"the body is not valid JSON: {e}") from None
    except RecursionError:
        raise invalid_argument("the body's JSON is nested too deeply") from None
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        raise invalid_argument(f"the body's JSON has a value out of range: {e}") from None
    if not isinstance(body, dict):
        raise invalid_argument("the body must be a JSON object")
    return body


def _content_length(headers):
    """The ``Content-Length`` of a request as an int, else the error message (a str)."""
    if headers.get("Transfer-Encoding"):
        return "send the body with a Content-Length, not a Transfer-Encoding"
    value = headers.get("Content-Length")
    if value is None:
        return "a POST needs a Content-Length header"
    value = value.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return f"Content-Length must be a non-negative integer, got {value[:20]!r}"
    return int(value)


def _too_large(length, limit):
    return f"request of {length} bytes is over the limit of {limit} bytes (max_request_bytes)"


def _version(match):
    return None if match["version"] is None else int(match["version"])


def _set_model_spec(model_spec, name, version):
    model_spec.name = name
    if version is not None:
        model_spec.version.value = version


def _is_value(item):
    """A JSON value of one input, as opposed to an object of named inputs."""
    return not isinstance(item, dict) or set(item) == {"b64"}


def _row_inputs(instances, spec, limits):
    if not isinstance(instances, list):
        raise invalid_argument("'instances' must be a list (one entry per row)")
    aliases = sorted(spec.inputs)
    if not instances:
        raise invalid_argument(f"input '{aliases[0]}' has an empty batch: 'instances' is empty")
    if all(_is_value(item) for item in instances):
        if len(aliases) != 1:
            raise invalid_argument(
                f"signature '{spec.name}' has inputs {aliases}: each instance must be an object "
                "naming them"
            )
        columns = {aliases[0]: instances}
    else:
        columns = {}
        for index, item in enumerate(instances):
            if _is_value(item):
                raise invalid_argument(f"instance {index} must be an object naming the inputs")
            spec.check_names(item)
            for alias in aliases:
                columns.setdefault(alias, []).append(item[alias])
    return _read(columns, spec, limits)


def _columnar_inputs(inputs, spec, limits):
    if _is_value(inputs):
        if len(spec.inputs) != 1:
            raise invalid_argument(
                f"signature '{spec.name}' has inputs {sorted(spec.inputs)}: 'inputs' must be an "
                "object naming them"
            )
        inputs = {next(iter(spec.inputs)): inputs}
    spec.check_names(inputs)
    return _read(inputs, spec, limits)


def _read(columns, spec, limits):
    """The numpy inputs of JSON ``columns``, each one's shape checked before it is read."""
    return {
        alias: from_json(
            value,
            alias,
            spec.inputs[alias].dtype,
            lambda shape, alias=alias: spec.check_declared_shape(alias, shape, limits),
        )
        for alias, value in columns.items()
    }
