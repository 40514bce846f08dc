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

An output name that is a symbolic link is written through: the file the link resolves to is
replaced and the link kept (``/dev/stdout`` redirected to a file names that file, never the
link in ``/dev``). A name that resolves to something other than a regular file or a directory
(a device such as ``/dev/null``, a named pipe, a socket, ``/dev/stdout`` on a pipe or a
terminal) is refused with ``OutputFileError`` before anything is written: the rename would
replace the device itself, not write into it.
"""

import contextlib
import os
import re
import secrets
import shutil
import stat

from elmo_tf.errors import OutputFileError

_NOT_FILES = (
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISFIFO, "named pipe"),
    (stat.S_ISSOCK, "socket"),
)


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


def output_target(path):
    """The name a write of ``path`` replaces: ``path``, or the file a link there resolves to.

    Raises ``OutputFileError`` when ``path`` resolves to a device, a named pipe or a socket.
    """
    path = os.fspath(path)
    kind = special_kind(path)  # links followed: /dev/stdout -> /proc/self/fd/1 -> a pipe
    if kind is not None:
        raise OutputFileError(
            f"{path}: is a {kind}, not a regular file; an output is written as a new file "
            f"renamed onto its name, which would replace the {kind}: choose a file name"
        )
    return os.path.realpath(path) if os.path.islink(path) else path


def same_file(a, b):
    """Whether ``a`` and ``b`` name one existing file: links followed, hard links included."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # either missing, unreadable, or not a path
        return False


def inside(path, directory):
    """Whether ``path`` lies below ``directory``, both with their links resolved (``path`` need
    not exist yet)."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path != directory and os.path.commonpath([path, directory]) == directory


def check_not_input(output, inputs, error, advice="choose another output name"):
    """Raises ``error`` when writing ``output`` would replace or add to what a command reads:
    ``output`` is one of the files ``inputs`` (through a link or a hard link too), or lies
    inside one of them that is a directory (every file below it is read: a later run would
    read this output as input). ``advice`` ends the message."""
    inputs = list(inputs)
    for path in inputs:
        if same_file(output, path) and not os.path.isdir(path):
            raise error(f"{output}: is an input file; {advice}")
    for path in inputs:
        if os.path.isdir(path) and (same_file(output, path) or inside(output, path)):
            where = "is" if same_file(output, path) else "is inside"
            raise error(
                f"{output}: {where} the input directory {path}, whose every file is read "
                f"(a later run would read this output as input); {advice}"
            )


def stream_kind(path):
    """``"named pipe"`` or ``"socket"`` when ``path`` (links followed) is one, else ``None``.

    A reader that opens one waits for a writer that may never come; files read whole (options,
    weights) refuse them instead.
    """
    kind = special_kind(path)
    return kind if kind in ("named pipe", "socket") else None


def special_kind(path):
    """What ``path`` (links followed) is when it is not a regular file or a directory
    (``"named pipe"``, ``"socket"``, ``"character device"``, ``"block device"``), else
    ``None`` (a missing path too)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # absent (or unreadable): the write names the problem
    for test, kind in _NOT_FILES:
        if test(mode):
            return kind
    return None


@contextlib.contextmanager
def atomic_path(path, replace=True):
    """Yields a temporary path to write; renames it onto ``path`` when the block succeeds.

    Args:
        path: the final file or directory name.
        replace: replace an existing ``path`` (files only); with ``False`` an existing
            ``path`` raises ``FileExistsError`` and is left alone.
    """
    path = output_target(path)
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
