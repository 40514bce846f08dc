"""TF Serving's REST API over HTTP, on aiohttp's server: ``elmo_tf.serving.rest_protocol``
answers, this module carries requests and answers.

aiohttp (a maintained asyncio HTTP server, its parser llhttp) does HTTP/1.1 through its public
low-level API (``web.Server``, ``web.ServerRunner``, ``web.TCPSite``): keep-alive, message
framing (one ``Content-Length``, or a chunked body; a request whose body's end two parsers
could read differently is a 400, so no body is ever read as the next request), limits on
request lines and headers, a lingering close after an answer sent before its body was read,
graceful shutdown. It runs its event loop in a thread of its own; the answers are computed on
a pool of ``WORKERS`` threads (the model's batcher groups concurrent requests). The low-level
server rather than ``web.AppRunner`` with an ``Application``: the routes are
``rest_protocol``'s, on the path as it was sent (an application's router matches decoded
paths), and two guards below need the connection handler, which an application makes itself.

What aiohttp does not do, this module does, each for a row of docs/robustness.md ("The
server"):

- requests: HTTP/1.0 and 1.1 only (another version is a 505 on an HTTP/1.1 status line);
  ``Transfer-Encoding`` ``chunked`` only (501 for another); a body over ``max_request_bytes``
  is answered 413 before it is read (also one announced with ``Expect: 100-continue``), a
  chunked or compressed one as soon as it passes the limit; ``Content-Encoding`` gzip or
  deflate, decoded as it arrives (``content_coding``);
- memory: a body is held as its bytes arrive, never allocated at the length its headers
  declare, and the bodies of all connections together take room in ``ReceivedBodies``
  (``in_flight``), waiting for it within their deadline (then 503); the answers being written
  take room in ``WrittenAnswers``: one that finds none is a 503, and its connection closes;
- time: from its first byte a request (line, headers and body) must arrive within
  ``timeout`` seconds (slowloris), and a connection idle for ``timeout`` is closed
  (``_Connection``); a client is waited on to read its answer for ``timeout`` seconds in all,
  then its connection is cut and the answer dropped;
- an answer of up to ``SMALL_ANSWER_BYTES`` of JSON has a ``Content-Length``; a larger one
  (rows of embeddings) is encoded row by row as it is sent, in chunks, so its memory is the
  output arrays, not its JSON text (~10 times more);
- every error, the parser's own included, is ``{"error": "..."}`` on one line;
- a client that closed its connection while its request waits is not computed (the batcher
  asks before each chunk, as for a cancelled gRPC call).
"""

import asyncio
import concurrent.futures
import contextlib
import email.utils
import http
import json
import logging
import socket
import struct
import threading
import time

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import numpy as np
from aiohttp import web

from elmo_tf.checks import shown
from elmo_tf.serving import rest_protocol
from elmo_tf.serving.content_coding import BodyDecoder
from elmo_tf.serving.errors import (
    ServingError,
    invalid_argument,
    resource_exhausted,
    unavailable,
)
from elmo_tf.serving.in_flight import ReceivedBodies, WrittenAnswers
from elmo_tf.serving.tensors import json_pieces

log = logging.getLogger("serving")

# Connections waiting to be accepted: bursts of new connections wait instead of failing.
BACKLOG = 1024
# Threads computing answers (parsing, the model, encoding); requests beyond wait their turn.
WORKERS = 64
# A body refused before it was read is drained (read and dropped) for at most this long, so
# that a client still writing it reads the answer instead of a connection reset.
LINGER_SECONDS = 10.0
# An answer whose JSON text is longer than this is sent in chunks of about ANSWER_CHUNK_BYTES as
# it is encoded, not built whole (``json_pieces``).
SMALL_ANSWER_BYTES = 1024 * 1024
ANSWER_CHUNK_BYTES = 256 * 1024
# The longest request line and header line aiohttp reads.
MAX_LINE_BYTES = 65536
# Bytes a connection reads ahead of its handler: what a connection waiting for room in
# ReceivedBodies holds.
READ_BUFFER_BYTES = 64 * 1024
HTTP_VERSIONS = ((1, 0), (1, 1))


