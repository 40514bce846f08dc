"""Reading text input one line at a time, the same way everywhere.

``elmo-tf embed``, the Beam job, training corpora, vocabularies, probe sets and the client all
read lines through this module, so a line means the same thing to each of them:

- lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (line numbers are those an editor shows), and a
  leading UTF-8 byte-order mark is dropped;
- the input is read as a stream, a chunk at a time, never whole: memory follows the longest
  line, and a line is bounded by ``max_line_bytes`` (default ``DEFAULT_MAX_LINE_BYTES``). A
  longer line is reported as soon as it passes the bound and the rest of it is skipped unread
  into memory, so a file without newlines, or a device such as ``/dev/zero``, cannot grow the
  process;
- a line holding a NUL byte, or bytes that are not UTF-8, is refused with the 1-based line
  and the offending byte (``line_problem``).

``raw_lines`` yields the bytes of each line for callers that decide what a bad line costs (the
Beam job turns it into a dead letter); ``read_text_lines`` yields decoded ``str`` lines and
raises ``InputFileError`` naming the file and line at the first bad one.
"""

import codecs
import dataclasses
import os

from elmo_tf.errors import InputFileError

# Bytes in one line at most, by default: far above any sentence (the default 10,000 tokens of
# ``MAX_TOKENS_PER_LINE`` average 100 bytes each), far below what would strain memory.
DEFAULT_MAX_LINE_BYTES = 1 << 20
# Tokens in one line at most, by default, wherever a line is a sentence to embed (``elmo-tf
# embed``, the Beam job): a line's outputs grow with its length (about 20 KB per token for the
# published model's layers), so a runaway line is refused by name rather than exhausting memory.
MAX_TOKENS_PER_LINE = 10_000
# Bytes read at a time.
CHUNK_BYTES = 1 << 16


@dataclasses.dataclass(frozen=True)
class RawLine:
    """One line of input: its 0-based ``number`` and its bytes without the line end.

    ``too_long``: the line passed the byte bound; ``data`` is then its first
    ``max_line_bytes`` bytes and the rest was skipped.
    """

    number: int
    data: bytes
    too_long: bool = False


def raw_lines(stream, max_line_bytes=DEFAULT_MAX_LINE_BYTES, chunk_bytes=CHUNK_BYTES):
    """Yields a ``RawLine`` for every line of the binary ``stream`` (read ``chunk_bytes`` at a
    time), a ``\\r\\n`` split across two reads included.

    A stream with ``read1`` is read with it (one read of what lies beneath at most), so that
    each line is yielded before a later read fails: a decompressing stream raises at the cut
    of a file cut short, and a ``read`` of many blocks would drop what it decoded before. Each
    byte is looked at once, whatever the reads return (a pipe may hand over a byte at a time):
    only the part of the current line within the bound is kept.
    """
    _check_bound(max_line_bytes)
    read = getattr(stream, "read1", stream.read)
    number = 0
    pending = bytearray()  # the current line so far, at most max_line_bytes
    # inside a line already reported as too long
    skipping = False  # pragma: no mutate, equivalent: None is as false as False
    # the last line ended in "\r": a "\n" first in the next read ends it too
    after_cr = False  # pragma: no mutate, equivalent: None is as false as False
    start = True
    while True:
        chunk = read(chunk_bytes)
        if not chunk:
            break
        if start:
            start = False  # pragma: no mutate, equivalent: None is as false as False
            while len(chunk) < len(codecs.BOM_UTF8):  # a byte-order mark split over reads
                more = stream.read(len(codecs.BOM_UTF8) - len(chunk))
                if not more:
                    break
                chunk += more
            if chunk.startswith(codecs.BOM_UTF8):
                chunk = chunk[len(codecs.BOM_UTF8) :]
        if after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the rest of a "\r\n" split over two reads
        after_cr = chunk.endswith(b"\r")
        for piece in chunk.splitlines(keepends=True):
            body = piece.rstrip(b"\r\n")
            ended = len(body) < len(piece)
            if not skipping and len(pending) + len(body) > max_line_bytes:
                pending += body[: max_line_bytes - len(pending)]
                yield RawLine(number, bytes(pending), too_long=True)
                skipping = True  # the rest of the line is never kept
            elif not skipping:
                pending += body
            if ended:
                if not skipping:
                    yield RawLine(number, bytes(pending))
                number += 1
                pending.clear()
                skipping = False  # pragma: no mutate, equivalent: None is as false as False
    if pending and not skipping:
        yield RawLine(number, bytes(pending))


def line_problem(data):
    """Why the bytes of one line are not a line of UTF-8 text, or ``None``."""
    nul = data.find(b"\0")
    if nul >= 0:
        return f"holds a NUL byte (at byte {nul + 1} of the line)"
    try:
        data.decode("utf-8")  # pragma: no mutate, equivalent: codec names ignore case
    except UnicodeDecodeError as e:
        return f"is not valid UTF-8 (byte 0x{data[e.start]:02x} at byte {e.start + 1} of the line)"
    return None


def too_long_problem(max_line_bytes):
    """Why a line over the byte bound is refused."""
    return f"is longer than {max_line_bytes:,} bytes (max_line_bytes)"


def read_text_lines(path, what="input", max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Yields the lines of the UTF-8 text file ``path`` as ``str`` without line ends.

    Raises ``InputFileError`` naming the file (``what`` says which kind: ``"input"``,
    ``"vocabulary"``, ...) when it is missing, unreadable or a directory, and naming the 1-based
    line when a line is over ``max_line_bytes``, holds a NUL byte or is not UTF-8; the error
    comes as soon as the reader reaches that line.
    """
    path = os.fspath(path)
    _check_bound(max_line_bytes)
    try:
        stream = open(path, "rb")  # closed by the with below
    except FileNotFoundError:
        raise InputFileError(f"{path}: {what} file not found") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: {what} is a directory, expected a text file") from None
    except OSError as e:
        raise InputFileError(f"{path}: cannot read {what} file ({e.strerror})") from None
    with stream:
        try:
            yield from decoded_lines(stream, path, what, max_line_bytes)
        except IsADirectoryError:
            raise InputFileError(f"{path}: {what} is a directory, expected a text file") from None
        except OSError as e:
            raise InputFileError(f"{path}: cannot read {what} file ({e.strerror or e})") from None


def decoded_lines(stream, name, what="input", max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Yields the lines of the binary ``stream`` (standard input, say) as ``str``; a bad line
    raises ``InputFileError`` naming ``name`` and the 1-based line, as ``read_text_lines``."""
    for line in raw_lines(stream, max_line_bytes):
        problem = too_long_problem(max_line_bytes) if line.too_long else None
        problem = problem or line_problem(line.data)
        if problem:
            raise InputFileError(
                f"{name}: line {line.number + 1} {problem}; expected a UTF-8 text {what} file"
            )
        yield line.data.decode("utf-8")  # pragma: no mutate, equivalent: codec names ignore case


def _check_bound(max_line_bytes):
    if (
        isinstance(max_line_bytes, bool)
        or not isinstance(max_line_bytes, int)
        or max_line_bytes < 1
    ):
        raise ValueError(f"max_line_bytes must be a positive integer, got {max_line_bytes!r}")
