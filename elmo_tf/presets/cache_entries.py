"""The model cache on disk: each URL's entry, its record, listing and removal.

The cache is ``ELMO_TF_CACHE_DIR``, else ``$XDG_CACHE_HOME/elmo_tf``, else ``~/.cache/elmo_tf``.
A URL's entry, ``files/<hash of the URL>/``, holds the file, its record ``<file>.json`` (URL
without credentials, size, SHA-256), ``.lock`` and ``.partial/`` (a download under way, or an
archive being unpacked), and for an archive its unpacked folder ``<file>.unpacked/``. A
download writes the record, then moves the file out of ``.partial/``: what a killed one leaves
(``.partial/``, a record without its file) is stale. Nothing else in an entry is the cache's.
"""

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import stat
import urllib.parse

from elmo_tf.errors import CacheError, DownloadError
from elmo_tf.system import files, urls

CACHE_VARIABLE = "ELMO_TF_CACHE_DIR"
RECORD_SUFFIX = ".json"
UNPACKED_SUFFIX = ".unpacked"  # an archive's folder, beside it
LOCK_NAME = ".lock"
PARTIAL_NAME = ".partial"
# What a cache that cannot be written answers: a read-only mount, another user's directory.
READ_ONLY_ERRORS = (errno.EROFS, errno.EACCES, errno.EPERM)
_NOT_EMPTY = (errno.ENOTEMPTY, errno.EEXIST)
_KEY_LENGTH = 24  # hex digits of the URL's SHA-256 naming its entry


