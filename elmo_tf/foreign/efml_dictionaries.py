"""ELMoForManyLangs' ``char.dic`` and ``word.dic``: one ``token<TAB>id`` per line.

EFML reads them (``Embedder.get_model``) as::

    for line in codecs.open(path, 'r', encoding='utf-8'):   # str.splitlines' line breaks
        tokens = line.strip().split('\\t')
        if len(tokens) == 1: tokens.insert(0, '\\u3000')
        token, i = tokens
        lexicon[token] = int(i)

so a line whose token is whitespace (a space, U+3000, a no-break space) strips to its id alone
and is read as U+3000. ``parse_dictionary`` reads them the same way, line breaks included
(U+2028, U+0085 and the other ``str.splitlines`` breaks end a line, as in EFML), and refuses
in one line, naming the file and the line, what EFML would take silently or fail on later: an
empty line, a line of three fields, an id that is not a plain decimal number, a token or an id
given twice (EFML keeps the last token's id, and its table then has fewer rows than the file's
ids need).
"""

import os

from elmo_tf import checks
from elmo_tf.errors import ForeignModelError
from elmo_tf.system import untrusted_files

SPACE_TOKEN = "\u3000"  # what a line holding only whitespace and its id stands for
# A word.dic of EFML's released models has 150,000 entries at most (max_vocab_size): a few MB.
MAX_DICTIONARY_BYTES = 256 << 20


# The bytes that end a line for str.splitlines, in UTF-8 (\r\n ends one line, not two).
_LINE_BREAKS = (b"\n", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85",
                b"\xe2\x80\xa8", b"\xe2\x80\xa9")  # fmt: skip


def read_dictionary(path, max_bytes=MAX_DICTIONARY_BYTES, max_entries=None):
    """``{token: id}`` of the dictionary file ``path``, in the file's order (``max_entries``:
    see ``parse_dictionary``)."""
    data = untrusted_files.read_bounded(
        path, "dictionary", max_bytes, ForeignModelError, hint=" (a char.dic or word.dic)"
    )
    return parse_dictionary(data, os.fspath(path), max_entries)


def line_count_bound(data):
    """At least as many as the lines ``str.splitlines`` makes of ``data`` (UTF-8 bytes), counted
    without decoding it or making them."""
    breaks = sum(data.count(b) for b in _LINE_BREAKS) - data.count(b"\r\n")
    return breaks + (not data.endswith(_LINE_BREAKS))


def parse_dictionary(data, source="dictionary", max_entries=None):
    """``{token: id}`` of a dictionary's bytes (``source`` names it in errors); raises
    ``ForeignModelError`` naming the line at fault. ``max_entries`` (what the model's table can
    hold, where it is known) is checked against the lines before any is decoded: the tables
    cost far more memory than the file. The fuzz target."""
    data = bytes(data)
    if max_entries is not None and (lines := line_count_bound(data)) > max_entries:
        raise ForeignModelError(
            f"{source}: holds {lines:,} lines, more than the {max_entries:,} entries its table "
            "can have"
        )
    try:
        text = data.decode("utf-8")  # pragma: no mutate, equivalent: UTF-8 is utf-8
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ForeignModelError(f"{source}: line {line}: not UTF-8 text (byte {e.start})") from None
    lexicon, seen_ids = {}, {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.strip().split("\t")
        if fields == [""]:
            raise ForeignModelError(
                f"{source}: line {number} is empty (or holds only a line break EFML splits at); "
                "each line is token<TAB>id"
            )
        if len(fields) == 1:
            fields.insert(0, SPACE_TOKEN)
        if len(fields) != 2:
            raise ForeignModelError(
                f"{source}: line {number} has {len(fields)} tab-separated fields, expected "
                f"token<TAB>id: {checks.shown(line, 60)}"
            )
        token, value = fields
        if not (value.isascii() and value.isdigit()) or len(value) > 18:
            raise ForeignModelError(
                f"{source}: line {number}: the id {checks.shown(value, 30)} is not a decimal number"
            )
        index = int(value)
        if token in lexicon:
            raise ForeignModelError(
                f"{source}: line {number} gives {checks.shown(token, 30)} again (first on line "
                f"{lexicon[token][1]}; EFML would keep this line's id)"
            )
        if index in seen_ids:
            raise ForeignModelError(
                f"{source}: line {number} gives the id {index} again (first on line "
                f"{seen_ids[index]})"
            )
        lexicon[token] = (index, number)
        seen_ids[index] = number
    if not lexicon:
        raise ForeignModelError(f"{source}: holds no token<TAB>id line")
    return {token: index for token, (index, _) in lexicon.items()}
