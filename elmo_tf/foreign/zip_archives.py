"""An archive of one model folder (the NLPL repository's zips), checked and unpacked as hostile
input. It knows zip files, not models: which files a model of each kind holds and reads is
``elmo_tf.kinds.model_kinds``'s to say.

The NLPL vector repository hosts ELMo models as zip archives of one model folder, files at the
root (or, tolerated here, under one top-level folder). ``inspect`` reads an archive's directory
only and refuses, each in one ``ForeignModelError`` line naming the archive and the member:

- a name that is absolute, holds ``..``, a backslash, a NUL or a drive, or names a place other
  than the folder's root (or one of the ``subfolders`` a kind has), or one given twice;
- a member that is a symbolic link, a device or a pipe (its Unix mode), or encrypted, or
  compressed with a method zipfile cannot read;
- a declared size over ``MAX_MEMBER_BYTES`` (all members: ``MAX_TOTAL_BYTES``), a compression
  ratio over ``MAX_RATIO`` above ``RATIO_FLOOR`` bytes (a zip bomb), more than ``MAX_MEMBERS``
  members;
- members whose compressed bytes overlap, start before the archive or run past its end (the
  directory's compressed sizes are not trusted: a member could declare far more than its
  stream uses);
- a member that is itself an archive (by its name).

``extract`` then writes the members it is given into a new directory, and no other: each no
larger than declared (a member is read no further than its declared size plus one byte, and
must end there), each expanding no more than ``MAX_RATIO`` times the compressed bytes actually
read for it, each checked for archive signatures (but those the caller names: a gzip'ed file, a
PyTorch state_dict in its zip layout), created with ``O_EXCL`` and ``O_NOFOLLOW`` under a
directory it made itself: nothing is written outside it.

``parse_archive(data)`` is the fuzz target: ``inspect`` of bytes.
"""

import io
import lzma
import os
import stat
import zipfile
import zlib

from elmo_tf import checks
from elmo_tf.errors import ForeignModelError
from elmo_tf.system import files

MAX_MEMBERS = 64
MAX_MEMBER_BYTES = 4 << 30
MAX_TOTAL_BYTES = 8 << 30
# Weights compress to about 90% of their size, text to a quarter; a member that expands more
# than this many times (and by more than a megabyte) is a bomb.
MAX_RATIO = 100
RATIO_FLOOR = 1 << 20
_LOCAL_HEADER_BYTES = 30  # a member's local header before its name and extra field
_CHUNK = 64 << 10  # small: a stream is read little ahead of what it gives (the ratio check)

_ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tar.xz", ".7z", ".rar",
                     ".jar", ".whl", ".bz2", ".xz")  # fmt: skip
# The first bytes of an archive.
_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06", b"7z\xbc\xaf\x27\x1c", b"Rar!\x1a\x07",
               b"\xfd7zXZ\x00", b"BZh")  # fmt: skip
# What zipfile raises for a damaged or unreadable member, besides BadZipFile.
_DAMAGED = (zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, zlib.error,
            lzma.LZMAError)  # fmt: skip
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


def inspect(path, subfolders=()):
    """``{name in the folder: ZipInfo}`` of the archive at ``path`` (names relative to its one
    folder, ``subfolders`` allowed one level down); ``ForeignModelError`` for anything above."""
    path = os.fspath(path)
    try:
        with zipfile.ZipFile(path) as archive:
            return _members(archive, path, os.path.getsize(path), subfolders)
    except ForeignModelError:
        raise
    except (*_DAMAGED, zipfile.LargeZipFile, OSError, ValueError) as e:
        raise ForeignModelError(
            f"{path}: not a readable zip archive ({checks.error_text(e, 120)})"
        ) from None


def parse_archive(data, source="archive", subfolders=()):
    """``inspect`` of an archive's bytes. The fuzz target."""
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            return _members(archive, source, len(data), subfolders)
    except ForeignModelError:
        raise
    except (*_DAMAGED, zipfile.LargeZipFile, ValueError) as e:
        raise ForeignModelError(
            f"{source}: not a readable zip archive ({checks.error_text(e, 120)})"
        ) from None


def is_zip(path):
    """Whether ``path`` is a regular file that starts as a zip archive does."""
    if not os.path.isfile(path):  # never opened: a named pipe would block the read
        return False
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _shown(name):
    """A member's name as a message quotes it: bare text, its first 80 characters."""
    return checks.shown(name, 80, quote=False)  # pragma: no mutate, equivalent: quote=None: falsy


