"""The one line reader (``elmo_tf.tokens.text_lines``): lines as an editor numbers them, read as a
stream whatever the chunk size, every line bounded in bytes."""

import codecs
import errno
import io
import re

import pytest
from support.text_edges import edge_lines

from elmo_tf.errors import InputFileError
from elmo_tf.tokens import text_lines
from elmo_tf.tokens.text_lines import (
    DEFAULT_MAX_LINE_BYTES,
    RawLine,
    decoded_lines,
    line_problem,
    raw_lines,
    read_text_lines,
)

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


# --------------------------------------------------------------------------- bounds at the edge
#
# Every byte bound is tried at its edge (exactly the bound, one over, just under and at twice
# it) with the bound below, at and above the read chunk, and each line first, in the middle
# and last (without a line end): a line longer than the bound that fits in one chunk was once
# let through when it was under twice the bound.


# The read chunk, from the bound b: 1, 3, b - 1, b, b + 1, b + 2, 2b - 1, 2b, 2b + 1, 64 KiB.
CHUNKS = {
    "1": lambda b: 1,
    "3": lambda b: 3,
    "b-1": lambda b: max(1, b - 1),
    "b": lambda b: b,
    "b+1": lambda b: b + 1,
    "b+2": lambda b: b + 2,
    "2b-1": lambda b: 2 * b - 1,
    "2b": lambda b: 2 * b,
    "2b+1": lambda b: 2 * b + 1,
    "64k": lambda b: 1 << 16,
}


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("chunk", list(CHUNKS))
@pytest.mark.parametrize("bound", [1, 2, 10, 70_000])
def test_every_line_is_measured_against_the_bound_at_its_edge(bound, chunk, ending):
    lines, expected = edge_lines(bound)
    data = ending.join(lines)  # the last line without a line end
    assert list(raw_lines(io.BytesIO(data), bound, CHUNKS[chunk](bound))) == expected


@pytest.mark.parametrize("bound", [10, 70_000])  # below and above the 64 KiB read chunk
@pytest.mark.parametrize("where", ["first", "middle", "last, no line end"])
def test_files_and_streams_refuse_one_byte_over_the_bound(tmp_path, bound, where):
    lines = [b"a" * bound, b"b" * bound, b"c" * bound]
    assert list(read_text_lines(_file(tmp_path, lines), max_line_bytes=bound)) == [
        line.decode() for line in lines
    ]
    over = {"first": 0, "middle": 1, "last, no line end": 2}[where]
    lines[over] += b"x"
    message = f"line {over + 1} is longer than {bound:,} bytes (max_line_bytes)"
    with pytest.raises(InputFileError, match=re.escape(message)):
        list(read_text_lines(_file(tmp_path, lines), max_line_bytes=bound))
    with pytest.raises(InputFileError, match=re.escape(message)):
        list(decoded_lines(io.BytesIO(b"\n".join(lines)), "stdin", max_line_bytes=bound))


def _file(tmp_path, lines):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"\n".join(lines))
    return path


def _one_mebibyte_lines(tmp_path, extra):
    """A file whose second line is one token of the default bound (1 MiB) plus ``extra``
    bytes, among the three a vocabulary must hold."""
    path = tmp_path / f"long{extra}.txt"
    long = b"a" * (DEFAULT_MAX_LINE_BYTES + extra)
    path.write_bytes(b"<S>\n" + long + b"\n</S> <UNK>\n".replace(b" ", b"\n"))
    return path


OVER_THE_DEFAULT = f"line 2 is longer than {DEFAULT_MAX_LINE_BYTES:,} bytes (max_line_bytes)"


