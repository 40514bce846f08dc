"""Fuzz target: the text-line reader every command reads text through (``embed``'s input, a
corpus, a vocabulary, the client's sentences, the probe set, Beam's lines): ``raw_lines``
splits a stream at ``\\n``, ``\\r\\n`` or ``\\r``, each line bounded; ``decoded_lines`` refuses a
line that is too long, not UTF-8 or holds a NUL byte.

The input: its first byte picks the line bound (1 to 256 bytes), its second the read size (1
to 256 bytes, or 64 KiB); the rest is the stream.

The contract: the lines do not depend on the read size (the same lines, read a byte at a time
or 64 KiB at a time); each is at most the bound, flagged when the original was longer; joined
(when none was flagged) they give the stream back without its line ends and a leading UTF-8
byte-order mark; decoded, a line is text
or an ``InputFileError`` of one line naming the stream and the 1-based line.
"""

import codecs
import io

from elmo_tf.errors import InputFileError
from elmo_tf.tokens.text_lines import decoded_lines, raw_lines

READ_SIZES = [*range(1, 256), 1 << 16]
DICTIONARY = [
    b"\n",
    b"\r\n",
    b"\r",
    b"\x00",
    b"\xff",
    b"\xc3\xa9",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
]


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    if len(data) < 2:
        return
    bound = data[0] + 1
    chunk = READ_SIZES[data[1] % len(READ_SIZES)]
    stream = data[2:]
    lines = list(raw_lines(io.BytesIO(stream), bound, chunk))
    assert lines == list(raw_lines(io.BytesIO(stream), bound, 1 << 16)), "depends on the reads"
    assert [line.number for line in lines] == list(range(len(lines)))
    for line in lines:
        assert len(line.data) <= bound
        assert line.too_long or b"\n" not in line.data and b"\r" not in line.data
    if not any(line.too_long for line in lines):  # the lines and their ends are the stream
        text = stream.removeprefix(codecs.BOM_UTF8)  # a byte-order mark first is dropped
        joined = b"".join(line.data for line in lines)
        assert joined == text.replace(b"\r\n", b"").replace(b"\n", b"").replace(b"\r", b"")
    try:
        for text in decoded_lines(io.BytesIO(stream), "in.txt", max_line_bytes=bound):
            assert isinstance(text, str) and "\x00" not in text
    except InputFileError as e:
        message = str(e)
        assert message.startswith("in.txt: line ") and "\n" not in message, repr(message)


def seed_corpus():
    """Short streams: lines of every ending, a line at the bound and past it, UTF-8 with and
    without a BOM, a NUL byte, an undecodable byte, a last line without an ending."""
    return [
        b"\x0f\x00a b c\nd e\r\nf\rg",
        b"\x03\x02abcd\nabc\n\nab",
        b"\xff\xff\xef\xbb\xbfZ\xc3\xbcrich caf\xc3\xa9\n\xe4\xb8\xad\xe6\x96\x87\n",
        b"\x20\x05nul \x00 here\nbad \xff byte\n",
        b"\x01\x00\r\r\n\n\r",
    ]