def _members(archive, source, size, subfolders):
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ForeignModelError(
            f"{source}: holds {len(infos)} members, more than the {MAX_MEMBERS} a model has"
        )
    names = [_checked_name(info.filename, source) for info in infos]  # before is_dir: '' fails it
    files = [info for info in infos if not info.is_dir()]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ForeignModelError(f"{source}: names the member '{twice}' twice")
    for info in infos:
        _check_member(info, source)
    _check_ranges(files, source, size)
    total = sum(info.file_size for info in files)
    if total > MAX_TOTAL_BYTES:
        raise ForeignModelError(
            f"{source}: its members declare {total:,} bytes in all, more than {MAX_TOTAL_BYTES:,}"
        )
    prefix = _common_folder([info.filename for info in files])
    members = {}
    for info in files:
        relative = info.filename[len(prefix) :]
        if "/" in relative and not (
            relative.count("/") == 1 and relative.split("/")[0] in subfolders
        ):
            raise ForeignModelError(
                f"{source}: member '{_shown(info.filename)}' is in a "
                "folder of its own; a model archive holds one folder's files"
            )
        members[relative] = info
    return members


def _checked_name(name, source):
    shown = _shown(name)
    parts = name.split("/")
    if not name:
        raise ForeignModelError(f"{source}: a member has an empty name; not extracted")
    if (
        name.startswith("/")  # pragma: no mutate, equivalent: it leaves an empty part (below)
        or "\\" in name
        or "\x00" in name
        or (len(name) > 1 and name[1] == ":")
        or ".." in parts
        or "." in parts
        or any(part == "" for part in parts[:-1])
    ):
        raise ForeignModelError(
            f"{source}: member '{shown}' has a name that is absolute or leaves the folder "
            "(.., a drive, a backslash); not extracted"
        )
    return name.rstrip("/")


def _check_member(info, source):
    shown = _shown(info.filename)
    mode = info.external_attr >> 16  # the Unix mode, where a Unix zip wrote one
    kind = stat.S_IFMT(mode)  # 0: permissions only, a plain file
    if info.create_system == 3 and kind and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise ForeignModelError(f"{source}: member '{shown}' is {kind}; not extracted")
    if info.is_dir():
        return
    if info.flag_bits & 0x1:
        raise ForeignModelError(f"{source}: member '{shown}' is encrypted")
    if info.compress_type not in _METHODS:
        raise ForeignModelError(
            f"{source}: member '{shown}' is compressed with method {info.compress_type}, which "
            "zipfile cannot read"
        )
    if info.file_size > MAX_MEMBER_BYTES:
        raise ForeignModelError(
            f"{source}: member '{shown}' declares {info.file_size:,} bytes, more than "
            f"{MAX_MEMBER_BYTES:,}"
        )
    _check_ratio(shown, info.compress_size, info.file_size, source)
    lower = info.filename.lower()
    if lower.endswith(_ARCHIVE_SUFFIXES):
        raise ForeignModelError(
            f"{source}: member '{shown}' is an archive inside the archive; not extracted"
        )


def _check_ratio(shown, compressed, expanded, source):
    """``ForeignModelError`` for a member that expands past ``RATIO_FLOOR`` bytes *and* more
    than ``MAX_RATIO`` times its ``compressed`` bytes: a zip bomb (a real model's weights pass
    the first and never the second)."""
    if expanded > RATIO_FLOOR and expanded > MAX_RATIO * max(compressed, 1):
        raise ForeignModelError(
            f"{source}: member '{shown}' expands {expanded / max(compressed, 1):,.0f} times "
            f"({compressed:,} to {expanded:,} bytes): a zip bomb, not extracted"
        )


def _check_ranges(infos, source, size):
    """``ForeignModelError`` for members whose compressed bytes (local header included) overlap
    or run past the archive's ``size``: the bytes a member declares must be its own."""
    end, previous = 0, None  # pragma: no mutate, equivalent: end is read once previous is set
    for info in sorted(infos, key=lambda i: i.header_offset):
        start = info.header_offset
        if start < 0:  # the directory's offsets, less what comes before the archive
            raise ForeignModelError(
                f"{source}: member '{_shown(info.filename)}' starts before the archive does"
            )
        if previous is not None and start < end:
            raise ForeignModelError(
                f"{source}: members '{_shown(previous.filename)}' and "
                f"'{_shown(info.filename)}' overlap in the archive; not "
                "extracted"
            )
        end = start + _LOCAL_HEADER_BYTES + info.compress_size
        if end > size:
            raise ForeignModelError(
                f"{source}: member '{_shown(info.filename)}' declares "
                f"{info.compress_size:,} compressed bytes, more than the archive holds"
            )
        previous = info


