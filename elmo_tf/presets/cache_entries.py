"""The model cache on disk: where each URL's file lives, its record, listing and removal.

The cache is ``ELMO_TF_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/elmo_tf``, else
``~/.cache/elmo_tf``. Each URL has an entry directory ``files/<hash of the URL>/`` holding:

- the file, named as the URL's last part;
- its record, ``<file>.json``: the URL (without user and password), the byte count and the
  SHA-256 taken as it was downloaded, and whether the loader's checks passed on it;
- ``.lock``, held while a process checks or downloads the entry;
- ``.partial``, the body of a download in progress, or of one that was killed.

A download writes the record, then renames ``.partial`` onto the file: the entry is complete
once both are there. What a killed download leaves (``.partial``, a record without its file) is
known by its name: ``stale_files`` counts it, and the entry's next download, ``remove`` and
``clear`` remove it. Anything else in an entry directory is not the cache's and is left alone
(``ELMO_TF_CACHE_DIR`` may name a directory of the user's own files).
"""

import dataclasses
import errno
import hashlib
import json
import os
import stat
import urllib.parse

from elmo_tf import files, urls
from elmo_tf.errors import CacheError, DownloadError

CACHE_VARIABLE = "ELMO_TF_CACHE_DIR"
RECORD_SUFFIX = ".json"
LOCK_NAME = ".lock"
PARTIAL_NAME = ".partial"
# What a cache that cannot be written answers: a read-only mount, another user's directory.
READ_ONLY_ERRORS = (errno.EROFS, errno.EACCES, errno.EPERM)
_KEY_LENGTH = 24  # hex digits of the URL's SHA-256 naming an entry's directory


def cache_dir():
    """The cache's root directory (it may not exist yet)."""
    if os.environ.get(CACHE_VARIABLE):
        return os.path.abspath(os.path.expanduser(os.environ[CACHE_VARIABLE]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "elmo_tf")


def files_dir():
    """Where the entries live: ``files/`` under ``cache_dir()``, the cache's own directory."""
    return os.path.join(cache_dir(), "files")


def entry_path(url):
    """Where ``url``'s file lives in the cache (whether or not it is there)."""
    if problem := urls.problem(url):
        raise DownloadError(f"{urls.public_url(url)}: not a usable URL ({problem})")
    url = urls.public_url(url)
    # never a hidden name: those are the entry's lock and partial download
    name = os.path.basename(urllib.parse.urlsplit(url).path).lstrip(".") or "file"
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:_KEY_LENGTH]
    return os.path.join(files_dir(), key, name)


@dataclasses.dataclass(frozen=True)
class Entry:
    """A cached file ``path`` and its record: ``url``, ``size``, ``sha256``, ``downloaded``,
    and ``loader_checked`` (the loader's checks passed on it once)."""

    path: str
    url: str
    size: int
    sha256: str
    downloaded: str = ""
    loader_checked: bool = False


