"""Downloaded model files: fetched once over HTTP(S), kept in a cache, checked at every use.

Where: ``ELMO_TF_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/elmo_tf``, else
``~/.cache/elmo_tf``. Each URL has an entry ``files/<hash of the URL>/`` holding the file (its
name from the URL) and a record ``<file>.json``: the URL, the byte count and the SHA-256 taken
when it was downloaded.

Fetching (``fetch``), with `pooch <https://www.fatiando.org/pooch>`_ doing the transfer: the
scientific Python stack's downloader (SciPy, scikit-image), small (pure Python, on ``requests``,
which TensorFlow installs anyway), and it gives what a download needs: the body streamed to a
temporary file in the entry's directory and moved into place only when complete. The GET itself
is ``_transfer`` (``requests``: proxies such as ``HTTPS_PROXY``, timeouts), given to pooch as
its downloader. On top of it, here:

- progress (bytes, rate) on stderr: a bar on a terminal, one line at the end elsewhere;
- a declared size over the file's bound is refused before a byte is written; a body shorter
  than declared is refused; a transfer that breaks (connection reset, a timeout, HTTP 5xx, less
  than 64 KiB in ``READ_TIMEOUT`` seconds) is retried ``RETRIES`` times from the start (there is
  no resume);
- trust on first use: no hashes of the published files exist to pin, so the SHA-256 of what
  was downloaded is recorded, and every later use checks the file against it: a cached file
  that changed on disk is refused, not loaded;
- one process at a time per entry (a lock file), so workers loading one model at once end with
  one good copy;
- ``ELMO_TF_OFFLINE=1``: never touch the network; a file not in the cache is an error naming
  the command that fetches it.

Every failure is a ``DownloadError`` (or ``CacheError``) naming the URL or the path, and leaves
no partial or unchecked file under the entry's name.
"""

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import socket
import sys
import threading
import time
import urllib.parse

from elmo_tf import files
from elmo_tf.errors import ElmoError

CACHE_VARIABLE = "ELMO_TF_CACHE_DIR"
OFFLINE_VARIABLE = "ELMO_TF_OFFLINE"
# Seconds to connect, and seconds without a byte before a transfer counts as broken.
CONNECT_TIMEOUT = 30
READ_TIMEOUT = 60
# A transfer that brings fewer bytes than this in READ_TIMEOUT seconds (one every few seconds)
# counts as stalled, as one that brings none.
STALL_BYTES = 1 << 16
RETRIES = 2  # after the first attempt, for transient failures only
RETRY_WAIT_SECONDS = 1.0  # before the first retry; twice that before the second
_HASH_CHUNK = 1 << 20


class DownloadError(ElmoError, OSError):
    """A file could not be downloaded (HTTP error, no network, timeout, short body, full
    disk); nothing was left in the cache."""


class CacheError(ElmoError, OSError):
    """The cache directory is unusable, or a cached file changed since it was downloaded."""