def _common_folder(names):
    """``"folder/"`` when every name lies in that one top-level folder, else ``""``."""
    tops = {name.split("/", 1)[0] for name in names}  # pragma: no mutate, equivalent: same [0]
    if len(tops) == 1 and all("/" in name for name in names):
        return tops.pop() + "/"
    return ""


def extract(path, destination, members, names, nested=()):
    """Writes the members ``names`` (of ``members``, what ``inspect`` found; no other) of the
    archive at ``path`` into the new directory ``destination``; a member of ``nested`` may start
    as an archive does. On any failure ``destination`` is removed again."""
    path, destination = os.fspath(path), os.fspath(destination)
    os.mkdir(destination, 0o755)
    try:
        with open(path, "rb") as raw:
            counted = _CountedReads(raw)
            with zipfile.ZipFile(counted) as archive:
                for name in names:
                    _extract_member(archive, counted, members[name], name, destination, path,
                                    name in nested)  # fmt: skip
    except _DAMAGED as e:  # a CRC mismatch, a damaged stream, a flag zipfile cannot read
        files.remove(destination)
        raise ForeignModelError(
            f"{path}: damaged zip archive ({checks.error_text(e, 120)})"
        ) from None
    except BaseException:
        files.remove(destination)
        raise


def read_member(path, info, max_bytes):
    """The bytes of a small member (``info``, of ``inspect``) of the archive at ``path``,
    refused in one line past ``max_bytes``."""
    if info.file_size > max_bytes:
        raise ForeignModelError(
            f"{path}: member '{_shown(info.filename)}' declares "
            f"{info.file_size:,} bytes, more than the {max_bytes:,} it may have"
        )
    try:
        with zipfile.ZipFile(path) as archive, archive.open(info) as member:
            data = member.read(max_bytes + 1)  # pragma: no mutate, equivalent: file_size caps
    except _DAMAGED as e:
        raise ForeignModelError(
            f"{path}: damaged zip archive ({checks.error_text(e, 120)})"
        ) from None
    if len(data) > max_bytes:
        raise ForeignModelError(
            f"{path}: member '{_shown(info.filename)}' holds more than it declares"
        )
    return data


class _CountedReads:
    """The archive's file, counting the bytes read from it: what a member's stream actually
    consumes, which its declared compressed size may overstate."""

    def __init__(self, raw):
        self.raw = raw
        self.consumed = 0  # pragma: no mutate, equivalent: only its differences are read

    def read(self, n=-1):
        data = self.raw.read(n)
        self.consumed += len(data)
        return data

    def seek(self, offset, whence=os.SEEK_SET):
        return self.raw.seek(offset, whence)

    def tell(self):
        return self.raw.tell()

    def seekable(self):
        return True  # pragma: no mutate, equivalent: a member is read, never sought


def _extract_member(archive, counted, info, name, destination, source, nested):
    shown = _shown(info.filename)
    directory = destination
    if "/" in name:  # configs/NAME: a directory made here, never one that was there
        directory = os.path.join(destination, name.split("/")[0])
        if os.path.lexists(directory) and not os.path.isdir(directory):
            raise ForeignModelError(f"{source}: member '{shown}' is in a folder that is a file")
        if not os.path.isdir(directory):
            os.mkdir(directory, 0o755)
    base = name.rsplit("/", 1)[-1]  # pragma: no mutate, equivalent: a name holds one "/" at most
    target = os.path.join(directory, base)
    nofollow = getattr(os, "O_NOFOLLOW", 0)  # pragma: no mutate, equivalent: O_EXCL refuses a link
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow
    with archive.open(info) as member, open(os.open(target, flags, 0o644), "wb") as out:
        start = counted.consumed  # the member's local header and stream from here
        written = 0
        # zipfile gives no more than file_size: the bound sets only how far it reads ahead
        while chunk := member.read(
            min(_CHUNK, info.file_size - written + 1)  # pragma: no mutate, zipfile caps reads
        ):  # fmt: skip
            if written == 0 and not nested and chunk.startswith(_SIGNATURES):
                raise ForeignModelError(
                    f"{source}: member '{shown}' is an archive inside the archive; not extracted"
                )
            written += len(chunk)
            if written > info.file_size:
                raise ForeignModelError(
                    f"{source}: member '{shown}' holds more than the {info.file_size:,} bytes it "
                    "declares; not extracted"
                )
            _check_ratio(shown, counted.consumed - start, written, source)
            out.write(chunk)
    if written != info.file_size:
        raise ForeignModelError(
            f"{source}: member '{shown}' holds {written:,} bytes, not the {info.file_size:,} it "
            "declares"
        )