class RestServer:
    """The REST front end of a ``ModelServer`` on ``address`` (``(host, port)``; port 0: any
    free one), listening once constructed; ``server_address`` is the bound address.

    ``stop(deadline)`` stops accepting, closes idle connections, lets the requests in flight
    finish until ``deadline`` (``time.monotonic()``), then closes whatever is still open.

    Args:
        protocol: the ``rest_protocol.RestProtocol`` answering.
        max_bytes: the largest request body (``max_request_bytes``).
        timeout: seconds a connection may be idle, take to send one request, or leave its
            answer unread.
        bodies: the ``ReceivedBodies`` all connections' bodies take room in.
        answers: the ``WrittenAnswers`` all answers take room in.
    """

    def __init__(self, address, protocol, max_bytes, timeout=30.0, bodies=None, answers=None):
        self.protocol = protocol
        self.max_request_bytes = max_bytes
        self.timeout_seconds = timeout
        self.bodies = bodies or ReceivedBodies()
        self.answers = answers or WrittenAnswers()
        self.stopping = False
        self._pool = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="rest")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rest", daemon=True)
        self._thread.start()
        try:
            self.server_address = self._call(self._start(*address))
        except BaseException:
            self._close_loop()
            raise

    def _call(self, coroutine, timeout=None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _start(self, host, port):
        self.web_server = _Server(
            self._handle,
            timeout=self.timeout_seconds,
            keepalive_timeout=self.timeout_seconds,
            lingering_time=LINGER_SECONDS,
            max_line_size=MAX_LINE_BYTES,
            max_field_size=MAX_LINE_BYTES,
            read_bufsize=READ_BUFFER_BYTES,
            auto_decompress=False,  # content_coding decodes, bounded
            access_log=None,
        )
        self._runner = web.ServerRunner(self.web_server)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, host, port, backlog=BACKLOG, reuse_address=True)
        try:
            await self._site.start()
        except BaseException:
            await self._runner.cleanup()
            raise
        return self._runner.addresses[0][:2]

    def open_connections(self):
        """How many client connections are open now."""
        return len(self.web_server.connections)

    def stop(self, deadline):
        """Stops accepting; idle connections close now, busy ones by ``deadline``."""
        self.stopping = True
        timeout = max(0.0, deadline - time.monotonic())
        try:
            self._call(self._stop(timeout), timeout + 5.0)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.warning("REST connections still open at the end of the grace period: closed")
        finally:
            self._close_loop()

    async def _stop(self, timeout):
        await self._site.stop()  # no new connections
        self.web_server.pre_shutdown()  # each connection closes once its request is answered
        await self.web_server.shutdown(timeout)  # then what is still open is closed
        await self._runner.cleanup()

    def _close_loop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        self._pool.shutdown(wait=False)

    # ------------------------------------------------------------------ one request

    async def _handle(self, request):
        connection = request.protocol
        body, received = b"", None
        try:
            if request.version not in HTTP_VERSIONS:
                return _version_not_supported(request)
            route = rest_protocol.route(request.method, request.rel_url.raw_path)
            if route.kind == "predict":
                received = self.bodies.begin()
                body = await self._read_body(request, received)
            connection.request_received()
            transport = request.transport  # read by the workers: closing once the client left
            answer = await self._loop.run_in_executor(
                self._pool, self.protocol.answer, route, body, lambda: _open(transport)
            )
            body = None
            if received is not None:
                received.release()
            return await self._send(request, 200, answer)
        except ServingError as e:
            connection.request_received()
            body = None
            if received is not None:
                received.release()
            close = request.method == "CONNECT"  # what follows it is no HTTP request
            return await self._send(request, e.http_status, {"error": e.message}, close)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            # The client left, or its body stopped coming (the deadline closed it): no one
            # waits for an answer.
            response = web.Response(status=400)
            response.force_close()
            return response
        except Exception:  # noqa: BLE001 - a bug answers 500 and the server stays up
            log.exception("internal error")
            return await self._send(request, 500, {"error": "internal error; see the server log"})
        finally:
            if received is not None:
                received.release()
            connection.answered()

    async def _read_body(self, request, received):
        """A POST's body (a ``bytearray`` grown as its bytes arrive, decoded if it was sent
        compressed); 400 without a length or chunks, 501 for a transfer coding other than
        chunked, 415 for a content coding other than gzip or deflate, 413 over
        ``max_request_bytes`` (a declared length is refused unread: aiohttp drains it after
        the answer), 503 when there was no room for it in ``ReceivedBodies`` in time."""
        limit = self.max_request_bytes
        length = request.content_length
        transfer = request.headers.get("Transfer-Encoding")
        if transfer is not None and transfer.strip().lower() != "chunked":
            raise ServingError(
                rest_protocol.UNIMPLEMENTED,
                f"Transfer-Encoding {shown(transfer)} is not supported: send the body with a "
                "Content-Length or as chunks (Transfer-Encoding: chunked), compressed with "
                "Content-Encoding: gzip if you like",
            )
        if length is None and transfer is None:
            raise invalid_argument("a POST needs a Content-Length header")
        if length is not None and length > limit:
            raise resource_exhausted(_too_large(length, limit), http_status=413)
        decoder = BodyDecoder(request.headers.get("Content-Encoding"))
        if request.headers.get("Expect", "").lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body, sent = bytearray(), 0
        async for data in request.content.iter_any():
            sent += len(data)
            if length is None and sent > limit:
                raise resource_exhausted(_too_large(f"more than {limit}", limit), http_status=413)
            for piece in decoder.decode(data):
                if len(body) + len(piece) > limit:
                    raise resource_exhausted(
                        f"request body decodes to more than {limit} bytes, over the limit of "
                        f"{limit} bytes (max_request_bytes)",
                        http_status=413,
                    )
                try:
                    await received.take(len(piece), request.protocol.time_left())
                except asyncio.TimeoutError:
                    raise unavailable(
                        "the server is receiving other large request bodies; retry later"
                    ) from None
                body += piece
        if length is not None and sent < length:
            raise asyncio.IncompleteReadError(b"", length)  # the client left mid-body
        decoder.finish()
        received.received()
        return body

    async def _send(self, request, status, value, close=False):
        """Answers ``value`` (JSON values and NumPy arrays) as JSON: with a ``Content-Length``
        up to ``SMALL_ANSWER_BYTES``, else encoded and sent in pieces as it goes; the client
        has ``timeout`` seconds in all to read it (``_Writer``)."""
        pieces = (piece.encode("utf-8") for piece in json_pieces(value))
        head, whole = await self._loop.run_in_executor(
            self._pool, _take, pieces, SMALL_ANSWER_BYTES
        )
        size = len(head) if whole else len(head) + _array_bytes(value)
        del value
        if not self.answers.take(size):
            return _unwritten(request, self.answers.capacity)
        writer = _Writer(request, self.timeout_seconds)
        try:
            if whole:
                response = web.Response(status=status, body=head, content_type="application/json")
                if close or self.stopping:
                    response.force_close()
                await writer.wait(response.prepare(request))
                await writer.wait(response.write_eof())
                return response
            return await self._stream(request, status, head, pieces, writer)
        except asyncio.TimeoutError:
            log.debug("closed a connection: its client left its answer unread for %s s", writer)
            writer.cut()
            return web.Response(status=status)  # nothing more is sent: the connection is cut
        finally:
            self.answers.give_back(size)

    async def _stream(self, request, status, head, pieces, writer):
        response = web.StreamResponse(status=status)
        response.content_type = "application/json"
        if request.version >= (1, 1):
            response.enable_chunked_encoding()
        else:  # an HTTP/1.0 client knows no chunks: the answer ends where the connection does
            response.force_close()
        await writer.wait(response.prepare(request))
        await writer.wait(response.write(head))
        try:
            while True:
                chunk, done = await self._loop.run_in_executor(
                    self._pool, _take, pieces, ANSWER_CHUNK_BYTES
                )
                await writer.wait(response.write(chunk))
                if done:
                    break
        except (ConnectionError, asyncio.TimeoutError):
            raise
        except Exception:  # noqa: BLE001 - a bug: log it, cut the answer short
            log.exception("internal error while encoding an answer")
            response.force_close()
            return response
        await writer.wait(response.write_eof())
        return response


