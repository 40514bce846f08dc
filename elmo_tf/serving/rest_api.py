"""TF Serving's REST API over HTTP, on aiohttp's server: ``elmo_tf.serving.rest_protocol``
answers, this module carries requests and answers.

aiohttp (a maintained asyncio HTTP server, its parser llhttp) does HTTP/1.1: keep-alive,
message framing (one ``Content-Length``, or a chunked body; a request whose body's end two
parsers could read differently is a 400, so no body is ever read as the next request), limits
on request lines and headers, a lingering close after an answer sent before its body was read,
graceful shutdown. It runs its event loop in a thread of its own; the answers are computed on
a pool of ``WORKERS`` threads (the model's batcher groups concurrent requests).

What aiohttp does not do, this module does:

- a deadline per request: from its first byte, the request line, headers and body must arrive
  within ``timeout`` seconds (a client sending a byte a second would otherwise hold its
  connection for ever: slowloris); a connection idle for ``timeout`` seconds is closed;
- a body over ``max_request_bytes`` is answered 413 before it is read (also one announced
  with ``Expect: 100-continue``), a chunked one as soon as it passes the limit;
- an answer of up to ``SMALL_ANSWER_BYTES`` of JSON has a ``Content-Length``; a larger one
  (rows of embeddings) is encoded row by row as it is sent, in chunks, so its memory is the
  output arrays, not its JSON text (~10 times more);
- every error, the parser's own included, is ``{"error": "..."}`` on one line;
- a client that closed its connection while its request waits is not computed (the batcher
  asks before each chunk, as for a cancelled gRPC call).
"""

import asyncio
import concurrent.futures
import logging
import threading
import time

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

from aiohttp import web

from elmo_tf.serving import rest_protocol
from elmo_tf.serving.errors import ServingError, clip, invalid_argument, resource_exhausted
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


class RestServer:
    """The REST front end of a ``ModelServer`` on ``address`` (``(host, port)``; port 0: any
    free one), listening once constructed; ``server_address`` is the bound address.

    ``stop(deadline)`` stops accepting, closes idle connections, lets the requests in flight
    finish until ``deadline`` (``time.monotonic()``), then closes whatever is still open.

    Args:
        protocol: the ``rest_protocol.RestProtocol`` answering.
        max_bytes: the largest request body (``max_request_bytes``).
        timeout: seconds a connection may be idle, or take to send one request.
    """

    def __init__(self, address, protocol, max_bytes, timeout=30.0):
        self.protocol = protocol
        self.max_request_bytes = max_bytes
        self.timeout_seconds = timeout
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
        self._server = _Server(
            self._handle,
            timeout=self.timeout_seconds,
            keepalive_timeout=self.timeout_seconds,
            lingering_time=LINGER_SECONDS,
            max_line_size=MAX_LINE_BYTES,
            max_field_size=MAX_LINE_BYTES,
            access_log=None,
        )
        self._runner = web.ServerRunner(self._server)
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
        return len(self._server.connections)

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
        self._server.pre_shutdown()  # each connection closes once its request is answered
        await self._server.shutdown(timeout)  # then what is still open is closed
        await self._runner.cleanup()

    def _close_loop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        self._pool.shutdown(wait=False)

    # ------------------------------------------------------------------ one request

    async def _handle(self, request):
        connection = request.protocol
        try:
            route = rest_protocol.route(request.method, request.path)
            body = await self._read_body(request) if route.kind == "predict" else b""
            connection.request_received()
            answer = await self._loop.run_in_executor(
                self._pool, self.protocol.answer, route, body, connection.client_waits
            )
            del body
            return await self._send(request, 200, answer)
        except ServingError as e:
            connection.request_received()
            return await self._send(request, e.http_status, {"error": e.message})
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
            connection.answered()

    async def _read_body(self, request):
        """A POST's body (a ``bytearray``); 400 without a length or chunks, 413 over
        ``max_request_bytes`` (not read: aiohttp drains it after the answer)."""
        limit = self.max_request_bytes
        length = request.content_length
        chunked = request.headers.get("Transfer-Encoding", "").lower() == "chunked"
        if length is None and not chunked:
            raise invalid_argument("a POST needs a Content-Length header")
        if length is not None and length > limit:
            raise resource_exhausted(_too_large(length, limit), http_status=413)
        if request.headers.get("Expect", "").lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        # Into one buffer, each piece dropped once copied: the body is held once, not twice.
        body = bytearray(length or 0)
        size = 0
        async for piece in request.content.iter_any():
            if size + len(piece) > (limit if length is None else length):
                if length is not None:  # the parser stops at the length: not reached
                    raise invalid_argument("the body is longer than its Content-Length")
                raise resource_exhausted(_too_large(f"more than {limit}", limit), http_status=413)
            body[size : size + len(piece)] = piece
            size += len(piece)
        if length is not None and size < length:
            raise asyncio.IncompleteReadError(b"", length)  # the client left mid-body
        return body

    async def _send(self, request, status, body):
        """Answers ``body`` (JSON values and NumPy arrays) as JSON: with a ``Content-Length``
        up to ``SMALL_ANSWER_BYTES``, else encoded and sent in pieces as it goes."""
        pieces = (piece.encode("utf-8") for piece in json_pieces(body))
        head, whole = await self._loop.run_in_executor(
            self._pool, _take, pieces, SMALL_ANSWER_BYTES
        )
        if whole:
            response = web.Response(status=status, body=head, content_type="application/json")
            if self.stopping:
                response.force_close()
            return response
        response = web.StreamResponse(status=status)
        response.content_type = "application/json"
        if request.version >= (1, 1):
            response.enable_chunked_encoding()
        else:  # an HTTP/1.0 client knows no chunks: the answer ends where the connection does
            response.force_close()
        await response.prepare(request)
        await response.write(head)
        try:
            while True:
                chunk, done = await self._loop.run_in_executor(
                    self._pool, _take, pieces, ANSWER_CHUNK_BYTES
                )
                await response.write(chunk)
                if done:
                    break
        except ConnectionError:
            raise
        except Exception:  # noqa: BLE001 - a bug: log it, cut the answer short
            log.exception("internal error while encoding an answer")
            response.force_close()
            return response
        await response.write_eof()
        return response


