"""Reading text files and writing any file, the same way everywhere.

Writing: ``atomic_path(path)`` yields a temporary name beside ``path`` (same directory, so the
final rename is atomic on one filesystem); the caller writes the file or directory there, and
on success it is renamed onto ``path``. On any failure (an exception, Ctrl-C, SIGTERM in the
``elmo-tf`` command) the temporary is removed and a previous ``path`` is left untouched: an
interrupted write never leaves a complete-looking file. A process killed outright (SIGKILL,
power loss) cannot clean up, so the next ``atomic_path`` for the same name removes the
temporaries whose writing process no longer exists (their names carry its pid). Files get
the permissions of a plain ``open(path, "w")`` under the user's umask
(``tempfile.mkstemp``'s 0600 would otherwise survive the rename).

Reading: ``read_text_lines(path)`` reads UTF-8 text one line at a time: lines end at ``\\n``,
``\\r\\n`` or ``\\r`` (line numbers are those an editor shows), a leading byte-order mark is
dropped, and an undecodable line or a NUL byte raises ``InputFileError`` naming the file and
the 1-based line.
"""

import codecs
import contextlib
import os
import re
import secrets
import shutil

from elmo_tf.errors import InputFileError


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


def read_text_lines(path, what="input"):
    """The lines of the UTF-8 text file ``path``, as a list of ``str`` without line ends.

    Raises ``InputFileError`` naming the file (``what`` says which kind: ``"input"``,
    ``"vocabulary"``, ...) when it is missing, unreadable, binary or not UTF-8; an
    encoding error names the 1-based line and the offending byte.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise InputFileError(f"{path}: {what} file not found") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: {what} is a directory, expected a text file") from None
    except OSError as e:
        raise InputFileError(f"{path}: cannot read {what} file ({e.strerror})") from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    lines = []
    for number, line in enumerate(data.splitlines(), start=1):
        nul = line.find(b"\0")
        if nul >= 0:
            raise InputFileError(
                f"{path}: line {number} holds a NUL byte (at byte {nul + 1} of the line); "
                f"expected a UTF-8 text {what} file"
            )
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise InputFileError(
                f"{path}: line {number} is not valid UTF-8 "
                f"(byte 0x{line[e.start]:02x} at byte {e.start + 1} of the line)"
            ) from None
    return lines