@pytest.mark.parametrize(
    "reader",
    ["embed", "embed stdin", "corpus", "vocabulary", "client", "client stdin", "probe set"],
)
def test_every_reader_holds_the_default_bound_at_its_edge(tmp_path, monkeypatch, reader):
    """The default bound (1 MiB, above the read chunk) through each reader that uses it: a
    line of exactly the bound is read, one byte more is refused naming the line."""
    import sys

    from elmo_tf.cli.client import read_sentences as client_sentences
    from elmo_tf.formats.embedding_file import iter_lines
    from elmo_tf.probes.word_senses import load_examples
    from elmo_tf.training.corpus import read_corpus
    from elmo_tf.training.vocabulary import Vocabulary

    def read(path):
        if reader.endswith("stdin"):
            stdin = io.TextIOWrapper(io.BytesIO(path.read_bytes()), encoding="utf-8")
            monkeypatch.setattr(sys, "stdin", stdin)
        return {
            "embed": lambda: list(iter_lines(path)),
            "embed stdin": lambda: list(iter_lines(sys.stdin.buffer, name="stdin")),
            "corpus": lambda: read_corpus([path]).n_sentences,
            "vocabulary": lambda: len(Vocabulary.from_file(path)),
            "client": lambda: client_sentences(str(path)),
            "client stdin": lambda: client_sentences("-"),
            "probe set": lambda: load_examples(path),
        }[reader]()

    if reader != "probe set":  # a probe line is WORD<TAB>SENSE<TAB>sentence
        exact = read(_one_mebibyte_lines(tmp_path, 0))
        assert exact in (3, 4) or (len(exact) == 4 and len(exact[1]) == DEFAULT_MAX_LINE_BYTES)
    with pytest.raises(InputFileError, match=re.escape(OVER_THE_DEFAULT)):
        read(_one_mebibyte_lines(tmp_path, 1))


@pytest.mark.parametrize("max_tokens", [1, 3, 10_000])
def test_embed_refuses_one_token_over_its_bound(tmp_path, max_tokens):
    from elmo_tf.formats.embedding_file import iter_lines

    path = tmp_path / "in.txt"
    path.write_text(" ".join(["t"] * max_tokens) + "\n", encoding="utf-8")
    assert len(list(iter_lines(path, max_tokens))[0].split()) == max_tokens
    path.write_text("a\n" + " ".join(["t"] * (max_tokens + 1)) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=f"line 2 has {max_tokens + 1:,} tokens, more than"):
        list(iter_lines(path, max_tokens))


# --------------------------------------------------------------------------- each rule exactly


@pytest.mark.parametrize("chunk_bytes", [1, 2, 1 << 16])
def test_a_first_empty_line_and_x_before_a_line_end_are_kept(chunk_bytes):
    """A line end is "\\r", "\\n" or "\\r\\n" only: an "X" before one is the line's; a file
    that starts with a line end starts with an empty line."""
    data = b"\nmaX\nXX\r\n\r\nX"
    lines = list(raw_lines(io.BytesIO(data), chunk_bytes=chunk_bytes))
    assert lines == [RawLine(0, b""), RawLine(1, b"maX"), RawLine(2, b"XX"), RawLine(3, b""),
                     RawLine(4, b"X")]  # fmt: skip


@pytest.mark.parametrize("chunk_bytes", [1, 3, 4, 1 << 16])
def test_a_byte_order_mark_after_the_start_is_text(chunk_bytes):
    """Only a leading mark is dropped: one later (a zero-width no-break space), even where a
    read starts with it, is part of its line."""
    data = b"abc" + codecs.BOM_UTF8 + b"d\n" + codecs.BOM_UTF8 + b"e"
    assert list(raw_lines(io.BytesIO(data), chunk_bytes=chunk_bytes)) == [
        RawLine(0, b"abc" + codecs.BOM_UTF8 + b"d"),
        RawLine(1, codecs.BOM_UTF8 + b"e"),
    ]


class _Trickle(io.RawIOBase):
    """A pipe that hands over one byte per ``read1``; each call's size is recorded, and a
    read of no bound fails (a pipe's writer may never close it)."""

    def __init__(self, data):
        self.data, self.calls = data, []

    def readable(self):
        return True

    def read1(self, n=-1):
        return self._take("read1", n, 1)

    def read(self, n=-1):
        return self._take("read", n, n)

    def _take(self, how, n, most):
        if n is None or n < 0:
            raise AssertionError(f"{how}({n!r}): a read of no bound")
        self.calls.append((how, n))
        taken, self.data = self.data[: min(n, most)], self.data[min(n, most) :]
        return taken


