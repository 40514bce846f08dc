"""The first tokens of simple_elmo's vocabulary file, whose vectors a load caches.

A bilm-tf model folder as simple_elmo (and the NLPL repository) keeps it may hold a vocabulary,
``vocab.txt`` or ``vocab.txt.gz``, one token a line, most frequent first; simple_elmo computes
the character ids of its first ``limit`` tokens when it loads a model. ``read_head`` reads them
as hostile input: at most ``MAX_HEAD_BYTES`` (decompressed), UTF-8 or refused in one line.
"""

import gzip
import os

from elmo_tf.errors import ForeignModelError
from elmo_tf.system import untrusted_files

# The names simple_elmo looks for, in its order: the gzip'ed one first.
FILE_NAMES = ("vocab.txt.gz", "vocab.txt")
# The vocabulary's first tokens whose vectors a load caches (simple_elmo's ``limit``).
CACHE_TOKENS = 100
MAX_HEAD_BYTES = 1 << 20
_NOT_A_TOKEN = "!!!MAXTERMID"  # bilm-tf's vocabulary marker, which simple_elmo skips


def read_head(path, count=CACHE_TOKENS):
    """The first ``count`` tokens of a simple_elmo vocabulary (``vocab.txt``, or gzip'ed), one
    a line; at most ``MAX_HEAD_BYTES`` are read (decompressed). ``ForeignModelError`` for a
    file that is not UTF-8 text or not gzip where its name says so."""
    path = os.fspath(path)
    untrusted_files.check_readable(path, "vocabulary", ForeignModelError)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read(MAX_HEAD_BYTES)
    except (OSError, EOFError) as e:
        raise ForeignModelError(f"{path}: not a readable vocabulary ({e})") from None
    lines = data.split(b"\n")[:count]
    try:
        tokens = [
            line.decode("utf-8").strip()  # pragma: no mutate, equivalent: UTF-8 is utf-8
            for line in lines
        ]
    except UnicodeDecodeError as e:
        raise ForeignModelError(f"{path}: not UTF-8 text ({e.reason})") from None
    return [t for t in tokens if t and t != _NOT_A_TOKEN]
