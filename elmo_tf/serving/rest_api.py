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
(bad request, or a URL version beyond int64), 404 (unknown model, version or signature, or no
version loaded), 413 (body or request over a limit), 429 (batch queue full), 503 (no room to
parse the body within the timeout). The answers are those of the gRPC API, converted the way TF
Serving does.

Answers: an answer of up to ``SMALL_ANSWER_BYTES`` of JSON has a ``Content-Length``; a larger
one (rows of embeddings) is encoded row by row as it is sent, in chunks (``Transfer-Encoding:
chunked``; to an HTTP/1.0 client, up to the connection's close), so its memory is the output
arrays the gRPC answer holds too, not its JSON text or Python objects (~10 times more).

Connections: HTTP/1.1 with keep-alive; a listen backlog of ``REQUEST_QUEUE_SIZE``; a connection
idle, or slow to send its request, for ``timeout`` seconds is closed, so a slow client cannot
hold a thread. A client that closes its connection while its request waits is not computed
(the batcher asks before each chunk, as for a cancelled gRPC call).

Bodies: a POST needs a ``Content-Length`` (400 if it is missing, negative or not a number).
A request whose body's end two HTTP parsers could read differently is refused (400, connection
closed), so that no part of a body is ever read as the next request (request smuggling): two
``Content-Length`` headers, a list (``10, 12``), a ``Transfer-Encoding``, a header line that is
not ``Name: value`` (http.server would silently drop it and the headers after it) or one folded
over several lines. Every answer either follows a body read whole, or closes the connection:
a body the server does not read (over the limit, also on ``Expect: 100-continue``; sent with a
GET, to an unknown path, or to a method not served) is answered, then the connection closed
after a lingering close: what the client still sends is read and dropped, for at most
``LINGER_SECONDS`` and ``LINGER_BYTES``, so that a client still writing its body reads the
answer instead of a connection reset. At most ``PARSE_BUDGET_BYTES`` of bodies are parsed at
once, across connections (``BodyBudget``); the others wait their turn after reading their body.
JSON nested too deep for the parser or holding an integer of more than 4300 digits is a 400.
Errors http.server answers itself (a malformed request line 400, 414, 431, an unknown method
501) are ``{"error": "..."}`` too, and close the connection. ``stop`` closes idle connections at
once and the others when their request is answered or the grace period ends.
"""

from elmo_tf import extras

extras.require("serving", __name__)

import concurrent.futures
import ctypes
import http.server
import io
import itertools
import json
import logging
import re
import select
import socket
import threading
import time

from google.protobuf import json_format

from elmo_tf import backend

backend.require_tensorflow("serving")  # one line, before TensorFlow

from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
)

from elmo_tf.export.versions import parse_version
from elmo_tf.serving.errors import (
    ServingError,
    clip,
    invalid_argument,
    resource_exhausted,
    unavailable,
)
from elmo_tf.serving.request_limits import BodyBudget
from elmo_tf.serving.tensors import from_json, json_pieces

log = logging.getLogger("serving")

_MODEL = r"/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[0-9]+))?"
GET_PATH = re.compile(_MODEL + r"(?P<metadata>/metadata)?/?")
POST_PATH = re.compile(_MODEL + r":(?P<method>[a-z]+)")
REQUEST_QUEUE_SIZE = 1024  # listen backlog: bursts of new connections wait instead of failing
# A refused body is drained (read and dropped) for at most this long and this much.
LINGER_SECONDS = 10.0
LINGER_BYTES = 64 * 1024 * 1024
# Bytes of bodies parsed (and read into arrays) at once, across connections. JSON parses into
# Python objects up to ~25 times its size: 16 MiB of "[]," are 5.6 million lists, ~450 MB
# (benchmarks/rest_body_memory.py). At the default max_request_bytes (16 MiB) one body at the
# limit parses alone while many small ones parse side by side; a body over it (a larger
# --max-request-bytes) waits for the others and parses alone. A constant, not a ServerOptions
# field: it bounds the server's memory whatever one request may be.
PARSE_BUDGET_BYTES = 16 * 1024 * 1024
# A body of this size or more is parsed on the server's one parse thread, and once its
# objects are freed, malloc_trim gives the freed memory back to the system. glibc keeps large
# blocks freed by a thread in that thread's arena (one per connection thread, up to 8 per
# core), so each round of large bodies grew the server: 3 rounds of 8 bodies of "ab" strings
# at the limit peaked at +820 MB, +520 with the parse thread alone, +400 with both
# (benchmarks/rest_body_memory.py). Parsing holds the GIL, so one thread parses as fast.
LARGE_BODY_BYTES = 1024 * 1024
# An answer whose JSON text is longer than this is sent in chunks of about ANSWER_CHUNK_BYTES as
# it is encoded, not built whole: the text of the largest answer within the default limits
# (2,048 rows x 30 tokens, every output of the published model) is ~5 GB, its Python objects
# more (``json_pieces``).
SMALL_ANSWER_BYTES = 1024 * 1024
ANSWER_CHUNK_BYTES = 256 * 1024
try:
    _malloc_trim = ctypes.CDLL(None).malloc_trim  # glibc only
except (AttributeError, OSError, TypeError):
    _malloc_trim = None


class RestHandler(http.server.BaseHTTPRequestHandler):
    """One REST request; ``server`` is a ``RestServer``."""

    server_version = "elmo-tf-serving"
    protocol_version = "HTTP/1.1"  # keep-alive: every answer has a Content-Length or chunks
    # The version of a request whose request line is malformed: with http.server's "HTTP/0.9"
    # its 400 would go out as a bare body, without a status line or headers.
    default_request_version = "HTTP/1.0"
    # An answer is written as headers, then body: without TCP_NODELAY, Nagle's algorithm holds
    # the body until the client's delayed ACK of the headers (~40 ms on Linux) on every
    # keep-alive request (benchmarks/rest_frontends.py).
    disable_nagle_algorithm = True

    def setup(self):
        self.timeout = self.server.timeout_seconds  # socket timeout: idle and slow clients
        self.body_refused = False  # a body left unread: drain it before closing
        self.body_length = None  # of the request being answered, once its headers are read
        self.body_read = False
        self.parse_reservation = None  # room its body holds in the server's BodyBudget
        super().setup()
        self.rfile.close()  # read through a deadline instead
        self.request_reader = _RequestDeadline(
            self.connection.makefile("rb", buffering=0), self.connection, self.timeout
        )
        self.rfile = io.BufferedReader(self.request_reader)
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
        self.body_length, self.body_read, self.parse_reservation = None, False, None
        self.request_reader.next_request()
        try:
            super().handle_one_request()
        except (TimeoutError, ConnectionError):  # a slow or vanished client: drop it
            self.close_connection = True
        finally:
            if self.server.track(self, busy=False):  # stopping: no further request
                self.close_connection = True

    def parse_request(self):
        self.server.track(self, busy=True)  # a request line arrived: in flight until answered
        return super().parse_request() and self._check_framing()

    def _check_framing(self):
        """Reads the body's length (``body_length``, 0 for none) from the headers; refuses
        (400, closing the connection) headers that leave the body's end in doubt."""
        if self.body_length is None:
            length = _body_length(self.headers)
            if isinstance(length, str):
                self.send_error(400, length)
                return False
            self.body_length = length
        return True

    def handle_expect_100(self):
        """Refuses a body over the limit before the client sends it."""
        if not self._check_framing():
            return False
        limit = self.server.max_request_bytes
        if self.body_length > limit:
            self._send(413, {"error": _too_large(self.body_length, limit)})  # closes: unread
            return False
        return super().handle_expect_100()

    def send_error(self, code, message=None, explain=None):
        """Errors http.server answers itself (a malformed request line or header, 414, 431,
        an unknown method 501) as ``{"error": ...}``, like every other answer. The connection
        closes, as http.server closes it, after a lingering close (what is left of the request
        is unread)."""
        short, long = self.responses.get(code, ("Error", ""))
        if message is None:
            message = f"{short}: {long}" if long else short
        elif explain is not None:
            message = f"{message} ({explain})"
        self.log_error("code %d, message %s", code, message)
        self.close_connection = True
        self.body_refused = True
        self._send(code, {"error": clip(message, 200)})

    def do_GET(self):  # noqa: N802 - http.server's method name
        match = GET_PATH.fullmatch(self.path.split("?")[0])
        if match is None:
            return self._send(404, {"error": f"Malformed request: GET {clip(self.path)}"})
        self._answer(self._metadata if match["metadata"] else self._status, match)

    def do_POST(self):  # noqa: N802
        match = POST_PATH.fullmatch(self.path.split("?")[0])
        if match is None:
            return self._send(404, {"error": f"Malformed request: POST {clip(self.path)}"})
        if match["method"] != "predict":
            return self._send(501, {"error": f"method '{clip(match['method'])}' is not served"})
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
        finally:
            _release_parse_budget(self)

    def _send(self, status, body):
        """Answers ``body`` (JSON values and numpy arrays) as JSON. An answer of up to
        ``SMALL_ANSWER_BYTES`` goes out with a ``Content-Length``; a larger one is encoded and
        sent in pieces (``Transfer-Encoding: chunked``), so that the server never holds more
        of its text than a piece (``json_pieces``)."""
        if self.body_length and not self.body_read:
            # What the client sends of the unread body must not be read as the next request.
            self.close_connection = True
            self.body_refused = True
        self.connection.settimeout(self.timeout)  # reading the request may have shortened it
        pieces = (piece.encode("utf-8") for piece in json_pieces(body))
        head, size = [], 0
        for piece in pieces:
            head.append(piece)
            size += len(piece)
            if size > SMALL_ANSWER_BYTES:
                break
        else:
            pieces = None
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            chunked = pieces is not None and self.request_version == "HTTP/1.1"
            if pieces is None:
                self.send_header("Content-Length", str(size))
            elif chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:  # an HTTP/1.0 client knows no chunks: the answer ends where the connection does
                self.close_connection = True
            if self.close_connection or self.server.stopping:
                self.close_connection = True
                self.send_header("Connection", "close")
            self.end_headers()
            if pieces is None:
                self.wfile.write(b"".join(head))
                return
            self._write_pieces(itertools.chain(head, pieces), chunked)
        except OSError:  # the client gave up, or reads too slowly
            self.close_connection = True

    def _write_pieces(self, pieces, chunked):
        """Writes ``pieces`` in writes of about ``ANSWER_CHUNK_BYTES``, as chunks if
        ``chunked``. A failure while encoding, after the status line went out, can only close
        the connection: the client reads an answer that ends early (without its last chunk)."""
        buffer, size = [], 0
        try:
            for piece in pieces:
                buffer.append(piece)
                size += len(piece)
                if size >= ANSWER_CHUNK_BYTES:
                    self._write(b"".join(buffer), chunked)
                    buffer, size = [], 0
        except OSError:  # the client gave up or is too slow: _send closes the connection
            raise
        except Exception:  # noqa: BLE001 - a bug: log it, cut the answer short
            log.exception("internal error while encoding an answer")
            self.close_connection = True
            return
        self._write(b"".join(buffer), chunked)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def _write(self, data, chunked):
        if data and chunked:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        self.wfile.write(data)

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
        body = self._read_json()  # holds room in the parse budget until the inputs are read
        try:
            signature, row_format, payload = _predict_body(body)
        except ServingError as e:
            error = _bare(e)
        else:
            error = None
        del body  # only the payload is needed now
        if error is not None:
            raise error
        held = [payload]
        del payload
        reader = _row_inputs if row_format else _columnar_inputs
        limits = self.server.model_server.limits

        def read_inputs(spec):
            try:
                return reader(held.pop(), spec, limits)
            except ServingError as e:
                error = _bare(e)
            finally:  # the JSON objects are freed by now; the arrays are small
                _release_parse_budget(self)
            raise error

        _, outputs = self.server.model_server.predict(
            name, version, signature, read_inputs, [], alive=self._client_connected
        )
        # Arrays stay arrays here: _send encodes them a row at a time (json_pieces).
        values = outputs
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
        """The parsed body of a POST. Parsing waits for room in the server's ``BodyBudget``
        (the body's bytes are in memory already, its Python objects, many times larger, are
        not yet); the room is held in ``parse_reservation`` until the inputs are read."""
        data = self._read_post_body()
        _check_structure(data, self.server.model_server.limits)
        reservation = self.server.body_budget.reserve(len(data), self.server.timeout_seconds)
        if reservation is None:
            raise unavailable("the server is busy parsing other large requests; retry later")
        self.parse_reservation = reservation
        try:
            if len(data) < LARGE_BODY_BYTES:
                return parse_json_body(data)
            return self.server.parser.submit(parse_json_body, data).result()
        except ServingError as e:
            error = _bare(e)
        del data
        _release_parse_budget(self)
        raise error

    def _read_post_body(self):
        """The body of a POST (a ``bytearray``); 400 without a ``Content-Length``, 413 over
        ``max_request_bytes`` (not read, and the connection closed)."""
        if self.headers.get("Content-Length") is None:
            self.close_connection = True  # a body may follow, of unknown length
            self.body_refused = True
            raise invalid_argument("a POST needs a Content-Length header")
        limit = self.server.max_request_bytes
        if self.body_length > limit:
            raise resource_exhausted(_too_large(self.body_length, limit), http_status=413)
        return self._read_body(self.body_length)

    def _read_body(self, length):
        """``length`` bytes of body into one buffer (no second copy from joining pieces); the
        request's deadline (``_RequestDeadline``) bounds the time it takes."""
        body = bytearray(length)
        got = 0
        with memoryview(body) as view:
            while got < length:
                count = self.rfile.readinto1(view[got:])
                if not count:
                    raise ConnectionError("the client closed the connection mid-body")
                got += count
        self.body_read = True
        return body


