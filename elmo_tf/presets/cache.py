"""Downloaded model files: fetched once over HTTP(S), kept in the cache, checked at every use.

``fetch(url)`` gives the local path of ``url``'s file: downloaded on first use (``transfer``)
into its cache entry (``cache_entries``: where it lives, its record, listing and removal), then
read from there. What no library does is here:

- trust on first use: no hashes of the published files exist to pin, so the size and SHA-256
  of what was downloaded are recorded, and every use checks the file against them
  (``check_unchanged``);
- ``filelock`` holds the entry while one process checks or downloads it, so workers loading
  one model at once end with one good copy. A cache that cannot be written (a read-only mount,
  as a model cache baked into a container image) needs no lock: a complete entry is read and
  checked as any, and a download says in one line that the cache is read-only;
- ``ELMO_TF_OFFLINE=1``: never touch the network; a file not in the cache is an error naming
  the command that fetches it, and the other address it is cached under, if any;
- a URL's user and password are sent but never shown or stored: the entry is keyed, recorded
  and named by the URL without them (``urls.public_url``).

Every failure is a ``DownloadError`` or ``CacheError`` line and leaves no partial or unchecked
file under the entry's name.
"""

import dataclasses
import hashlib
import os
import time
import urllib.parse

from elmo_tf import environment, files
from elmo_tf.errors import CacheError, DownloadError
from elmo_tf.presets import cache_entries
from elmo_tf.presets.published import BASE_URL_VARIABLE
from elmo_tf.urls import public_url

OFFLINE_VARIABLE = "ELMO_TF_OFFLINE"
_HASH_CHUNK = 1 << 20


def offline():
    """Whether ``ELMO_TF_OFFLINE`` forbids the network."""
    return environment.value(OFFLINE_VARIABLE)


def fetch(url, what="file", max_bytes=None, fetch_command=None):
    """The local path of ``url``'s file: downloaded into the cache on first use, checked
    against its record on every use.

    Args:
        url: an ``http://`` or ``https://`` URL.
        what: what the file is, for messages (``"the weight file of 'small'"``).
        max_bytes: the most bytes the file may hold: a server declaring more is refused
            before anything is written, and no more is ever written.
        fetch_command: the command that fetches this file, named by the offline error.
    """
    path = cache_entries.entry_path(url)
    lock, read_only = _lock(os.path.dirname(path))
    try:
        entry = cache_entries.read_entry(path)
        if entry is not None:
            check_unchanged(entry)
            return path
        if offline():
            raise DownloadError(_offline_message(url, what, path, fetch_command))
        if lock is None:
            raise CacheError(
                f"{public_url(url)}: {what} is not in the cache and cannot be downloaded into "
                f"it: {cache_entries.cannot_write(read_only)}; set "
                f"{cache_entries.CACHE_VARIABLE} to a directory that can be written"
            )
        _download(url, path, what, max_bytes)
        return path
    finally:
        if lock is not None:
            lock.release()


def _lock(directory):
    """``(lock, None)``, the entry's lock held; or ``(None, error)`` where the cache cannot be
    written (``cache_entries.READ_ONLY_ERRORS``): a complete entry is then read without it."""
    import filelock  # lazy: only a fetch needs it

    lock = filelock.FileLock(os.path.join(directory, cache_entries.LOCK_NAME))
    try:
        os.makedirs(directory, exist_ok=True)
        lock.acquire()
    except OSError as e:
        if e.errno in cache_entries.READ_ONLY_ERRORS:
            return None, e
        raise CacheError(
            f"cannot create the model cache directory {directory} or its lock ({e.strerror or e}); "
            f"set "
            f"{cache_entries.CACHE_VARIABLE} to a directory that can be written"
        ) from None
    return lock, None