class _Writer:
    """The time a client may leave its answer unread: every write of the answer is awaited
    within what is left of ``timeout`` seconds, counted over the whole answer (the time the
    server spends encoding is not counted). Holds the row "a client that reads its answer
    slowly, or not at all"."""

    def __init__(self, request, timeout):
        self.transport = request.transport
        self.left = timeout
        self.timeout = timeout

    async def wait(self, write):
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await asyncio.wait_for(write, max(self.left, 0.0))
        finally:
            self.left -= loop.time() - started

    def cut(self):
        """Resets the connection, dropping what waits to be sent: ``close`` would keep it
        until the client reads it, and a plain socket close would leave it to the kernel to
        send (a linger of 0 makes the close a reset)."""
        if self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def __str__(self):
        return f"{self.timeout:g}"


def _open(transport):
    """Whether the client of ``transport`` is still there (any thread may ask)."""
    return transport is not None and not transport.is_closing()


def _take(pieces, size):
    """``(bytes, exhausted)``: the next pieces of ``pieces``, about ``size`` bytes of them."""
    taken, total = [], 0
    for piece in pieces:
        taken.append(piece)
        total += len(piece)
        if total > size:
            return b"".join(taken), False
    return b"".join(taken), True


def _array_bytes(value):
    """The bytes of the NumPy arrays in an answer (what a long answer holds while it is sent)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(_array_bytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_array_bytes(v) for v in value)
    return 0


def _too_large(length, limit):
    return f"request of {length} bytes is over the limit of {limit} bytes (max_request_bytes)"


def _unwritten(request, capacity):
    """503 for an answer that finds no room in ``WrittenAnswers``; the connection closes."""
    message = (
        f"the server holds {capacity:,} bytes of answers that their clients have not read yet; "
        "retry later"
    )
    response = web.json_response({"error": message}, status=503)
    response.force_close()
    return response


def _version_not_supported(request):
    """505 on an HTTP/1.1 status line for a request of another HTTP version (0.9, 2.0), then
    the connection closes: aiohttp would answer it in that version's name."""
    major, minor = request.version
    return _error_and_close(request, 505, f"HTTP/{major}.{minor} is not supported: send HTTP/1.1")


