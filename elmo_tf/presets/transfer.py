"""One file over HTTP(S): pooch's ``HTTPDownloader``, and the guards no library has.

The transfer is `pooch <https://www.fatiando.org/pooch>`_'s ``HTTPDownloader`` (on
``requests``: proxies such as ``HTTPS_PROXY``, connect and read timeouts, a progress bar on a
terminal), given a file object of ours as its output (pooch's documented ``output_file``).
``pooch.retrieve`` would write through a temporary file of its own, by name, where nothing can
stop a body before it passes its bound. The guards, each holding rows of docs/robustness.md
("Downloads: the published models"):

- ``_Attempt.check_response`` (``requests``' response hook) sees every answer, redirects
  included, before its body is read: a redirect goes only to a usable ``http(s)://`` URL, never
  back to where it was, at most ``MAX_REDIRECTS`` times; the file comes only from a ``200``;
  a declared size is a number within the file's bound;
- ``_Attempt.write`` writes the body no further than its bound, counted as written (a body
  compressed against our ``Accept-Encoding: identity`` is counted decoded), and takes its
  SHA-256 on the way;
- ``_StallGuard`` cuts a server that drips bytes;
- transient failures (a reset, a timeout, a stall, HTTP 5xx) are tried again from the start
  (``RETRIES``), each new try said; the others end at once. Each failure is one line naming
  the URL (never its user and password), the cause and what to do.
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

from elmo_tf import checks, urls
from elmo_tf.errors import DownloadError

# Seconds to connect, and seconds without a byte before a transfer counts as broken.
CONNECT_TIMEOUT = 30
READ_TIMEOUT = 60
# A transfer that brings fewer bytes than this in READ_TIMEOUT seconds (one every few seconds)
# counts as stalled, as one that brings none. Also the size of each read.
STALL_BYTES = 1 << 16
RETRIES = 2  # after the first attempt, for transient failures only
MAX_REDIRECTS = 10
# Failures that may heal when tried again (an SSL error, a subclass, does not).
_TRANSIENT = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.ChunkedEncodingError,
)


def download(url, partial, what, max_bytes, what_to_do):
    """Downloads ``url`` into the new file ``partial``; returns ``(bytes, SHA-256)``. The
    caller removes ``partial`` after a failure.

    Args:
        url: an ``http(s)://`` URL.
        partial: the file to write (created with permissions 0600).
        what: what the file is, for messages (``"the weight file of 'small'"``).
        max_bytes: the most bytes the file may hold (``None``: no bound).
        what_to_do: ``HTTP status or None -> advice`` ending a failure's message.
    """
    shown = urls.public_url(url)
    _say(f"downloading {what} from {shown}")
    start = time.monotonic()
    for tried in range(1, RETRIES + 2):
        attempt = _Attempt(url, what, max_bytes)
        try:
            attempt.run(partial)
            break
        except DownloadError:
            raise
        except requests.exceptions.RequestException as e:
            if tried > RETRIES or not attempt.transient(e):
                status = e.response.status_code if e.response is not None else None
                advice = what_to_do(status)
                raise DownloadError(
                    f"{shown}: cannot download {what}: {attempt.reason(e)}; {advice}"
                ) from None
            _say(f"{shown}: {attempt.reason(e)}; trying again ({tried} of {RETRIES})")
            time.sleep(tried)
        except OSError as e:  # disk full, a file size limit, no permission
            where = os.path.dirname(partial)
            raise DownloadError(
                f"{shown}: cannot write {what} to {where} ({e.strerror or e})"
            ) from None
    seconds = max(time.monotonic() - start, 1e-6)
    megabytes = attempt.written / 1e6
    rate = f"{megabytes:,.1f} MB in {seconds:.1f} s ({megabytes / seconds:,.1f} MB/s)"
    _say(f"downloaded {what}: {rate}")
    return attempt.written, attempt.sha256.hexdigest()


def _say(message):
    print(f"elmo_tf: {message}", file=sys.stderr, flush=True)


class _Attempt:
    """One try at the transfer: ``requests``' response hook (``check_response``) and the file
    object pooch's downloader writes the body to (``write``, ``flush``)."""

    def __init__(self, url, what, max_bytes):
        self.url = url
        self.what = what
        self.max_bytes = max_bytes
        self.visited = {urls.public_url(url)}
        self.response = None  # the latest answer: the stall guard cuts its connection
        self.written = 0
        self.sha256 = hashlib.sha256()
        self.stalled = False
        self.file = None

    def run(self, partial):
        downloader = pooch.HTTPDownloader(
            progressbar=sys.stderr.isatty(),
            chunk_size=STALL_BYTES,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            # The bytes as stored: a server that compresses on the fly would declare the
            # encoded length (a body compressed anyway is counted decoded, in ``write``).
            headers={"Accept-Encoding": "identity"},
            hooks={"response": self.check_response},
        )
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with open(descriptor, "wb") as self.file, _StallGuard(self):
                downloader(self.url, self, None)
        finally:
            if self.response is not None:
                self.response.close()

    def check_response(self, response, *args, **kwargs):
        """``requests``' response hook: each answer, before its body is read."""
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
        """What is wrong with a redirect, or ``None``: every URL a server hands us is checked
        as ours are."""
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
        """What is wrong with the answer that should hold the file, or ``None``."""
        if response.status_code != 200:  # 204, 304, a 3xx without a Location: no file
            return f"the server answers HTTP {response.status_code} {response.reason}, not the file"
        declared = response.headers.get("content-length")
        if declared is None or self.max_bytes is None and declared.strip().isdigit():
            return None
        if not (declared.isascii() and declared.strip().isdigit()):  # negative, not a number
            return f"the server declares an invalid size (Content-Length: {checks.shown(declared)})"
        # compared as text first: int() refuses 4,300 digits
        digits = declared.strip().lstrip("0") or "0"
        if len(digits) > len(str(self.max_bytes)) or int(digits) > self.max_bytes:
            shown = f"{int(digits):,}" if len(digits) <= 30 else f"a {len(digits)}-digit number of"
            return (
                f"the server declares {shown} bytes, more than the {self.max_bytes:,} it can hold"
            )
        return None

    def write(self, data):
        """The body, written no further than ``max_bytes``."""
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

    def cut(self):
        """Shuts the connection down (the stall guard): the reading thread sees it closed."""
        # Through a duplicate of the connection's descriptor: shutting a socket down acts on
        # the connection itself. The response may have ended meanwhile: nothing to cut then.
        with contextlib.suppress(AttributeError, OSError, ValueError):
            with socket.socket(fileno=os.dup(self.response.raw.fileno())) as sock:
                sock.shutdown(socket.SHUT_RDWR)

    def transient(self, error):
        """Whether a failed try may succeed if tried again: a stall, HTTP 5xx, a broken or
        timed-out connection; not HTTP 4xx, a host name that does not resolve, a certificate
        that does not verify, a URL requests refuses."""
        if isinstance(error, requests.exceptions.HTTPError) and error.response is not None:
            return error.response.status_code >= 500
        if isinstance(error, requests.exceptions.SSLError) or _cause(error)[0] == "dns":
            return False
        return self.stalled or isinstance(error, _TRANSIENT)

    def reason(self, error):
        """The cause of a failed try, in a few words."""
        response = error.response
        if isinstance(error, requests.exceptions.HTTPError) and response is not None:
            return f"HTTP {response.status_code} {response.reason or ''}".strip()
        if isinstance(error, requests.exceptions.ConnectTimeout):
            return f"no connection within {CONNECT_TIMEOUT} s"
        kind, words = _cause(error)
        if self.stalled or kind == "timeout":
            return f"no data, or less than {STALL_BYTES // 1024} KiB, for {READ_TIMEOUT} s"
        if isinstance(error, requests.exceptions.ChunkedEncodingError):
            return f"the connection closed after {self.written:,} bytes"
        return {
            "dns": f"the host name does not resolve ({words})",
            "refused": f"the connection was refused ({words})",
        }.get(kind, words)