def _take(pieces, size):
    """``(bytes, exhausted)``: the next pieces of ``pieces``, about ``size`` bytes of them."""
    taken, total = [], 0
    for piece in pieces:
        taken.append(piece)
        total += len(piece)
        if total > size:
            return b"".join(taken), False
    return b"".join(taken), True


def _too_large(length, limit):
    return f"request of {length} bytes is over the limit of {limit} bytes (max_request_bytes)"


class _Connection(web.RequestHandler):
    """aiohttp's connection handler with a deadline per request (``timeout``): idle, a
    connection may wait ``timeout`` for a request's first byte; from that byte on, the request
    has ``timeout`` to arrive whole (``request_received``). Its errors are JSON."""

    def __init__(self, manager, *, timeout, **kwargs):
        super().__init__(manager, **kwargs)
        self._timeout = timeout
        self._timer = None
        self._receiving = False
        self._handling = False
        self._gone = threading.Event()

    def connection_made(self, transport):
        super().connection_made(transport)
        self._arm()  # the first request's first byte

    def data_received(self, data):
        if not self._receiving and not self._handling:
            self._receiving = True
            self._arm()  # the request, whole, from its first byte
        super().data_received(data)

    def request_received(self):
        """The request is whole (headers and body): its deadline is off."""
        self._receiving, self._handling = False, True
        self._disarm()

    def answered(self):
        """The answer is out: the next request may take ``timeout`` to begin."""
        self._handling = False
        if not self._receiving:
            self._arm()

    def client_waits(self):
        """Whether the client still waits for the answer (any thread may ask)."""
        return not self._gone.is_set()

    def connection_lost(self, exc):
        self._gone.set()
        self._disarm()
        super().connection_lost(exc)

    def _arm(self):
        self._disarm()
        self._timer = self._loop.call_later(self._timeout, self._too_slow)

    def _disarm(self):
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self):
        self._timer = None
        log.debug("closed a connection: idle, or its request too slow, for %s s", self._timeout)
        self.force_close()
        if self.transport is not None:
            self.transport.close()

    def handle_error(self, request, status=500, exc=None, message=None):
        """The errors aiohttp answers itself (a request it cannot parse: a malformed request
        line or header, a line too long, an ambiguous body length) as ``{"error": ...}``."""
        if request.writer.output_size > 0:  # an answer went out: nothing else can
            raise ConnectionError("an answer was sent already; the connection closes")
        if status >= 500:
            log.error("error handling a request", exc_info=exc)
            text = "internal error; see the server log"
        else:
            text = clip(
                " ".join(str(message or getattr(exc, "message", "") or status).split()), 200
            )
        response = web.json_response({"error": text}, status=status)
        response.force_close()
        return response


class _Server(web.Server):
    """aiohttp's low-level server, making ``_Connection``s."""

    def __init__(self, handler, *, timeout, **kwargs):
        super().__init__(handler, **kwargs)
        self._timeout = timeout

    def __call__(self):
        return _Connection(self, loop=self._loop, timeout=self._timeout, **self._kwargs)
