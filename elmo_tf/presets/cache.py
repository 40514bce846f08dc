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

from elmo_tf.errors import CacheError, DownloadError, ElmoError
from elmo_tf.presets import cache_entries, nlpl, published
from elmo_tf.system import environment, files, untrusted_files
from elmo_tf.system.urls import public_url

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

    def write(partial):
        return transfer.download(url, partial, what, max_bytes, lambda status: _advice(url, status))

    _store(url, path, what, check, write, f"downloaded from {public_url(url)}")


def add(url, source, what="file", max_bytes=None, check=None):
    """Puts the local file ``source`` into the cache as ``url``'s file, as a download of it
    would be put there: read no further than ``max_bytes``, checked by ``check``, recorded
    with its size and SHA-256. ``CacheError`` where the cache holds ``url``'s file already."""
    path = cache_entries.entry_path(url)
    lock, cannot_lock = _lock(os.path.dirname(path))
    if lock is None:
        raise CacheError(f"{path}: cannot add {what}: {cache_entries.cannot_write(cannot_lock)}")
    try:
        if cache_entries.read_entry(path) is not None:
            raise CacheError(
                f"{public_url(url)}: {what} is in the cache already ({path}); remove it first "
                "(elmo-tf cache remove) to replace it"
            )

        def write(partial):
            return _copy_bounded(source, partial, what, max_bytes)

        _store(url, path, what, check, write, f"from {source}")
    finally:
        lock.release()
    return path


def _copy_bounded(source, target, what, max_bytes):
    """``(size, sha256)`` of ``source`` copied to ``target``, no further than ``max_bytes``."""
    untrusted_files.check_readable(source, "file", CacheError)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    digest, size = hashlib.sha256(), 0
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # as a download
    with open(source, "rb") as f, open(descriptor, "wb") as out:
        while chunk := f.read(1 << 20):
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise CacheError(f"{source}: more than the {max_bytes:,} bytes {what} may have")
            digest.update(chunk)
            out.write(chunk)
    return size, digest.hexdigest()


def _store(url, path, what, check, write, origin):
    """Writes ``url``'s file into the entry's partial directory (``write(partial)`` returns its
    size and SHA-256), checks it, records it and renames it onto ``path``; nothing is kept of
    a failure. ``origin`` says where it came from in a refusal."""
    shown = public_url(url)
    staging = os.path.join(os.path.dirname(path), cache_entries.PARTIAL_NAME)
    record = path + cache_entries.RECORD_SUFFIX
    for leftover in (staging, record):  # what a killed download left
        files.remove(leftover)
    partial = os.path.join(staging, os.path.basename(path))
    try:
        size, sha256 = write(partial)
        if check is not None:
            try:
                check(partial)
            except ElmoError as e:
                raise type(e)(f"{e} ({origin}; not kept)") from None
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


def _mirror(url):
    """``(variable, layout)`` of the family of files ``url`` belongs to (under its home or its
    mirror): the environment variable that points the family at a mirror, and the names a
    mirror keeps; ``None`` for a URL of no family (a user's own address, which no variable
    moves)."""
    families = (
        ((nlpl.BASE_URL, nlpl.base_url_now()), nlpl.BASE_URL_VARIABLE,
         "the repository's <release>/<id>.zip names"),
        ((*published.ALLENNLP_BASE_URLS, published.model_base_url()), published.BASE_URL_VARIABLE,
         "AllenNLP's folder and file names"),
    )  # fmt: skip
    url = public_url(url)
    for bases, variable, layout in families:
        if any(url.startswith(public_url(base).rstrip("/") + "/") for base in bases):
            return variable, layout
    return None


def _advice(url, status):
    """What to do after a failed download (``status``: its HTTP status, or ``None``)."""
    if elsewhere := _cached_elsewhere(url):
        return elsewhere
    mirror = _mirror(url)
    if status == 404:
        if mirror is None:
            return "the file is not at this address"
        return f"the file is not at this address (a mirror keeps {mirror[1]}: docs/models.md)"
    if mirror is None:
        return "check the address and the network"
    return f"check the address and the network, or point {mirror[0]} at a mirror (docs/models.md)"


def _cached_elsewhere(url):
    """Where the cache holds ``url``'s file under another base URL (the same folder and file
    name), and what to do, or ``""``."""

    def tail(address):
        return urllib.parse.urlsplit(address).path.rstrip("/").split("/")[-2:]

    url = public_url(url)
    found = [e.url for e in cache_entries.entries() if e.url != url and tail(e.url) == tail(url)]
    if not found:
        return ""
    mirror = _mirror(url)
    if mirror is None:
        return f"the cache holds the same file for {found[0]} (the cache is keyed by URL)"
    return (
        f"the cache holds the same file for {found[0]} (the cache is keyed by URL): set "
        f"{mirror[0]} as it was set when it was downloaded"
    )