def cache_dir():
    """The cache's root directory (it may not exist yet)."""
    if os.environ.get(CACHE_VARIABLE):
        return os.path.abspath(os.path.expanduser(os.environ[CACHE_VARIABLE]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "elmo_tf")


def files_dir():
    """The entries' directory: ``files/`` under ``cache_dir()``, the cache's own."""
    return os.path.join(cache_dir(), "files")


def entry_path(url):
    """Where ``url``'s file lives in the cache (whether or not it is there)."""
    if problem := urls.problem(url):
        raise DownloadError(f"{urls.public_url(url)}: not a usable URL ({problem})")
    url = urls.public_url(url)
    # never a hidden name: those are the entry's lock and partial body
    name = os.path.basename(urllib.parse.urlsplit(url).path).lstrip(".") or "file"
    data = url.encode("utf-8")  # pragma: no mutate, equivalent: codec names ignore case
    key = hashlib.sha256(data).hexdigest()[:_KEY_LENGTH]
    return os.path.join(files_dir(), key, name)


@dataclasses.dataclass(frozen=True)
class Entry:
    """A cached file ``path`` and its record."""

    path: str
    url: str
    size: int
    sha256: str


def read_record(path):
    """The ``Entry`` recorded for the cached file ``path`` (there or not), or ``None`` (no
    record, or one that cannot be read: ``record_problem``)."""
    if record_problem(path):
        return None
    try:
        with open(
            path + RECORD_SUFFIX,
            encoding="utf-8",  # pragma: no mutate, equivalent: codec names ignore case
        ) as f:
            record = json.load(f)
        return Entry(path, str(record["url"]), int(record["size"]), str(record["sha256"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_entry(path):
    """The ``Entry`` of ``path`` when its record and the file (whatever it is) are there."""
    return read_record(path) if os.path.lexists(path) else None


def record_problem(path):
    """What keeps the record of the cached file ``path`` from being read (``"is a named
    pipe"``, ``"is a directory"``), or ``None``: a reader that opened a pipe would wait for a
    writer forever (``download``, ``cache list`` and ``cache remove`` all read records)."""
    record = path + RECORD_SUFFIX
    if os.path.isdir(record):
        return "is a directory"
    if kind := files.special_kind(record):
        return f"is a {kind}"
    if os.path.lexists(record) and not os.access(record, os.R_OK):
        return "cannot be read (Permission denied: another user's cache?)"
    return None


def broken_records():
    """``[(record path, problem)]`` of the records that are no file to read."""
    found = []
    for directory in _entry_directories():
        for name in _record_names(directory):
            path = os.path.join(directory, name)
            if problem := record_problem(path):
                found.append((path + RECORD_SUFFIX, problem))
    return found


def write_record(entry):
    """Writes ``entry``'s record atomically, as private as the file (0600)."""
    record = dataclasses.asdict(entry)
    del record["path"]
    files.write_text(entry.path + RECORD_SUFFIX, json.dumps(record, indent=2) + "\n")
    os.chmod(entry.path + RECORD_SUFFIX, 0o600)


def file_problem(path):
    """What keeps the cached file ``path`` from being read (``"is a directory"``, ``"is a
    named pipe"``), or ``None`` for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        return "is missing" if e.errno == errno.ENOENT else f"cannot be read ({e.strerror})"
    if stat.S_ISREG(mode):
        return None
    return "is a directory" if stat.S_ISDIR(mode) else f"is a {files.stream_kind(path) or 'device'}"


def _entry_directories():
    """The entry directories the cache made: ``files/<key>/``, a key of hex digits."""
    root = files_dir()
    if not os.path.isdir(root) or os.path.islink(root):
        return []
    keys = [
        k for k in os.listdir(root) if len(k) == _KEY_LENGTH and not k.strip("0123456789abcdef")
    ]
    found = [os.path.join(root, key) for key in sorted(keys)]
    return [d for d in found if os.path.isdir(d) and not os.path.islink(d)]


def _record_names(directory):
    """The names of the cached files an entry directory holds records of (``<name>.json``)."""
    return [n[: -len(RECORD_SUFFIX)] for n in os.listdir(directory) if n.endswith(RECORD_SUFFIX)]


def _records(directory):
    """The ``Entry`` of each record in an entry directory that can be read."""
    names = _record_names(directory)
    return [e for e in (read_record(os.path.join(directory, n)) for n in names) if e is not None]


def entries():
    """Every complete entry (its record and its file), sorted by URL."""
    found = [e for d in _entry_directories() for e in _records(d) if os.path.lexists(e.path)]
    return sorted(found, key=lambda e: e.url)


def stale_files():
    """``[(path, bytes)]`` of what killed downloads left: a partial body, a record without
    its file."""
    stale = []
    for directory in _entry_directories():
        paths = [e.path + RECORD_SUFFIX for e in _records(directory) if not os.path.lexists(e.path)]
        partial = os.path.join(directory, PARTIAL_NAME)
        if os.path.isdir(partial):
            paths += [os.path.join(partial, name) for name in os.listdir(partial)]
        stale += [(p, os.lstat(p).st_size) for p in paths]
    return stale


def remove(url):
    """Removes ``url``'s entry; returns ``(existed, kept)``: whether there was one, and its
    directory where files the cache did not make keep it."""
    directory = os.path.dirname(entry_path(url))
    if not os.path.isdir(directory) or os.path.islink(directory):
        return False, None
    return True, (None if _remove_entry(directory) else directory)


def clear():
    """Removes every entry, and ``files/`` if that leaves it empty; returns ``(removed, kept)``:
    how many entries, and the entry directories that files the cache did not make keep."""
    directories = _entry_directories()
    kept = [d for d in directories if not _remove_entry(d)]
    with contextlib.suppress(OSError):
        os.rmdir(files_dir())  # only if empty: the cache directory may hold the user's files
    return len(directories) - len(kept), kept


def _remove_entry(directory):
    """Removes what the cache made in an entry directory (each file before its record,
    whatever it now is: a directory in its place only when empty), then the directory if that
    leaves it empty; returns whether it is gone."""
    # a file and its record are the cache's by their names, whatever the record holds or is
    names = [os.path.join(directory, n) for n in _record_names(directory)]
    own = names + [n + RECORD_SUFFIX for n in names]
    try:
        files.remove(os.path.join(directory, PARTIAL_NAME))  # the cache's, all of it
        for name in names:  # an archive's unpacked folder: the cache's, all of it
            files.remove(name + UNPACKED_SUFFIX)
        for path in [*own, os.path.join(directory, LOCK_NAME)]:
            try:
                (os.rmdir if os.path.isdir(path) and not os.path.islink(path) else os.unlink)(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno not in _NOT_EMPTY:  # a directory of the user's files: left alone
                    raise
        os.rmdir(directory)
    except OSError as e:
        if e.errno in _NOT_EMPTY:
            return False
        raise CacheError(f"cannot remove {directory}: {cannot_write(e)}") from None
    return True


def cannot_write(error):
    """Why the cache cannot be written (``error``: the ``OSError``), in a few words."""
    if error.errno in READ_ONLY_ERRORS:
        return f"the model cache {cache_dir()} is read-only ({error.strerror})"
    return error.strerror or str(error)
