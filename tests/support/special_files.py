"""Files that are not regular files, made where a test points (never ``/dev``, ``/proc``,
``/sys``: a regressed check would replace or fill what the whole machine uses)."""

import os
import socket
import stat

import pytest

# Device numbers of the null and zero character devices (Linux's mem driver).
_DEVICES = {"null device": (1, 3), "zero device": (1, 5)}
KINDS = ("fifo", "socket", *_DEVICES)


def special_file(path, kind):
    """Makes a file that is not a regular file at ``path`` (under a test's ``tmp_path``) and
    returns ``path``: ``"fifo"``, ``"socket"`` (a bound Unix socket, closed), or ``"null
    device"`` / ``"zero device"``, a character device node made with ``os.mknod`` (root only:
    skipped otherwise). A node made here is what a regression can break."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
    elif kind in _DEVICES:
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*_DEVICES[kind]))
        except PermissionError:
            pytest.skip("making a device node needs root (CI runs as root)")
    else:
        raise ValueError(kind)
    return path
