"""Downloaded model files: fetched once over HTTP(S), kept in a cache, checked at every use.

Where: ``ELMO_TF_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/elmo_tf``, else
``~/.cache/elmo_tf``. Each URL has an entry ``files/<hash of the URL>/`` holding the file (its
name from the URL), a record ``<file>.json`` (the URL, the byte count and the SHA-256 taken when
it was downloaded) and a lock file. A URL's user and password are sent but never shown or
stored: the entry is keyed, recorded and named by the URL without them (``public_url``).

The transfer is `pooch <https://www.fatiando.org/pooch>`_'s (the scientific Python stack's
downloader): ``HTTPDownloader`` on ``requests`` (proxies such as ``HTTPS_PROXY``, connect and
read timeouts), the body streamed to a temporary file in the entry's directory and moved into
place when complete, transient failures (a reset, a timeout, HTTP 5xx) retried from the start
(``RETRIES``). ``filelock`` holds the entry while one process checks or downloads it, so
workers loading one model at once end with one good copy. What no library does is here:

- a declared size over the file's bound is refused before a byte is written;
- a body shorter than declared (counted on the wire, so a mirror that compresses anyway is
  not mistaken for a short one) is refused;
- a server that drips bytes (fewer than ``STALL_BYTES`` in ``READ_TIMEOUT`` seconds) is cut
  off: a read timeout only bounds each read (``_StallGuard``);
- trust on first use: no hashes of the published files exist to pin, so the SHA-256 of what
  was downloaded is recorded, and every later use checks the file against it;
- errors that cannot heal (HTTP 4xx, a host name that does not resolve) are not retried, and
  every failure is one line naming the URL, the cause and what to do;
- the temporary file of a download that was killed (SIGKILL, the OOM killer) is removed at
  the entry's next fetch, and ``stale_files`` counts such files for ``elmo-tf cache list``;
- ``ELMO_TF_OFFLINE=1``: never touch the network; a file not in the cache is an error naming
  the command that fetches it, and the other address it is cached under, if any.

Every failure is a ``DownloadError`` (or ``CacheError``) and leaves no partial or unchecked
file under the entry's name.
"""

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import socket
import stat
import sys
import threading
import time
import urllib.parse

from elmo_tf import environment, files, urls
from elmo_tf.errors import ElmoError
from elmo_tf.urls import is_url, public_url  # noqa: F401 (cache.is_url, cache.public_url)

CACHE_VARIABLE = "ELMO_TF_CACHE_DIR"
OFFLINE_VARIABLE = "ELMO_TF_OFFLINE"
BASE_URL_VARIABLE = "ELMO_TF_MODEL_BASE_URL"
# Seconds to connect, and seconds without a byte before a transfer counts as broken.
CONNECT_TIMEOUT = 30
READ_TIMEOUT = 60
# A transfer that brings fewer bytes than this in READ_TIMEOUT seconds (one every few seconds)
# counts as stalled, as one that brings none. Also the size of each read.
STALL_BYTES = 1 << 16
RETRIES = 2  # after the first attempt, for transient failures only
RECORD_SUFFIX = ".json"
LOCK_NAME = ".lock"
_ENTRY_KEY_LENGTH = 24  # hex digits of the URL's SHA-256 naming an entry's directory
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


def files_dir():
    """Where the entries live: ``files/`` under ``cache_dir()``, the cache's own directory."""
    return os.path.join(cache_dir(), "files")


def offline():
    """Whether ``ELMO_TF_OFFLINE`` forbids the network."""
    return environment.value(OFFLINE_VARIABLE)


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
        return self.path + RECORD_SUFFIX


def entry_path(url):
    """Where ``url``'s file lives in the cache (whether or not it is there)."""
    if problem := urls.problem(url):
        raise DownloadError(f"{public_url(url)}: not a usable URL ({problem})")
    url = public_url(url)
    name = os.path.basename(urllib.parse.urlsplit(url).path) or "file"
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:_ENTRY_KEY_LENGTH]
    return os.path.join(files_dir(), key, name)


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
        _remove_stale(directory)  # what a killed download left; no one else is writing here
        if os.path.isfile(path) and not os.path.islink(path):  # this URL's file, unrecorded
            files.remove(path)
        if offline():
            raise DownloadError(_offline_message(url, what, path, fetch_command))
        _download(url, path, what, max_bytes)
    return path


def check_offline(url, what="file", fetch_command=None):
    """Under ``ELMO_TF_OFFLINE``, the ``DownloadError`` ``fetch`` would raise for ``url``'s
    file when it is not cached, raised now: a command says so before its work starts."""
    path = entry_path(url)
    if offline() and read_entry(path) is None:
        raise DownloadError(_offline_message(url, what, path, fetch_command))


