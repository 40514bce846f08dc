"""Downloaded model files: fetched once over HTTP(S), kept in the cache, checked at every use.

``fetch(url)`` downloads ``url``'s file on first use (``transfer``) into its cache entry
(``cache_entries``). No hashes of the published files exist to pin, so the size and SHA-256 of
what was downloaded are recorded, and every use checks the file against them; a download is
checked as the loader checks it before it is recorded. ``filelock`` holds an entry while one
process checks or downloads it; a cache that cannot be written (a read-only mount, as a cache
baked into a container image) is read without the lock. ``ELMO_TF_OFFLINE=1`` never touches
the network.
"""

import hashlib
import os
import urllib.parse

from elmo_tf import environment, files
from elmo_tf.errors import CacheError, DownloadError, ElmoError
from elmo_tf.presets import cache_entries
from elmo_tf.presets.published import BASE_URL_VARIABLE
from elmo_tf.urls import public_url

OFFLINE_VARIABLE = "ELMO_TF_OFFLINE"


def offline():
    """Whether ``ELMO_TF_OFFLINE`` forbids the network."""
    return environment.value(OFFLINE_VARIABLE)


def fetch(url, what="file", max_bytes=None, fetch_command=None, check=None):
    """The local path of ``url``'s file, downloaded on first use. ``what`` names it in
    messages (``"the weight file of 'small'"``), ``max_bytes`` bounds it, ``fetch_command``
    is named by the offline error, and ``check(path)`` raises an ``ElmoError`` for a
    downloaded file not to be kept."""
    path = cache_entries.entry_path(url)
    lock, cannot_lock = _lock(os.path.dirname(path))
    try:
        entry = cache_entries.read_entry(path)
        if entry is not None:
            check_unchanged(entry)
        elif offline():
            raise DownloadError(_offline_message(url, what, path, fetch_command))
        elif lock is None:
            raise CacheError(
                f"{public_url(url)}: {what} is not in the cache and cannot be downloaded into "
                f"it: {cache_entries.cannot_write(cannot_lock)}; set "
                f"{cache_entries.CACHE_VARIABLE} to a directory that can be written"
            )
        else:
            _download(url, path, what, max_bytes, check)
        return path
    finally:
        if lock is not None:
            lock.release()


def unpacked(path, what, unpack):
    """The folder ``<path>.unpacked`` beside the cached archive ``path`` (``fetch`` got it and
    checked it unchanged), made once by ``unpack(archive, new_directory)`` under the entry's
    lock, into ``.partial/`` first and renamed when complete; a cache that cannot be written
    is read as it is."""
    folder = path + cache_entries.UNPACKED_SUFFIX
    if os.path.isdir(folder) and not os.path.islink(folder):
        return folder
    lock, cannot_lock = _lock(os.path.dirname(path))
    if lock is None:
        raise CacheError(
            f"{path}: {what} is cached but not unpacked, and cannot be: "
            f"{cache_entries.cannot_write(cannot_lock)}"
        )
    try:
        if os.path.isdir(folder) and not os.path.islink(folder):
            return folder  # another process unpacked it meanwhile
        files.remove(folder)  # whatever else is in its place is not the cache's folder
        staging = os.path.join(os.path.dirname(path), cache_entries.PARTIAL_NAME)
        files.remove(staging)  # what a killed unpacking left
        os.makedirs(staging)
        try:
            unpack(path, os.path.join(staging, "unpacked"))
            os.replace(os.path.join(staging, "unpacked"), folder)
        except OSError as e:
            if isinstance(e, ElmoError):
                raise
            raise CacheError(f"{path}: cannot unpack {what} ({e.strerror or e})") from None
        finally:
            files.remove(staging)
        return folder
    finally:
        lock.release()


def _lock(directory):
    """``(lock, None)``, the entry's lock held; or ``(None, error)`` where the cache cannot be
    written (``cache_entries.READ_ONLY_ERRORS``): a complete entry is read without the lock."""
    import filelock  # lazy: only a fetch needs it

    lock = filelock.FileLock(os.path.join(directory, cache_entries.LOCK_NAME))
    try:
        os.makedirs(directory, exist_ok=True)
        lock.acquire()
    except OSError as e:
        if e.errno in cache_entries.READ_ONLY_ERRORS:
            return None, e
        raise CacheError(
            f"cannot create the model cache directory {directory} or its lock "
            f"({e.strerror or e}); set {cache_entries.CACHE_VARIABLE} to a directory that can "
            "be written"
        ) from None
    return lock, None


def _download(url, path, what, max_bytes, check):
    """Downloads ``url``'s file into the entry's partial directory, checks it, records it and
    renames it onto ``path``; nothing is kept of a failure."""
    from elmo_tf.presets import transfer  # lazy: pooch and requests, for a download only

    shown = public_url(url)
    staging = os.path.join(os.path.dirname(path), cache_entries.PARTIAL_NAME)
    record = path + cache_entries.RECORD_SUFFIX
    for leftover in (staging, record):  # what a killed download left
        files.remove(leftover)
    partial = os.path.join(staging, os.path.basename(path))
    try:
        size, sha256 = transfer.download(
            url, partial, what, max_bytes, lambda status: _advice(url, status)
        )
        if check is not None:
            try:
                check(partial)
            except ElmoError as e:
                raise type(e)(f"{e} (downloaded from {shown}; not kept)") from None
        try:
            cache_entries.write_record(cache_entries.Entry(path, shown, size, sha256))
            os.replace(partial, path)
        except OSError as e:  # a full disk, a directory in the file's place
            files.remove(record)
            raise DownloadError(
                f"{shown}: cannot write {what} to {path} ({e.strerror or e})"
            ) from None
    finally:
        files.remove(staging)


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
    problem = problem or (
        f"changed since it was downloaded ({size:,} bytes, recorded {entry.size:,} bytes and "
        "its SHA-256)"
    )
    raise CacheError(
        f"{entry.path}: the cached copy of {entry.url} {problem}; it is not loaded. Remove it "
        "(elmo-tf cache remove) to download it again"
    )


def _sha256_of(path):
    digest = hashlib.sha256()
    # O_NONBLOCK: never waits on a named pipe put in the file's place meanwhile
    with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _offline_message(url, what, path, fetch_command):
    message = (
        f"{public_url(url)}: {what} is not in the cache ({path}) and {OFFLINE_VARIABLE} "
        f"forbids downloading it: run {fetch_command or 'the same call'} without "
        f"{OFFLINE_VARIABLE}, where the network is reachable"
    )
    return message + (f"; {elsewhere}" if (elsewhere := _cached_elsewhere(url)) else "")


def _advice(url, status):
    """What to do after a failed download (``status``: its HTTP status, or ``None``)."""
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


def _cached_elsewhere(url):
    """Where the cache holds ``url``'s file under another base URL (the same folder and file
    name), and what to do, or ``""``."""

    def tail(address):
        return urllib.parse.urlsplit(address).path.rstrip("/").split("/")[-2:]

    url = public_url(url)
    found = [e.url for e in cache_entries.entries() if e.url != url and tail(e.url) == tail(url)]
    if not found:
        return ""
    return (
        f"the cache holds the same file for {found[0]} (the cache is keyed by URL): set "
        f"{BASE_URL_VARIABLE} as it was set when it was downloaded"
    )
