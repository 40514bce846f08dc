"""The one line reader (``elmo_tf.text_lines``): lines as an editor numbers them, read as a
stream whatever the chunk size, every line bounded in bytes."""

import codecs
import io
import re

import pytest

from elmo_tf.errors import InputFileError
from elmo_tf.text_lines import RawLine, decoded_lines, raw_lines, read_text_lines

TEXT = codecs.BOM_UTF8 + "a b\r\n\r\nc\rd\n\né ü\r\r\n\nlast".encode()
EXPECTED = [b"a b", b"", b"c", b"d", b"", "é ü".encode(), b"", b"", b"last"]


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 5, 7, 1 << 16])
def test_lines_are_the_same_in_any_chunk_size(chunk_bytes):
    lines = list(raw_lines(io.BytesIO(TEXT), chunk_bytes=chunk_bytes))
    assert lines == [RawLine(i, data) for i, data in enumerate(EXPECTED)]


@pytest.mark.parametrize("chunk_bytes", [1, 3, 1 << 16])
def test_a_line_over_the_bound_is_cut_and_the_rest_skipped(chunk_bytes):
    data = b"short\r\n" + b"x" * 50 + b"\r\nnext\n" + b"y" * 11
    lines = list(raw_lines(io.BytesIO(data), max_line_bytes=10, chunk_bytes=chunk_bytes))
    assert lines == [
        RawLine(0, b"short"),
        RawLine(1, b"x" * 10, too_long=True),
        RawLine(2, b"next"),
        RawLine(3, b"y" * 10, too_long=True),
    ]


class _Endless(io.RawIOBase):
    """A device such as /dev/zero: bytes without end, counting what was read."""

    def __init__(self, byte):
        self.byte, self.read_bytes = byte, 0

    def readable(self):
        return True

    def read(self, n=-1):
        self.read_bytes += n
        return self.byte * n


@pytest.mark.parametrize("byte", [b"\0", b"a"])
def test_an_endless_stream_is_refused_after_one_bound_of_bytes(byte):
    stream = _Endless(byte)
    line = next(raw_lines(stream, max_line_bytes=1 << 20))
    assert line.too_long and len(line.data) == 1 << 20
    assert stream.read_bytes <= (1 << 20) + (1 << 16) + 3  # one bound, one chunk, a BOM probe
    with pytest.raises(InputFileError, match=re.escape("zero: line 1 is longer than 1,048,576")):
        next(decoded_lines(_Endless(byte), "zero"))


@pytest.mark.parametrize(
    "data, message",
    [
        (b"fine\n\xff bad\n", "line 2 is not valid UTF-8 (byte 0xff at byte 1 of the line)"),
        (b"a\nb\x00c\n", "line 2 holds a NUL byte (at byte 2 of the line)"),
    ],
)
def test_a_bad_line_is_named_when_the_reader_reaches_it(tmp_path, data, message):
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    lines = read_text_lines(path)
    assert next(lines) in ("fine", "a")
    with pytest.raises(InputFileError, match=re.escape(message)):
        next(lines)


def test_bounds_are_checked():
    with pytest.raises(ValueError, match="max_line_bytes must be a positive integer"):
        list(raw_lines(io.BytesIO(b""), max_line_bytes=0))