def _offline_message(url, what, path, fetch_command):
    how = fetch_command or "the same call"
    message = (
        f"{public_url(url)}: {what} is not in the cache ({path}) and {OFFLINE_VARIABLE} "
        f"forbids downloading it: run {how} without {OFFLINE_VARIABLE}, where the network is "
        "reachable"
    )
    if elsewhere := _cached_elsewhere(url):
        message += f"; {elsewhere}"
    return message


def _cached_elsewhere(url):
    """Where the cache holds ``url``'s file under another base URL, and what to do, or ``""``."""
    urls = [e.url for e in entries() if _same_file(e.url, url)]
    if not urls:
        return ""
    return (
        f"the cache holds the same file for {urls[0]} (the cache is keyed by URL): set "
        f"{BASE_URL_VARIABLE} as it was set when it was downloaded"
    )


def _what_to_do(url):
    """After a failed download: the cached copy under another base URL, or the network."""
    return _cached_elsewhere(url) or (
        f"check the address and the network, or point {BASE_URL_VARIABLE} at a mirror "
        "(docs/models.md)"
    )


def _same_file(a, b):
    """Whether two URLs name the same file under different bases (the folder and file name)."""
    tail = lambda u: urllib.parse.urlsplit(public_url(u)).path.rstrip("/").split("/")[-2:]  # noqa: E731
    return public_url(a) != public_url(b) and tail(a) == tail(b)


def read_entry(path):
    """The ``Entry`` of a cached file, or ``None`` when it is not (completely) cached."""
    try:
        with open(path + RECORD_SUFFIX, encoding="utf-8") as f:
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


def checked(path):
    """Whether the cached file ``path`` passed the loader's checks once (``mark_checked``)."""
    try:
        with open(path + RECORD_SUFFIX, encoding="utf-8") as f:
            return json.load(f).get("checked") is True
    except (OSError, ValueError, AttributeError):
        return False


def mark_checked(path):
    """Records that the cached file ``path`` passed the loader's checks: they are not run
    again at every use (its SHA-256 still is)."""
    record_path = path + RECORD_SUFFIX
    with open(record_path, encoding="utf-8") as f:
        record = json.load(f)
    record["checked"] = True
    _write_record(record_path, record, like=path)


def _write_record(record_path, record, like):
    """Writes a record, as private as the file ``like`` (pooch writes it for its owner)."""
    files.write_text(record_path, json.dumps(record, indent=2) + "\n")
    os.chmod(record_path, stat.S_IMODE(os.stat(like).st_mode))


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


def _entry_directories():
    """The entry directories the cache made: ``files/<key>/`` with a key of hex digits."""
    root = files_dir()
    if not os.path.isdir(root) or os.path.islink(root):
        return []
    return [
        os.path.join(root, key)
        for key in sorted(os.listdir(root))
        if _is_entry_key(key)
        and os.path.isdir(os.path.join(root, key))
        and not os.path.islink(os.path.join(root, key))
    ]


def _is_entry_key(name):
    return len(name) == _ENTRY_KEY_LENGTH and all(c in "0123456789abcdef" for c in name)


def entries():
    """Every complete entry in the cache, as ``Entry`` objects sorted by URL."""
    found = []
    for directory in _entry_directories():
        for name in sorted(os.listdir(directory)):
            if name.endswith(RECORD_SUFFIX):
                entry = read_entry(os.path.join(directory, name[: -len(RECORD_SUFFIX)]))
                if entry is not None:
                    found.append(entry)
    return sorted(found, key=lambda e: e.url)


def stale_files():
    """``[(path, bytes)]`` of the cache's files in the entries that belong to no complete
    entry: what a killed download left (its temporary, or its file before the record). The
    next fetch of the entry removes them; ``remove`` and ``clear`` too."""
    stale = []
    for directory in _entry_directories():
        for path in _stale_in(directory):
            with contextlib.suppress(OSError):
                stale.append((path, os.lstat(path).st_size))
    return stale


# What the cache writes in an entry directory besides a file, its record and the lock: the
# marker naming the file a download in progress writes, pooch's download temporary
# (tempfile's "tmp" and 8 characters) and the temporaries of elmo_tf.files (records, marker).
PENDING_NAME = ".downloading"
_OWN_TEMPORARY = re.compile(r"tmp[a-z0-9_]{8}|\..+\.\d+-[0-9a-f]{8}\.tmp")