def test_a_byte_order_mark_over_one_byte_reads_is_completed_by_reading_what_it_lacks():
    stream = _Trickle(codecs.BOM_UTF8 + b"ab\n")
    assert list(raw_lines(stream)) == [RawLine(0, b"ab")]
    assert stream.calls[:3] == [("read1", 1 << 16), ("read", 2), ("read1", 1 << 16)]
    stream = _Trickle(b"a")  # shorter than a mark: what there is
    assert list(raw_lines(stream)) == [RawLine(0, b"a")]
    assert stream.calls == [("read1", 1 << 16), ("read", 2), ("read1", 1 << 16)]


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"\0abc", "holds a NUL byte (at byte 1 of the line)"),
        (b"a\0b\0", "holds a NUL byte (at byte 2 of the line)"),  # the first one
        (b"\xff\0", "holds a NUL byte (at byte 2 of the line)"),  # before any other problem
        (b"ab\xc3", "is not valid UTF-8 (byte 0xc3 at byte 3 of the line)"),
        (b"\xe2\x82\xac \xc3\xbc", None),
        (b"", None),
    ],
)
def test_what_is_wrong_with_a_line(data, problem):
    assert line_problem(data) == problem


def test_a_bad_line_names_the_file_the_line_and_the_kind_of_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"<S>\nb\x00c\n")
    with pytest.raises(InputFileError) as error:
        list(read_text_lines(path, what="vocabulary"))
    assert str(error.value) == (
        f"{path}: line 2 holds a NUL byte (at byte 2 of the line); expected a UTF-8 text "
        "vocabulary file"
    )
    with pytest.raises(InputFileError) as error:
        list(decoded_lines(io.BytesIO(b"ok\n\xff\n"), "stdin"))
    assert str(error.value) == (
        "stdin: line 2 is not valid UTF-8 (byte 0xff at byte 1 of the line); expected a UTF-8 "
        "text input file"
    )


def test_a_file_that_cannot_be_opened_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    path = tmp_path / "file" / "below"
    with pytest.raises(InputFileError) as error:
        list(read_text_lines(path, what="corpus"))
    assert str(error.value) == f"{path}: cannot read corpus file (Not a directory)"


class _Failing(io.RawIOBase):
    """A file whose reads fail with ``error``."""

    def __init__(self, error):
        self.error = error

    def readable(self):
        return True

    def read(self, n=-1):
        raise self.error


@pytest.mark.parametrize(
    "error, message",
    [
        (IsADirectoryError(errno.EISDIR, "Is a directory"), "corpus is a directory, expected a "
         "text file"),
        (OSError(errno.EIO, "Input/output error"), "cannot read corpus file (Input/output error)"),
        (OSError("the device went away"), "cannot read corpus file (the device went away)"),
    ],
    ids=["directory", "strerror", "message"],
)  # fmt: skip
def test_a_read_that_fails_is_one_line(tmp_path, monkeypatch, error, message):
    path = tmp_path / "in.txt"
    path.write_text("x\n")
    monkeypatch.setattr(text_lines, "open", lambda *args: _Failing(error), raising=False)
    with pytest.raises(InputFileError) as info:
        list(read_text_lines(path, what="corpus"))
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("bound", [0, -1, True, 1.5, "10", None])
def test_a_bound_that_is_no_positive_integer_is_refused(bound):
    with pytest.raises(ValueError) as error:
        list(raw_lines(io.BytesIO(b"x"), max_line_bytes=bound))
    assert str(error.value) == f"max_line_bytes must be a positive integer, got {bound!r}"
    with pytest.raises(ValueError, match="max_line_bytes must be a positive integer"):
        list(read_text_lines("never-opened.txt", max_line_bytes=bound))
    assert list(raw_lines(io.BytesIO(b"x"), max_line_bytes=1)) == [RawLine(0, b"x")]