def _error_and_close(request, status, message):
    """``{"error": message}`` with ``status`` on an HTTP/1.1 status line, written to the
    connection as it is, which then closes. For the answers whose request aiohttp gives no
    HTTP version of its own: another version's, which it would answer in that version's name,
    and a request its parser refused, which it answers as HTTP/1.0 (the request it stands in
    for such a one is an HTTP/1.0 request). The returned response is what aiohttp then
    writes to the closed connection: nothing."""
    text = json.dumps({"error": message})
    head = (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n"
    )
    if request.transport is not None:
        request.transport.write((head + text).encode("ascii"))
        request.transport.close()
    response = web.Response(status=status)
    response.force_close()
    return response


class _Connection(web.RequestHandler):
    """aiohttp's connection handler with a deadline per request (``timeout``), holding the
    rows "REST client idle, stalled mid-headers or stalled mid-body" and "REST headers sent a
    byte at a time (slowloris)" (aiohttp bounds only the idle time between requests): idle, a
    connection may wait ``timeout`` for a request's first byte; from that byte on, the request
    has ``timeout`` to arrive whole (``request_received``). And the row "errors the HTTP
    parser answers itself": they are JSON (``handle_error``)."""

    def __init__(self, manager, *, timeout, **kwargs):
        super().__init__(manager, **kwargs)
        self.request_timeout = timeout
        self.request_timer = None
        self.deadline = None
        self.receiving = False
        self.handling = False

    def connection_made(self, transport):
        super().connection_made(transport)
        self.arm()  # the first request's first byte

    def data_received(self, data):
        if not self.receiving and not self.handling:
            self.receiving = True
            self.arm()  # the request, whole, from its first byte
        super().data_received(data)

    def request_received(self):
        """The request is whole (headers and body): its deadline is off."""
        self.receiving, self.handling = False, True
        self.disarm()

    def answered(self):
        """The answer is out: the next request may take ``timeout`` to begin."""
        self.handling = False
        if not self.receiving:
            self.arm()

    def time_left(self):
        """Seconds until the request's deadline."""
        if self.deadline is None:
            return self.request_timeout
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def connection_lost(self, exc):
        self.disarm()
        super().connection_lost(exc)

    def arm(self):
        self.disarm()
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + self.request_timeout
        self.request_timer = loop.call_at(self.deadline, self.too_slow)

    def disarm(self):
        if self.request_timer is not None:
            self.request_timer.cancel()
            self.request_timer = None
        self.deadline = None

    def too_slow(self):
        self.request_timer = None
        timeout = self.request_timeout
        log.debug("closed a connection: idle, or its request too slow, for %g s", timeout)
        self.force_close()

    def handle_error(self, request, status=500, exc=None, message=None):
        """The errors aiohttp answers itself (a request it cannot parse: a malformed request
        line or header, a line too long, too many headers, an ambiguous body length) as
        ``{"error": ...}`` on an HTTP/1.1 status line, as every other answer."""
        if request.writer.output_size > 0:  # an answer went out: nothing else can
            raise ConnectionError("an answer was sent already; the connection closes")
        if status >= 500:
            log.error("error handling a request", exc_info=exc)
            text = "internal error; see the server log"
        else:
            text = shown(
                " ".join(str(message or getattr(exc, "message", "") or status).split()),
                200,
                quote=False,
            )
        return _error_and_close(request, status, text)


class _Server(web.Server):
    """aiohttp's low-level server (``web.Server``, the protocol factory ``web.TCPSite``
    listens with), making ``_Connection``s with the keyword arguments it was given."""

    def __init__(self, handler, **connection_options):
        super().__init__(handler)
        self.connection_options = connection_options

    def __call__(self):
        return _Connection(self, loop=asyncio.get_running_loop(), **self.connection_options)
