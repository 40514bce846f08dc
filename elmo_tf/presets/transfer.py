"""One file over HTTP(S): pooch's ``HTTPDownloader``, with the guards no library has.

pooch's downloader (on ``requests``: proxies, timeouts, a progress bar on a terminal) writes
to a file object of ours, its documented ``output_file``: ``pooch.retrieve`` writes through a
temporary file of its own, where nothing could stop a body at its bound. Each guard names the
rows of docs/robustness.md ("Downloads") it holds.
"""

import contextlib
import hashlib
import os
import socket
import sys
import threading
import time
import urllib.parse

import pooch
import requests

from elmo_tf import checks
from elmo_tf.errors import DownloadError
from elmo_tf.system import urls

CONNECT_TIMEOUT = 30  # seconds to connect
READ_TIMEOUT = 60  # seconds without STALL_BYTES before a transfer counts as broken
STALL_BYTES = 1 << 16  # also the size of each read
RETRIES = 2  # after the first attempt, for transient failures only
MAX_REDIRECTS = 10
_ERRORS = requests.exceptions
_TRANSIENT = (_ERRORS.ConnectionError, _ERRORS.Timeout, _ERRORS.ChunkedEncodingError)


def download(url, partial, what, max_bytes, advice):
    """Downloads ``url`` into the new file ``partial`` (0600); returns ``(bytes, SHA-256)``.
    Transient failures are tried again, each try said ("the connection closed halfway");
    ``advice(HTTP status or None)`` ends a failure's line. The caller removes ``partial``."""
    shown, start = urls.public_url(url), time.monotonic()
    _say(f"downloading {what} from {shown}")
    for tried in range(1, RETRIES + 2):
        attempt = _Attempt(url, what, max_bytes)
        try:
            attempt.run(partial)
            break
        except DownloadError:
            raise
        except _ERRORS.RequestException as e:
            transient, reason = attempt.failure(e)
            if tried > RETRIES or not transient:
                status = None if e.response is None else e.response.status_code
                raise DownloadError(
                    f"{shown}: cannot download {what}: {reason}; {advice(status)}"
                ) from None
            _say(f"{shown}: {reason}; trying again ({tried} of {RETRIES})")
            time.sleep(tried)
        except OSError as e:  # disk full, a file size limit, no permission
            raise DownloadError(
                f"{shown}: cannot write {what} to {os.path.dirname(partial)} ({e.strerror or e})"
            ) from None
    mb, seconds = attempt.written / 1e6, max(time.monotonic() - start, 1e-6)
    _say(f"downloaded {what}: {mb:,.1f} MB in {seconds:.1f} s ({mb / seconds:,.1f} MB/s)")
    return attempt.written, attempt.sha256.hexdigest()


def _say(message):
    print(f"elmo_tf: {message}", file=sys.stderr, flush=True)