class _RequestDeadline(io.RawIOBase):
    """The reading side of a connection, with a deadline for each request as a whole.

    Waiting for a request's first byte may take ``timeout`` seconds (an idle keep-alive
    connection); from that byte on, the request line, headers and body must arrive within
    ``timeout`` seconds in all. The socket's own timeout bounds each read only, so a client
    sending a header byte every second would hold a thread for ever (slowloris).
    """

    def __init__(self, raw, sock, timeout):
        super().__init__()
        self._raw = raw
        self._sock = sock
        self._timeout = timeout
        self._deadline = None

    def next_request(self):
        """The next read waits for a new request's first byte."""
        self._deadline = None

    def readable(self):
        return True

    def readinto(self, buffer):
        if self._deadline is None:
            self._sock.settimeout(self._timeout)
        else:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the client is sending its request too slowly")
            self._sock.settimeout(remaining)
        count = self._raw.readinto(buffer)
        if count and self._deadline is None:
            self._deadline = time.monotonic() + self._timeout
        return count

    def close(self):
        self._raw.close()
        super().close()


class RestServer(http.server.ThreadingHTTPServer):
    """The REST front end of a ``ModelServer``; a thread per connection.

    ``stop(deadline)`` stops accepting, closes idle connections, waits for the requests in
    flight until ``deadline`` (``time.monotonic()``), then closes whatever is still open.

    Args:
        timeout: seconds a connection may be idle, or take to send one request.
        parse_budget: bytes of bodies parsed at once (``BodyBudget``).
    """

    daemon_threads = True  # stop() does the waiting, bounded by its deadline
    block_on_close = False
    request_queue_size = REQUEST_QUEUE_SIZE

    def __init__(
        self,
        address,
        model_server,
        prediction_service,
        model_service,
        max_bytes,
        timeout=30.0,
        parse_budget=PARSE_BUDGET_BYTES,
    ):
        self.model_server = model_server
        self.prediction_service = prediction_service
        self.model_service = model_service
        self.max_request_bytes = max_bytes
        self.timeout_seconds = timeout
        self.body_budget = BodyBudget(parse_budget)
        # Large bodies are parsed here (LARGE_BODY_BYTES).
        self.parser = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rest-parse")
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
        self.parser.shutdown(wait=False)  # after the requests in flight: they may need it