class _StallGuard:
    """Cuts the transfer of ``attempt`` when fewer than ``STALL_BYTES`` were written in the last
    ``READ_TIMEOUT`` seconds (docs/robustness.md: "a server that sends a byte every few
    seconds").

    ``requests``' read timeout cannot do it: it bounds each read of the socket, so a server
    that sends a byte every few seconds never reaches it, and a body can take years."""

    def __init__(self, attempt):
        self.attempt = attempt
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="download-stall", daemon=True)

    def _watch(self):
        seen, since = self.attempt.written, time.monotonic()
        while not self.done.wait(min(1.0, READ_TIMEOUT / 4)):
            now, written = time.monotonic(), self.attempt.written
            if written - seen >= STALL_BYTES:
                seen, since = written, now
            elif now - since > READ_TIMEOUT:
                self.attempt.stalled = True
                self.attempt.cut()
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


def _cause(error):
    """``(kind, words)``: what a ``requests`` error comes from. ``kind`` is ``"dns"`` (a host
    name that does not resolve), ``"refused"``, ``"timeout"`` or ``"other"``; ``words`` the
    innermost error's own, on one line. requests wraps urllib3's errors (in ``args``, a
    ``reason``), which wrap the socket's (``__cause__``, ``__context__``)."""
    seen, pending = [], [error]
    while pending:
        current = pending.pop(0)
        if not isinstance(current, BaseException) or any(current is s for s in seen):
            continue
        seen.append(current)
        if isinstance(current, socket.gaierror):
            return "dns", _own_words(current)
        if isinstance(current, ConnectionRefusedError):
            return "refused", _own_words(current)
        if isinstance(current, TimeoutError | requests.exceptions.ReadTimeout):
            return "timeout", _own_words(current)
        pending += [current.__cause__, current.__context__, getattr(current, "reason", None)]
        pending += current.args
    return "other", _own_words(seen[-1])


def _own_words(error):
    """An error's message on one line, without the object reprs urllib3 puts first."""
    if isinstance(error, OSError) and error.strerror:
        return f"[Errno {error.errno}] {error.strerror}" if error.errno else error.strerror
    text = " ".join(str(error).split())
    return text.split(">: ", 1)[-1] or type(error).__name__