def read_record(path):
    """The ``Entry`` recorded for the cached file ``path`` (there or not), or ``None``."""
    try:
        with open(path + RECORD_SUFFIX, encoding="utf-8") as f:
            record = json.load(f)
        return Entry(
            path,
            str(record["url"]),
            int(record["size"]),
            str(record["sha256"]),
            str(record.get("downloaded", "")),
            record.get("checked") is True,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def read_entry(path):
    """The ``Entry`` of the cached file ``path`` when its record and the file (whatever it now
    is) are both there, else ``None``."""
    return read_record(path) if os.path.lexists(path) else None


def write_record(entry, mode=0o600):
    """Writes ``entry``'s record atomically, with the file's permissions ``mode``."""
    record = {"url": entry.url, "size": entry.size, "sha256": entry.sha256}
    record.update(downloaded=entry.downloaded, checked=entry.loader_checked)
    path = entry.path + RECORD_SUFFIX
    files.write_text(path, json.dumps(record, indent=2) + "\n")
    os.chmod(path, mode)


def file_problem(path):
    """What keeps the cached file ``path`` from being read as one (``"is a directory"``,
    ``"is a named pipe"``, ``"is missing"``), or ``None`` for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "is missing"
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISREG(mode):
        return None
    return "is a directory" if stat.S_ISDIR(mode) else f"is a {files.stream_kind(path) or 'device'}"


def _entry_directories():
    """The entry directories the cache made: ``files/<key>/`` with a key of hex digits."""
    root = files_dir()
    if not os.path.isdir(root) or os.path.islink(root):
        return []
    found = [os.path.join(root, key) for key in sorted(os.listdir(root)) if _is_key(key)]
    return [d for d in found if os.path.isdir(d) and not os.path.islink(d)]


def _is_key(name):
    return len(name) == _KEY_LENGTH and all(c in "0123456789abcdef" for c in name)


def _records(directory):
    """``{record name: Entry}`` of the records in an entry directory."""
    found = {}
    for name in os.listdir(directory):
        if name.endswith(RECORD_SUFFIX):
            entry = read_record(os.path.join(directory, name[: -len(RECORD_SUFFIX)]))
            if entry is not None:
                found[name] = entry
    return found


def entries():
    """Every complete entry in the cache (its record and its file), sorted by URL."""
    found = [e for d in _entry_directories() for e in _records(d).values()]
    return sorted((e for e in found if os.path.lexists(e.path)), key=lambda e: e.url)


def stale_files():
    """``[(path, bytes)]``: what killed downloads left (a partial body, a record without its
    file). The entry's next download removes it; ``remove`` and ``clear`` too."""
    stale = []
    for directory in _entry_directories():
        paths = [os.path.join(directory, PARTIAL_NAME)]
        paths += [e.path + RECORD_SUFFIX for e in _records(directory).values()]
        for path in paths:
            if path.endswith(RECORD_SUFFIX) and os.path.lexists(path[: -len(RECORD_SUFFIX)]):
                continue  # a complete entry's record
            if os.path.lexists(path):
                stale.append((path, os.lstat(path).st_size))
    return stale


def remove_leftovers(path):
    """Before a download of ``path``: what an earlier one left in its entry (the partial body,
    a record without its file, the file without its record)."""
    directory = os.path.dirname(path)
    files.remove(os.path.join(directory, PARTIAL_NAME))
    files.remove(path + RECORD_SUFFIX)
    if os.path.isfile(path) and not os.path.islink(path):
        files.remove(path)


def remove(url):
    """Removes ``url``'s entry; returns ``(existed, kept)``: whether there was one, and its
    directory if files the cache did not make keep it (they are left alone)."""
    directory = os.path.dirname(entry_path(url))
    if not os.path.isdir(directory) or os.path.islink(directory):
        return False, None
    return True, (None if _remove_entry(directory) else directory)


def clear():
    """Removes every entry the cache made, and ``files/`` if it is then empty; returns
    ``(removed, kept)``: how many entries, and the entry directories that files the cache did
    not make keep. Nothing else in the cache directory is touched."""
    directories = _entry_directories()
    kept = [d for d in directories if not _remove_entry(d)]
    try:
        os.rmdir(files_dir())
    except OSError:
        pass  # not empty, or gone
    return len(directories) - len(kept), kept


def discard(path):
    """Removes the entry of the cached file ``path`` (found unusable); returns what happened,
    for the caller's message."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.dirname(directory) != files_dir() or not _is_key(os.path.basename(directory)):
        return "not from the cache"
    try:
        _remove_entry(directory)
    except CacheError as e:
        return f"not removed: {e}"
    return "removed from the cache"


def _remove_entry(directory):
    """Removes what the cache made in an entry directory (the file before its record, whatever
    the file now is; a directory in its place only when empty), then the directory when that
    leaves it empty; returns whether it is gone. ``CacheError`` where it cannot be written."""
    records = _records(directory)
    own = [os.path.basename(e.path) for e in records.values()]
    try:
        for name in [*own, PARTIAL_NAME, *records, LOCK_NAME]:
            _remove_one(os.path.join(directory, name))
        os.rmdir(directory)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise CacheError(f"cannot remove {directory}: {cannot_write(e)}") from None
    return True


def _remove_one(path):
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)  # not the cache's own contents: kept unless empty
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise


def cannot_write(error):
    """Why the cache cannot be written, in a few words."""
    if error.errno in READ_ONLY_ERRORS:
        return f"the model cache {cache_dir()} is read-only ({error.strerror})"
    return error.strerror or str(error)