def _download(url, path, what, max_bytes):
    """Downloads ``url`` to ``path``, the entry's lock held: the body into the entry's partial
    file, then its record, then the file renamed into place. Nothing is kept of a failure."""
    from elmo_tf.presets import transfer  # lazy: pooch and requests, for a download only

    cache_entries.remove_leftovers(path)
    partial = os.path.join(os.path.dirname(path), cache_entries.PARTIAL_NAME)
    try:
        size, sha256 = transfer.download(
            url, partial, what, max_bytes, lambda status: _what_to_do(url, status)
        )
        downloaded = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entry = cache_entries.Entry(path, public_url(url), size, sha256, downloaded)
        try:
            cache_entries.write_record(entry)
            os.replace(partial, path)
        except OSError as e:
            files.remove(entry.path + cache_entries.RECORD_SUFFIX)
            raise DownloadError(
                f"{public_url(url)}: cannot write {what} to {path} ({e.strerror or e})"
            ) from None
    finally:
        files.remove(partial)


def check_offline(url, what="file", fetch_command=None):
    """Under ``ELMO_TF_OFFLINE``, the ``DownloadError`` ``fetch`` would raise for ``url``'s
    file when it is not cached, raised now: a command says so before its work starts."""
    path = cache_entries.entry_path(url)
    if offline() and cache_entries.read_entry(path) is None:
        raise DownloadError(_offline_message(url, what, path, fetch_command))


def check_unchanged(entry):
    """Raises ``CacheError`` unless the cached file is still a file of its recorded size and
    SHA-256 (a directory or a named pipe in its place is never opened)."""
    problem = cache_entries.file_problem(entry.path)
    size = None if problem else os.path.getsize(entry.path)
    if size == entry.size and _sha256_of(entry.path) == entry.sha256:
        return
    found = problem or (
        f"changed since it was downloaded ({size:,} bytes, recorded {entry.size:,} bytes and "
        "its SHA-256)"
    )
    raise CacheError(
        f"{entry.path}: the cached copy of {entry.url} {found}; it is not loaded. Remove it "
        "(elmo-tf cache remove) to download it again"
    )


def _sha256_of(path):
    digest = hashlib.sha256()
    # never waits on a named pipe put in the file's place meanwhile
    with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def loader_checks_passed(path):
    """Whether the loader's checks (``weight_file.check_file``) passed on the cached file
    ``path`` once: they are not run again at every use (``check_unchanged`` still is)."""
    entry = cache_entries.read_record(path)
    return entry is not None and entry.loader_checked


def record_loader_checks_passed(path):
    """Records that the loader's checks passed on the cached file ``path``; where the cache
    cannot be written they run again at the next use."""
    entry = cache_entries.read_record(path)
    if entry is None:
        return
    try:
        mode = os.stat(path).st_mode & 0o777
        cache_entries.write_record(dataclasses.replace(entry, loader_checked=True), mode)
    except OSError as e:
        if e.errno not in cache_entries.READ_ONLY_ERRORS:
            raise


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
    found = [e.url for e in cache_entries.entries() if _same_file(e.url, url)]
    if not found:
        return ""
    return (
        f"the cache holds the same file for {found[0]} (the cache is keyed by URL): set "
        f"{BASE_URL_VARIABLE} as it was set when it was downloaded"
    )


def _what_to_do(url, status):
    """After a failed download (``status``: its HTTP status, or ``None``)."""
    if elsewhere := _cached_elsewhere(url):
        return elsewhere
    if status == 404:
        return (
            "the file is not at this address (a mirror keeps AllenNLP's folder and file names: "
            "docs/models.md)"
        )
    return (
        f"check the address and the network, or point {BASE_URL_VARIABLE} at a mirror "
        "(docs/models.md)"
    )


def _same_file(a, b):
    """Whether two URLs name the same file under different bases (the folder and file name)."""

    def tail(url):
        return urllib.parse.urlsplit(public_url(url)).path.rstrip("/").split("/")[-2:]

    return public_url(a) != public_url(b) and tail(a) == tail(b)