def cache_dir():
    """The cache's root directory (it may not exist yet)."""
    if os.environ.get(CACHE_VARIABLE):
        return os.path.abspath(os.path.expanduser(os.environ[CACHE_VARIABLE]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "elmo_tf")


def offline():
    """Whether ``ELMO_TF_OFFLINE`` forbids the network."""
    return os.environ.get(OFFLINE_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def is_url(path):
    """Whether ``path`` is an ``http://`` or ``https://`` URL (what ``fetch`` downloads)."""
    return isinstance(path, str) and path.lower().startswith(("http://", "https://"))


@dataclasses.dataclass(frozen=True)
class Entry:
    """A cached file: ``path``, and its record (``url``, ``size``, ``sha256``, ``downloaded``)."""

    path: str
    url: str
    size: int
    sha256: str
    downloaded: str

    @property
    def record_path(self):
        return self.path + ".json"


def entry_path(url):
    """Where ``url``'s file lives in the cache (whether or not it is there)."""
    name = os.path.basename(urllib.parse.urlsplit(url).path) or "file"
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:24]
    return os.path.join(cache_dir(), "files", key, name)


def fetch(url, what="file", max_bytes=None, fetch_command=None):
    """The local path of ``url``'s file: downloaded into the cache on first use, checked
    against its record on every use.

    Args:
        url: an ``http://`` or ``https://`` URL.
        what: what the file is, for messages (``"weights of 'small'"``).
        max_bytes: the most bytes the file may hold; a server declaring more is refused
            before anything is written.
        fetch_command: the command that fetches this file, named by the offline error.
    """
    path = entry_path(url)
    directory = os.path.dirname(path)
    _make_directory(directory)
    with _locked(directory):
        entry = read_entry(path)
        if entry is not None:
            verify(entry)
            return path
        if offline():
            how = fetch_command or "the same call"
            raise DownloadError(
                f"{url}: {what} is not in the cache ({path}) and {OFFLINE_VARIABLE} forbids "
                f"downloading it: run {how} without {OFFLINE_VARIABLE}, where the network "
                "is reachable"
            )
        _download(url, path, what, max_bytes)
    return path


def read_entry(path):
    """The ``Entry`` of a cached file, or ``None`` when it is not (completely) cached."""
    try:
        with open(path + ".json", encoding="utf-8") as f:
            record = json.load(f)
        return Entry(
            path,
            str(record["url"]),
            int(record["size"]),
            str(record["sha256"]),
            str(record.get("downloaded", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def verify(entry):
    """Raises ``CacheError`` unless the file still has its recorded size and SHA-256."""
    try:
        size = os.path.getsize(entry.path)
    except OSError:
        size = None
    if size != entry.size or sha256_of(entry.path) != entry.sha256:
        raise CacheError(
            f"{entry.path}: the cached copy of {entry.url} changed since it was downloaded "
            f"({'missing' if size is None else f'{size:,} bytes'}, recorded {entry.size:,} "
            "bytes and its SHA-256); it is not loaded. Remove it (elmo-tf cache remove) to "
            "download it again"
        )


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def entries():
    """Every complete entry in the cache, as ``Entry`` objects sorted by URL."""
    root = os.path.join(cache_dir(), "files")
    found = []
    for key in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        directory = os.path.join(root, key)
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
            if name.endswith(".json"):
                entry = read_entry(os.path.join(directory, name[: -len(".json")]))
                if entry is not None:
                    found.append(entry)
    return sorted(found, key=lambda e: e.url)


def remove(url):
    """Removes ``url``'s entry (file, record, lock); returns whether there was one."""
    directory = os.path.dirname(entry_path(url))
    existed = os.path.isdir(directory)
    files.remove(directory)
    return existed


def discard(path):
    """Removes the entry holding the cached file ``path`` (a file found unusable), if any."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.dirname(directory) == os.path.join(cache_dir(), "files"):
        files.remove(directory)


def _make_directory(directory):
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise CacheError(
            f"cannot create the model cache directory {directory} ({e.strerror or e}); set "
            f"{CACHE_VARIABLE} to a directory that can be written"
        ) from None


@contextlib.contextmanager
def _locked(directory):
    """Holds the entry's lock file: one process at a time checks or downloads it."""
    try:
        import fcntl  # lazy: POSIX only; elsewhere the atomic rename alone keeps entries whole
    except ImportError:
        yield
        return
    try:
        handle = open(os.path.join(directory, ".lock"), "a")  # noqa: SIM115 - closed below
    except OSError as e:
        raise CacheError(f"{directory}: cannot lock the cache entry ({e.strerror or e})") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(url, path, what, max_bytes):
    """Downloads ``url`` to ``path``, retrying transient failures, then records it."""
    import requests  # lazy: with pooch, only a download needs it

    for attempt in range(RETRIES + 1):
        try:
            progress = _download_once(url, path, what, max_bytes)
        except requests.exceptions.RequestException as e:
            transient, reason = _classify(e)
            if not transient or attempt == RETRIES:
                raise DownloadError(f"{url}: cannot download {what}: {reason}") from None
            print(
                f"elmo_tf: {url}: {reason}; trying again ({attempt + 1} of {RETRIES})",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(RETRY_WAIT_SECONDS * (attempt + 1))
            continue
        break
    size = os.path.getsize(path)
    if progress.declared and size != progress.declared:
        files.remove(path)
        raise DownloadError(
            f"{url}: the server declared {progress.declared:,} bytes for {what} but sent "
            f"{size:,}; nothing was kept"
        )
    record = {
        "url": url,
        "size": size,
        "sha256": sha256_of(path),
        "downloaded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    files.write_text(path + ".json", json.dumps(record, indent=2) + "\n")
    progress.done(size)


def _download_once(url, path, what, max_bytes):
    """One transfer of ``url`` to ``path`` through pooch (a temporary file in the entry's
    directory, moved into place when complete); returns its ``_Progress``."""
    import pooch  # lazy: only a download needs it (a cached file loads without it)

    directory, name = os.path.split(path)
    progress = _Progress(url, what, max_bytes)
    try:
        with _quiet_pooch(pooch):
            fetcher = pooch.create(path=directory, base_url="", registry={name: None})
            fetcher.urls[name] = url
            fetcher.fetch(name, downloader=lambda url, output, _: _transfer(url, output, progress))
    except OSError as e:
        if isinstance(e, DownloadError) or _is_request_error(e):
            raise
        files.remove(path)  # disk full, a file size limit, no permission
        raise DownloadError(
            f"{url}: cannot write {what} to {directory} ({e.strerror or e})"
        ) from None
    finally:
        progress.close()
    return progress


def _transfer(url, output_file, progress):
    """pooch's downloader: ``url``'s body to ``output_file`` (the temporary file pooch moves
    into place), through ``progress``.

    ``requests``' read timeout bounds each read, so a server that sends a byte every few
    seconds would never time out; here a watchdog also cuts a transfer that brings fewer than
    ``STALL_BYTES`` in ``READ_TIMEOUT`` seconds (shutting its socket down wakes the read).
    """
    import requests  # lazy: with pooch, only a download needs it

    response = requests.get(
        url,
        stream=True,
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        # The bytes as stored: a server that compresses on the fly declares the encoded
        # length, which the decoded file would never match.
        headers={"Accept-Encoding": "identity"},
    )
    try:
        response.raise_for_status()
        progress.total = int(response.headers.get("content-length") or 0)
        with open(output_file, "wb") as out, _StallWatchdog(response) as watchdog:
            try:
                for chunk in response.iter_content(chunk_size=STALL_BYTES):
                    watchdog.received(len(chunk))
                    out.write(chunk)
                    progress.update(len(chunk))
            except (requests.exceptions.RequestException, OSError):
                if watchdog.fired:
                    raise requests.exceptions.ReadTimeout("stalled") from None
                raise
    finally:
        response.close()


class _StallWatchdog:
    """Shuts ``response``'s connection down when fewer than ``STALL_BYTES`` arrived in the
    last ``READ_TIMEOUT`` seconds; ``fired`` says it did."""

    def __init__(self, response):
        self._response = response
        self._window_start = time.monotonic()
        self._window_bytes = 0
        self._done = threading.Event()
        self.fired = False

    def received(self, count):
        self._window_bytes += count
        if self._window_bytes >= STALL_BYTES:
            self._window_start, self._window_bytes = time.monotonic(), 0

    def _watch(self):
        while not self._done.wait(min(1.0, READ_TIMEOUT / 4)):
            if time.monotonic() - self._window_start > READ_TIMEOUT:
                self.fired = True
                # Through a duplicate of the connection's descriptor: shutting a socket down
                # acts on the connection itself, which the reading thread then sees closed.
                # The response may have ended meanwhile (no file left): nothing to cut then.
                with contextlib.suppress(Exception):
                    if not self._done.is_set():
                        with socket.socket(fileno=os.dup(self._response.raw.fileno())) as sock:
                            sock.shutdown(socket.SHUT_RDWR)
                return

    def __enter__(self):
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


def _is_request_error(error):
    import requests  # lazy: with pooch, only a download needs it

    return isinstance(error, requests.exceptions.RequestException)


def _classify(error):
    """``(transient, reason)`` of a failed transfer."""
    import requests  # lazy: with pooch, only for a download

    response = getattr(error, "response", None)
    if isinstance(error, requests.exceptions.HTTPError) and response is not None:
        status = response.status_code
        return status >= 500, f"HTTP {status} {response.reason or ''}".strip()
    if isinstance(error, requests.exceptions.ConnectTimeout):
        return True, f"no connection within {CONNECT_TIMEOUT} s"
    cause = error.args[0] if error.args else None  # a timeout while streaming arrives wrapped
    if isinstance(error, requests.exceptions.Timeout) or "timed out" in str(cause):
        return True, f"no data, or less than {STALL_BYTES // 1024} KiB, for {READ_TIMEOUT} s"
    if isinstance(error, requests.exceptions.ChunkedEncodingError):
        return True, f"the connection closed after part of the file ({_first_line(error)})"
    if isinstance(error, requests.exceptions.ConnectionError):
        return True, f"cannot connect ({_first_line(error)})"
    return False, _first_line(error)


def _first_line(error):
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__


@contextlib.contextmanager
def _quiet_pooch(pooch):
    """pooch logs each download at INFO to stderr; this module shows its own progress."""
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


class _Progress:
    """pooch's progress hook: bytes and rate on stderr, and the declared size's bound.

    pooch sets ``total`` from the response's Content-Length before it writes anything, which is
    where a size over ``max_bytes`` is refused.
    """

    def __init__(self, url, what, max_bytes):
        self.url = url
        self.what = what
        self.max_bytes = max_bytes
        self.declared = 0
        self.received = 0
        self.start = time.monotonic()
        self.stream = sys.stderr
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar = None

    @property
    def total(self):
        return self.declared

    @total.setter
    def total(self, value):
        self.declared = int(value or 0)
        if self.max_bytes is not None and self.declared > self.max_bytes:
            raise DownloadError(
                f"{self.url}: the server declares {self.declared:,} bytes for {self.what}, "
                f"more than the {self.max_bytes:,} it can hold; nothing was downloaded"
            )
        if self.interactive:
            from tqdm.auto import tqdm  # lazy: a terminal only

            self._bar = tqdm(
                total=self.declared or None,
                unit="B",
                unit_scale=True,
                desc=f"downloading {self.what}",
                file=self.stream,
            )
        else:
            self.say(f"downloading {self.what} from {self.url}")

    def update(self, n):
        self.received += n
        if self.max_bytes is not None and self.received > self.max_bytes + (1 << 20):
            raise DownloadError(
                f"{self.url}: {self.what} is larger than the {self.max_bytes:,} bytes it can "
                "hold; nothing was kept"
            )
        if self._bar is not None:
            self._bar.update(n)

    def reset(self):  # pooch, after the body: reset, then update(total), then close
        self.received = 0
        if self._bar is not None:
            self._bar.reset()

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def say(self, message):
        print(f"elmo_tf: {message}", file=self.stream, flush=True)

    def done(self, size):
        seconds = max(time.monotonic() - self.start, 1e-6)
        self.say(
            f"downloaded {self.what}: {size / 1e6:,.1f} MB in {seconds:.1f} s "
            f"({size / 1e6 / seconds:,.1f} MB/s)"
        )
