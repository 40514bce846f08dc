"""Writing any file the same way everywhere: atomically.

``atomic_path(path)`` yields a temporary name beside ``path`` (same directory, so the
final rename is atomic on one filesystem); the caller writes the file or directory there, and
on success it is renamed onto ``path``. On any failure (an exception, Ctrl-C, SIGTERM in the
``elmo-tf`` command) the temporary is removed and a previous ``path`` is left untouched: an
interrupted write never leaves a complete-looking file. A process killed outright (SIGKILL,
power loss) cannot clean up, so the next ``atomic_path`` for the same name removes the
temporaries whose writing process no longer exists (their names carry its pid). Files get
the permissions of a plain ``open(path, "w")`` under the user's umask
(``tempfile.mkstemp``'s 0600 would otherwise survive the rename).
"""

import contextlib
import os
import re
import secrets
import shutil


def temporary_name(path):
    """A fresh hidden name beside ``path``: ``.NAME.PID-RANDOM.tmp``."""
    directory, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(directory, f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def remove_stale_temporaries(path):
    """Removes the temporaries of ``path`` left by processes that no longer exist."""
    directory, name = os.path.split(os.path.abspath(os.fspath(path)))
    pattern = re.compile(rf"\.{re.escape(name)}\.(\d+)-[0-9a-f]{{8}}\.tmp")
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match and not _process_exists(int(match.group(1))):
            remove(os.path.join(directory, entry))


def _process_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextlib.contextmanager
def atomic_path(path, replace=True):
    """Yields a temporary path to write; renames it onto ``path`` when the block succeeds.

    Args:
        path: the final file or directory name.
        replace: replace an existing ``path`` (files only); with ``False`` an existing
            ``path`` raises ``FileExistsError`` and is left alone.
    """
    path = os.fspath(path)
    remove_stale_temporaries(path)
    tmp = temporary_name(path)
    try:
        yield tmp
        if os.path.isdir(tmp):
            if os.path.exists(path):
                raise FileExistsError(f"{path} already exists")
            os.rename(tmp, path)
        else:
            if not replace and os.path.exists(path):
                raise FileExistsError(f"{path} already exists")
            os.replace(tmp, path)
    except BaseException:
        remove(tmp)
        raise


def remove(path):
    """Removes a file or a directory tree if it exists."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def write_bytes(path, data):
    """Writes ``data`` to ``path`` atomically (see ``atomic_path``)."""
    with atomic_path(path) as tmp, open(tmp, "xb") as f:
        f.write(data)


def write_text(path, text):
    """Writes ``text`` as UTF-8 to ``path`` atomically (see ``atomic_path``)."""
    write_bytes(path, text.encode("utf-8"))