def _own_files(directory):
    """``(complete, stale)``: the names of regular files in an entry directory that the cache
    made, those of its complete entry (file, record, lock) and those of none (a killed
    download's temporary, its marker, the file the marker names if it has no record). Anything
    else (a directory, a link, another file) is not the cache's, and is left alone."""
    names = {
        name
        for name in os.listdir(directory)
        if os.path.isfile(os.path.join(directory, name))
        and not os.path.islink(os.path.join(directory, name))
    }
    complete = {LOCK_NAME} & names
    for name in names:
        if name.endswith(RECORD_SUFFIX) and read_entry(
            os.path.join(directory, name[: -len(RECORD_SUFFIX)])
        ):
            complete |= {name, name[: -len(RECORD_SUFFIX)]} & names
    pending = {PENDING_NAME, _pending_name(directory)} if PENDING_NAME in names else set()
    stale = {name for name in names - complete if _OWN_TEMPORARY.fullmatch(name) or name in pending}
    return complete, stale


def _pending_name(directory):
    """The file name the entry's ``PENDING_NAME`` marker gives (a line), or ``None``."""
    try:
        with open(os.path.join(directory, PENDING_NAME), encoding="utf-8") as f:
            name = f.read(4096).strip()
    except (OSError, ValueError):
        return None
    return name if name and os.path.basename(name) == name and name != LOCK_NAME else None


def _stale_in(directory):
    return [os.path.join(directory, name) for name in sorted(_own_files(directory)[1])]


def _remove_stale(directory):
    for path in _stale_in(directory):
        files.remove(path)


def _remove_entry(directory):
    """Removes what the cache made in an entry directory, then the directory if that leaves
    it empty; returns whether it is gone (files the cache did not make keep it)."""
    complete, stale = _own_files(directory)
    for name in sorted(complete | stale):
        files.remove(os.path.join(directory, name))
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def remove(url):
    """Removes ``url``'s entry (file, record, lock, stale files); returns ``(existed,
    kept)``: whether there was one, and its directory if files the cache did not make keep
    it (they are left alone)."""
    directory = os.path.dirname(entry_path(url))
    if not os.path.isdir(directory) or os.path.islink(directory):
        return False, None
    return True, (None if _remove_entry(directory) else directory)


def clear():
    """Removes every entry the cache made, and ``files/`` if it is then empty; returns
    ``(removed, kept)``: how many entries, and the entry directories that files the cache did
    not make keep (those files are left alone). Nothing else in the cache directory is
    touched: ``ELMO_TF_CACHE_DIR`` may name a directory that holds other files (the working
    directory, a home directory)."""
    directories = _entry_directories()
    kept = [d for d in directories if not _remove_entry(d)]
    with contextlib.suppress(OSError):
        os.rmdir(files_dir())  # only if empty
    return len(directories) - len(kept), kept