class _Attempt:
    """One try: ``requests``' response hook (``check_response``), and the file object pooch's
    downloader writes the body to (``write``, ``flush``)."""

    def __init__(self, url, what, max_bytes):
        self.url, self.what, self.max_bytes = url, what, max_bytes
        self.visited = {urls.public_url(url)}
        self.response = None  # the latest answer: the stall guard cuts its connection
        self.file, self.written, self.sha256 = None, 0, hashlib.sha256()
        self.stalled = False

    def run(self, partial):
        downloader = pooch.HTTPDownloader(
            progressbar=sys.stderr.isatty(),
            chunk_size=STALL_BYTES,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            headers={"Accept-Encoding": "identity"},  # the bytes as stored
            hooks={"response": self.check_response},
        )
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)  # an earlier try's
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with open(descriptor, "wb") as self.file, _stall_guard(self):
                downloader(self.url, self, None)
        finally:
            if self.response is not None:
                self.response.close()

    def check_response(self, response, *args, **kwargs):
        """Each answer, before its body is read ("a redirect to ...", "an answer that is not
        the file", "a negative or unreadable Content-Length", "a Content-Length larger ...")."""
        self.response = response
        if response.status_code >= 400:
            return response  # pooch raises it (HTTPError)
        problem = self._redirect(response) if response.is_redirect else self._answer(response)
        if problem is None:
            return response
        response.close()
        raise DownloadError(
            f"{urls.public_url(self.url)}: cannot download {self.what}: {problem}; nothing was "
            "written"
        )

    def _redirect(self, response):
        location = response.headers["location"]
        try:
            target = urllib.parse.urljoin(response.url, location)
        except ValueError:  # an IPv6 address never closed: urls.problem says so
            target = location
        shown = urls.public_url(target)
        if problem := urls.problem(target):
            return f"the server redirects to {checks.shown(shown)}, not a usable URL ({problem})"
        if shown in self.visited:
            return f"the server redirects in a loop (back to {shown})"
        if len(self.visited) > MAX_REDIRECTS:
            return f"more than {MAX_REDIRECTS} redirects"
        self.visited.add(shown)
        return None

    def _answer(self, response):
        if response.status_code != 200:  # 204, 304, a 3xx without a Location: no file
            return f"the server answers HTTP {response.status_code} {response.reason}, not the file"
        declared = response.headers.get("content-length", "0").strip()
        if not (declared.isascii() and declared.isdigit()):  # negative, not a number
            return f"the server declares an invalid size (Content-Length: {checks.shown(declared)})"
        # compared as text first: int() refuses 4,300 digits
        if self.max_bytes is not None and (len(declared) > 18 or int(declared) > self.max_bytes):
            size = (
                f"a {len(declared)}-digit number of" if len(declared) > 18 else f"{int(declared):,}"
            )
            return f"the server declares {size} bytes, more than the {self.max_bytes:,} it can hold"
        return None

    def write(self, data):  # no download writes past its bound ("a gzip bomb")
        if self.max_bytes is not None and self.written + len(data) > self.max_bytes:
            raise DownloadError(
                f"{urls.public_url(self.url)}: {self.what} is larger than the "
                f"{self.max_bytes:,} bytes it can hold; nothing was kept"
            )
        self.file.write(data)
        self.sha256.update(data)
        self.written += len(data)

    def flush(self):
        self.file.flush()

    def failure(self, error):
        """``(transient, reason)`` of a failed try: whether it may succeed if tried again (not
        after HTTP 4xx, a name that does not resolve, a certificate that does not verify, a URL
        requests refuses), and its cause in a few words."""
        if isinstance(error, _ERRORS.HTTPError) and error.response is not None:
            status, reason = error.response.status_code, error.response.reason or ""
            return status >= 500, f"HTTP {status} {reason}".strip()
        cause = _innermost(error)
        transient = self.stalled or isinstance(error, _TRANSIENT)
        transient = transient and not isinstance(error, _ERRORS.SSLError)
        if isinstance(error, _ERRORS.ConnectTimeout):
            return transient, f"no connection within {CONNECT_TIMEOUT} s"
        if self.stalled or isinstance(cause, TimeoutError):
            return (
                transient,
                f"no data, or less than {STALL_BYTES // 1024} KiB, for {READ_TIMEOUT} s",
            )
        if isinstance(error, _ERRORS.ChunkedEncodingError):
            return transient, f"the connection closed after {self.written:,} bytes"
        if isinstance(cause, socket.gaierror):
            return False, f"the host name does not resolve ({_own_words(cause)})"
        if isinstance(cause, ConnectionRefusedError):
            return transient, f"the connection was refused ({_own_words(cause)})"
        return transient, _own_words(cause)


@contextlib.contextmanager
def _stall_guard(attempt):
    """Cuts the transfer once fewer than ``STALL_BYTES`` were written in ``READ_TIMEOUT``
    seconds ("a server that sends a byte every few seconds"). ``requests``' read timeout
    cannot: it bounds each read of the socket, which a byte every few seconds never reaches."""
    done = threading.Event()

    def watch():
        seen, since = attempt.written, time.monotonic()
        while not done.wait(min(1.0, READ_TIMEOUT / 4)):
            if attempt.written - seen >= STALL_BYTES:
                seen, since = attempt.written, time.monotonic()
            elif time.monotonic() - since > READ_TIMEOUT:
                attempt.stalled = True
                # Shut down through a duplicate descriptor: the reading thread sees the
                # connection closed (the response may have ended: nothing to cut then).
                with contextlib.suppress(AttributeError, OSError, ValueError):
                    descriptor = os.dup(attempt.response.raw.fileno())
                    with socket.socket(fileno=descriptor) as connection:
                        connection.shutdown(socket.SHUT_RDWR)
                return

    thread = threading.Thread(target=watch, name="download-stall", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _innermost(error):
    """The error a ``requests`` error comes from: requests wraps urllib3's (``args``,
    ``reason``), which wrap the socket's (``__cause__``)."""
    for _ in range(32):  # a chain is a few errors long
        inner = [getattr(error, "reason", None), error.__cause__, *error.args[:1]]
        inner = [e for e in inner if isinstance(e, BaseException)]
        if not inner:
            break
        error = inner[0]
    return error


def _own_words(error):
    """An error's message on one line, without the object reprs urllib3 puts first."""
    if isinstance(error, OSError) and error.strerror:
        return f"[Errno {error.errno}] {error.strerror}" if error.errno else error.strerror
    return " ".join(str(error).split()).split(">: ", 1)[-1] or type(error).__name__