def _close(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it
    except OSError:
        pass


def _check_structure(data, limits):
    """413 for a body holding more JSON arrays, objects or strings than any request within
    ``limits`` needs, counted in its bytes before it is parsed: each costs a Python object, so
    a body of empty lists (``[[],[],...]``) or short strings parses to 20-30 times its size.
    A request needs an array or object per row and per token at most (``char_ids`` rows,
    ``{"b64": ...}`` tokens), two strings per token or row (a key and its value), and a few
    around them; a bracket or an escaped quote inside a string counts too, which can only
    overcount."""
    tokens, rows = limits.max_request_tokens, limits.max_request_rows
    counts = {
        "JSON arrays and objects": (data.count(b"[") + data.count(b"{"), tokens + rows + 64),
        "JSON strings": (data.count(b'"') // 2, 2 * (tokens + rows) + 64),
    }
    for what, (count, most) in counts.items():
        if count > most:
            raise resource_exhausted(
                f"the body holds {count:,} {what}, more than the {most:,} a request of at most "
                f"max_request_tokens ({tokens:,}) tokens and max_request_rows ({rows:,}) rows "
                "needs; send a smaller request",
                http_status=413,
            )


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


def _body_length(headers):
    """The length of a request's body (0 if it declares none), else why its end is in doubt
    (a str): each is a way for two HTTP parsers to disagree on where the next request starts."""
    if headers.defects:  # a line that is not "Name: value"; it and the lines after are dropped
        return "malformed header line: each must be 'Name: value', with no space before ':'"
    if any("\n" in value for value in headers.values()):  # obs-fold (RFC 9112, 5.2)
        return "a header is folded over several lines; send each header on one line"
    if headers.get("Transfer-Encoding") is not None:
        return "send the body with a Content-Length, not a Transfer-Encoding"
    values = headers.get_all("Content-Length") or []
    if len(values) > 1:
        return f"the request has {len(values)} Content-Length headers; send one"
    if not values:
        return 0
    value = values[0].strip()
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return f"Content-Length must be a non-negative integer, got '{clip(value, 20)}'"
    return int(value)


def _too_large(length, limit):
    return f"request of {length} bytes is over the limit of {limit} bytes (max_request_bytes)"


def _version(match):
    """The version a URL names (``None`` for the newest); 400 for one beyond int64."""
    text = match["version"]
    if text is None:
        return None
    version = parse_version(text)
    if version is None:
        raise invalid_argument(
            f"version '{clip(text)}' in the URL is not a version: at most 2**63 - 1 (int64)"
        )
    return version


def _release_parse_budget(handler):
    """Releases the room ``handler``'s body holds in the parse budget, if it holds any (a
    front end that runs ``RestHandler._predict`` on a stand-in handler has no budget:
    benchmarks/rest_frontends.py)."""
    reservation = getattr(handler, "parse_reservation", None)
    released = reservation is not None and reservation.release()
    if released and reservation.size >= LARGE_BODY_BYTES and _malloc_trim is not None:
        _malloc_trim(0)


def _bare(error):
    """``error`` again, without the traceback and context whose frames hold the parsed body:
    raised in its place, it lets the body's objects go before the parse budget is released."""
    return ServingError(error.code, error.message, error.http_status)


def _predict_body(body):
    """``(signature name, row format?, payload)`` of a parsed ``:predict`` body."""
    signature = body.get("signature_name") or "serving_default"
    if not isinstance(signature, str):
        raise invalid_argument("'signature_name' must be a string")
    if ("instances" in body) == ("inputs" in body):
        raise invalid_argument("the body must hold exactly one of 'instances' or 'inputs'")
    row_format = "instances" in body
    return signature, row_format, body["instances" if row_format else "inputs"]


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