def discard(path):
    """Removes the entry holding the cached file ``path`` (a file found unusable), if any."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.dirname(directory) == files_dir() and _is_entry_key(os.path.basename(directory)):
        _remove_entry(directory)


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
    import filelock  # lazy: only a fetch needs it

    try:
        with filelock.FileLock(os.path.join(directory, LOCK_NAME)):
            yield
    except filelock.Timeout:  # pragma: no cover - no timeout is set: it waits
        raise
    except PermissionError as e:
        raise CacheError(f"{directory}: cannot lock the cache entry ({e.strerror or e})") from None


def _download(url, path, what, max_bytes):
    """Downloads ``url`` to ``path`` (``_transfer``), said in the entry's ``PENDING_NAME``
    marker meanwhile: a process killed after the file is in place but before its record is
    written leaves a file whose name the marker gives (``_own_files``). Nothing is kept of a
    download that fails."""
    marker = os.path.join(os.path.dirname(path), PENDING_NAME)
    files.write_text(marker, os.path.basename(path) + "\n")
    done = False
    try:
        _transfer(url, path, what, max_bytes)
        done = True
    finally:
        if not done and read_entry(path) is None:
            files.remove(path)
        files.remove(marker)


def _transfer(url, path, what, max_bytes):
    """Downloads ``url`` to ``path`` with pooch (retrying transient failures), checks that the
    whole body came, then records its size and SHA-256."""
    import pooch  # lazy: only a download needs it (a cached file loads without it)

    directory, name = os.path.split(path)
    progress = _Progress(public_url(url), what, max_bytes)
    downloader = pooch.HTTPDownloader(
        progressbar=progress,
        chunk_size=STALL_BYTES,
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        # The bytes as stored: a server that compresses on the fly declares the encoded
        # length, which the decoded file would not match (it is counted on the wire instead).
        headers={"Accept-Encoding": "identity"},
        hooks={"response": progress.on_response},
    )
    fetcher = pooch.create(
        path=directory, base_url="", registry={name: None}, retry_if_failed=RETRIES
    )
    fetcher.urls[name] = url
    try:
        with _quiet_pooch(pooch):
            fetcher.fetch(name, downloader=_PermanentErrorsNotRetried(downloader, progress))
    except DownloadError:
        raise
    except OSError as e:
        if not _is_request_error(e):  # disk full, a file size limit, no permission
            raise DownloadError(
                f"{public_url(url)}: cannot write {what} to {directory} ({e.strerror or e})"
            ) from None
        raise DownloadError(_failure(url, what, e, progress)) from None
    finally:
        progress.close()
    size = os.path.getsize(path)
    if progress.declared and progress.wire_bytes != progress.declared:  # _download removes it
        raise DownloadError(
            f"{public_url(url)}: the server declared {progress.declared:,} bytes for {what} but "
            f"sent {progress.wire_bytes:,}; nothing was kept"
        )
    record = {
        "url": public_url(url),
        "size": size,
        "sha256": sha256_of(path),
        "downloaded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write_record(path + RECORD_SUFFIX, record, like=path)
    progress.done(size)


class _PermanentErrorsNotRetried:
    """pooch's downloader, with the failures that cannot heal turned into ``DownloadError``
    (pooch retries only ``requests``' errors), and the stall guard around each transfer."""

    def __init__(self, downloader, progress):
        self.downloader = downloader
        self.progress = progress
        self.attempt = 0

    def __call__(self, url, output_file, pooch_):
        self.attempt += 1
        try:
            with _StallGuard(self.progress):
                return self.downloader(url, output_file, pooch_)
        except OSError as e:
            if _is_request_error(e) and not _transient(e, self.progress):
                raise DownloadError(_failure(url, self.progress.what, e, self.progress)) from None
            if _is_request_error(e) and self.attempt <= RETRIES:  # pooch tries again: say so
                self.progress.close()
                self.progress.say(
                    f"{public_url(url)}: {_reason(e, self.progress)}; trying again "
                    f"({self.attempt} of {RETRIES})"
                )
            raise


class _StallGuard:
    """Cuts the transfer in ``progress`` when fewer than ``STALL_BYTES`` arrived in the last
    ``READ_TIMEOUT`` seconds (a byte every few seconds never trips a read timeout)."""

    def __init__(self, progress):
        self.progress = progress
        self._done = threading.Event()

    def _watch(self):
        seen, since = self.progress.wire_bytes, time.monotonic()
        while not self._done.wait(min(1.0, READ_TIMEOUT / 4)):
            now, received = time.monotonic(), self.progress.wire_bytes
            if received - seen >= STALL_BYTES:
                seen, since = received, now
            elif now - since > READ_TIMEOUT:
                self.progress.stalled = True
                self.progress.cut()
                return

    def __enter__(self):
        self.progress.stalled = False
        self._thread = threading.Thread(target=self._watch, name="download-stall", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


def _is_request_error(error):
    import requests  # lazy: with pooch, only a download needs it

    return isinstance(error, requests.exceptions.RequestException)


def _transient(error, progress):
    """Whether a failed transfer may succeed if tried again: not for HTTP 4xx, a host name
    that does not resolve, a bad URL or a certificate that does not verify."""
    import requests  # lazy: with pooch, only a download needs it

    if progress.stalled:
        return True
    response = getattr(error, "response", None)
    if isinstance(error, requests.exceptions.HTTPError) and response is not None:
        return response.status_code >= 500
    if isinstance(error, requests.exceptions.SSLError | requests.exceptions.InvalidURL):
        return False
    return _root_cause(error)[0] != "dns"


def _failure(url, what, error, progress):
    """One line: the URL, the cause, what to do."""
    import requests  # lazy: with pooch, only a download needs it

    response = getattr(error, "response", None)
    advice = _what_to_do(url)
    if isinstance(error, requests.exceptions.HTTPError) and response is not None:
        if response.status_code == 404:
            advice = _cached_elsewhere(url) or (
                "the file is not at this address (a mirror keeps AllenNLP's folder and file "
                "names: docs/models.md)"
            )
    return f"{public_url(url)}: cannot download {what}: {_reason(error, progress)}; {advice}"


def _reason(error, progress):
    """The cause of a failed attempt, in a few words."""
    import requests  # lazy: with pooch, only a download needs it

    response = getattr(error, "response", None)
    if isinstance(error, requests.exceptions.HTTPError) and response is not None:
        return f"HTTP {response.status_code} {response.reason or ''}".strip()
    if progress.stalled or isinstance(error, requests.exceptions.ReadTimeout):
        return f"no data, or less than {STALL_BYTES // 1024} KiB, for {READ_TIMEOUT} s"
    if isinstance(error, requests.exceptions.ConnectTimeout):
        return f"no connection within {CONNECT_TIMEOUT} s"
    if isinstance(error, requests.exceptions.ChunkedEncodingError):
        return f"the connection closed after {progress.wire_bytes:,} bytes"
    kind, detail = _root_cause(error)
    return {
        "dns": f"the host name does not resolve ({detail})",
        "refused": f"the connection was refused ({detail})",
    }.get(kind, detail)


def _root_cause(error):
    """``(kind, text)`` of the innermost cause of a ``requests`` error: ``"dns"`` for a host
    name that does not resolve, ``"refused"``, else ``"other"``; ``text`` its own words."""
    seen, pending, innermost = set(), [error], error
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, socket.gaierror) or type(current).__name__ == "NameResolutionError":
            return "dns", _own_words(current)
        if isinstance(current, ConnectionRefusedError):
            return "refused", _own_words(current)
        innermost = current
        for linked in (current.__cause__, current.__context__, getattr(current, "reason", None)):
            if isinstance(linked, BaseException):
                pending.append(linked)
        pending += [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]
    return "other", _own_words(innermost)


def _own_words(error):
    """An error's message on one line, without the object reprs urllib3 puts first."""
    if isinstance(error, OSError) and error.strerror:
        return f"[Errno {error.errno}] {error.strerror}" if error.errno else error.strerror
    text = " ".join(str(error).split())
    return text.split(">: ", 1)[-1] or type(error).__name__


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
    """pooch's progress hook and ``requests``' response hook: bytes and rate on stderr, the
    declared size's bound, and the bytes that came over the wire.

    The response hook sees the headers before a byte of the body is written: a declared size
    over ``max_bytes`` is refused there.
    """

    def __init__(self, url, what, max_bytes):
        self.url = url
        self.what = what
        self.max_bytes = max_bytes
        self.declared = 0
        self.start = time.monotonic()
        self.stream = sys.stderr
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.stalled = False
        self._bar = None
        self._response = None

    def on_response(self, response, *args, **kwargs):
        """``requests``' hook: the response of this attempt, before its body is read."""
        self._response = response
        if response.status_code >= 400:
            return response
        self.declared = int(response.headers.get("content-length") or 0)
        if self.max_bytes is not None and self.declared > self.max_bytes:
            response.close()
            raise DownloadError(
                f"{self.url}: the server declares {self.declared:,} bytes for {self.what}, "
                f"more than the {self.max_bytes:,} it can hold; nothing was downloaded"
            )
        return response

    @property
    def wire_bytes(self):
        """Bytes of this attempt's body read from the connection (before any decoding)."""
        raw = getattr(self._response, "raw", None)
        try:
            return int(raw.tell()) if raw is not None else 0
        except (AttributeError, OSError, ValueError):
            return 0

    def cut(self):
        """Shuts the transfer's connection down (the stall guard): the reading thread sees
        it closed."""
        raw = getattr(self._response, "raw", None)
        # Through a duplicate of the connection's descriptor: shutting a socket down acts on
        # the connection itself. The response may have ended meanwhile: nothing to cut then.
        with contextlib.suppress(Exception):
            with socket.socket(fileno=os.dup(raw.fileno())) as sock:
                sock.shutdown(socket.SHUT_RDWR)

    # pooch's progress bar protocol: total (set before the body), update, reset, close
    @property
    def total(self):
        return self.declared

    @total.setter
    def total(self, value):
        if self.interactive:
            from tqdm.auto import tqdm  # lazy: a terminal only

            self._bar = tqdm(
                total=int(value or 0) or None,
                unit="B",
                unit_scale=True,
                desc=f"downloading {self.what}",
                file=self.stream,
            )
        else:
            self.say(f"downloading {self.what} from {self.url}")

    def update(self, n):
        if self.max_bytes is not None and self.wire_bytes > self.max_bytes + (1 << 20):
            raise DownloadError(
                f"{self.url}: {self.what} is larger than the {self.max_bytes:,} bytes it can "
                "hold; nothing was kept"
            )
        if self._bar is not None:
            self._bar.n = self.wire_bytes
            self._bar.refresh()

    def reset(self):  # pooch, after the body: reset, then update(total), then close
        pass

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
