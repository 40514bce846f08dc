"""The metadata of an exported ELMo ONNX file, read in one walk of the file, without ``onnx``.

An export carries its model in ``metadata_props`` entries (``elmo_tf.export.onnx_contract``):
the options, the precision of its weights, a code-point model's tables. ``read_metadata``
walks the ``ModelProto``'s top-level fields once by protobuf's wire format, skipping each field
it does not need (the graph, every weight) by its length, and notes where each entry of the
keys it is given lies (``metadata_props`` is field 14; an entry's ``key`` is 1, its ``value``
2; the last of a repeated field wins, as protobuf reads); ``Metadata.values`` then reads an
entry's value, no further than a bound its caller knows.

Our own reader, because no public API holds the rule: ONNX Runtime's metadata map keeps one
value per key, so a second entry would go unseen and a value would be decoded as text whatever
it holds; ``onnx.load`` would parse the whole file (every weight) a second time, beside the
ONNX Runtime session that already holds them.
"""

import contextlib
import os

from elmo_tf.errors import ModelFileError

# ModelProto.metadata_props and its StringStringEntryProto's fields (onnx.proto).
_METADATA_FIELD = 14
_KEY_FIELD, _VALUE_FIELD = 1, 2
# protobuf wire types
_VARINT, _FIXED64, _BYTES, _GROUP_START, _GROUP_END, _FIXED32 = 0, 1, 2, 3, 4, 5
# An export has a dozen top-level fields; a file of more is refused rather than walked.
MAX_TOP_LEVEL_FIELDS = 10_000
# protobuf's own default limit on nested messages and groups.
_MAX_GROUP_DEPTH = 100


class _Malformed(Exception):
    """The bytes are not a protobuf message of the shape the walker reads."""


class Metadata:
    """Where each entry of the wanted keys lies in a file ``f`` (``read_metadata``)."""

    def __init__(self, f, spans):
        self._f = f
        self._spans = spans  # {key: [(offset, length)]}, in file order

    def values(self, key, limit):
        """The values (bytes) of every ``key`` entry, in file order, each read no further than
        ``limit`` + 1 bytes (a larger one is refused by its size)."""
        found = []
        for offset, length in self._spans.get(key, []):
            self._f.seek(offset)
            found.append(self._f.read(min(length, limit + 1)))
        return found


@contextlib.contextmanager
def read_metadata(path, keys):
    """The ``Metadata`` of the ONNX file at ``path`` for ``keys``, for the ``with`` block (the
    file stays open for ``values``); ``ModelFileError`` naming ``path`` if its top level is not
    a protobuf message this reader can walk."""
    with open(path, "rb") as f:
        yield metadata_of(f, os.fstat(f.fileno()).st_size, os.fspath(path), keys)


def metadata_of(f, size, source, keys):
    """``read_metadata`` of the serialized ``ModelProto`` of ``size`` bytes in the binary file
    ``f`` (from its start), its errors naming ``source``. The fuzz target's."""
    wanted = {key.encode("utf-8"): key for key in keys}
    spans = {}
    try:
        fields = 0
        while f.tell() < size:
            fields += 1
            if fields > MAX_TOP_LEVEL_FIELDS:
                raise ModelFileError(
                    f"{source}: more than {MAX_TOP_LEVEL_FIELDS:,} top-level fields in its "
                    "ModelProto; not an ELMo export"
                )
            number, wire = _tag(f)
            if number == _METADATA_FIELD and wire == _BYTES:
                end = _length(f, size)
                key, span = _entry(f, end, wanted)
                if key is not None:
                    spans.setdefault(key, []).append(span)
                f.seek(end)
            else:
                _skip(f, number, wire, size)
    except _Malformed as e:
        raise ModelFileError(
            f"{source}: its metadata cannot be read ({e}); not an ELMo export"
        ) from None
    return Metadata(f, spans)


def _entry(f, end, wanted):
    """``(key, (offset, length) of its value)`` of the ``StringStringEntryProto`` ending at
    ``end`` if its key is one of ``wanted`` (``{bytes: key}``; a missing value is empty), else
    ``(None, None)``."""
    longest = max(map(len, wanted), default=0)
    key = value = None  # the last key read, and (offset, length) of the last value
    while f.tell() < end:
        number, wire = _tag(f)
        if number in (_KEY_FIELD, _VALUE_FIELD) and wire == _BYTES:
            length = _length(f, end) - f.tell()
            if number == _KEY_FIELD and length <= longest:
                key = f.read(length)
                continue
            if number == _KEY_FIELD:
                key = b""  # another key
            else:
                value = (f.tell(), length)
            f.seek(length, os.SEEK_CUR)
        else:
            _skip(f, number, wire, end)
    if f.tell() != end:
        raise _Malformed("a metadata entry runs past its length")
    if key not in wanted:
        return None, None
    return wanted[key], (value if value is not None else (end, 0))


def _varint(f):
    result = 0
    for shift in range(0, 70, 7):
        byte = f.read(1)
        if not byte:
            raise _Malformed("the file ends inside a number")
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return result
    raise _Malformed("a number of more than 10 bytes")


def _tag(f):
    tag = _varint(f)
    number, wire = tag >> 3, tag & 7
    if number == 0 or tag >= 1 << 32:
        raise _Malformed(f"field number {number}")
    return number, wire


def _length(f, end):
    """The end offset of a length-delimited field whose length comes next."""
    length = _varint(f)
    stop = f.tell() + length
    if stop > end:
        raise _Malformed("a field runs past the end of the file")
    return stop


def _skip(f, number, wire, end, depth=0):
    """Skips the value of a field of ``number`` and ``wire`` type, ending before ``end``."""
    if wire == _VARINT:
        _varint(f)
        stop = f.tell()
    elif wire in (_FIXED64, _FIXED32):
        stop = f.tell() + (8 if wire == _FIXED64 else 4)
    elif wire == _BYTES:
        stop = _length(f, end)
    elif wire == _GROUP_START:
        if depth >= _MAX_GROUP_DEPTH:
            raise _Malformed("groups nested too deeply")
        while True:
            inner, inner_wire = _tag(f)
            if inner_wire == _GROUP_END:
                if inner != number:
                    raise _Malformed("a group ends with another's number")
                stop = f.tell()
                break
            _skip(f, inner, inner_wire, end, depth + 1)
    else:
        raise _Malformed(f"wire type {wire}")
    if stop > end:
        raise _Malformed("a field runs past the end of the file")
    f.seek(stop)
