"""Tensors on the wire: ``TensorProto`` (gRPC) and JSON (REST) to numpy and back.

Requests are checked against the signature's declared dtype here, so that a wrong dtype is
reported with the name of the input rather than as a failure inside the graph. A request's
declared shape is checked (``check_shape``, the signature's ranks and ``RequestLimits``) and
compared with the amount of content it carries *before* any array is allocated: a small proto
may declare ``[2**40]`` and hold one value, which ``tf.make_ndarray`` would repeat to fill it.
"""

import base64
import binascii
import json
import math

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from elmo_tf.serving.errors import invalid_argument


def dtype_name(dtype_enum):
    """``"string"``, ``"int32"``, ... for a ``DataType`` enum value (``"invalid"`` for 0)."""
    if dtype_enum == types_pb2.DT_INVALID:
        return "invalid (unset)"
    try:
        return tf.dtypes.as_dtype(dtype_enum).name
    except TypeError:
        return f"DataType {dtype_enum}"


def from_tensor_proto(proto, alias, dtype_enum, check_shape=None):
    """The numpy array of ``proto``, the request's input ``alias`` of declared ``dtype_enum``.

    Strings come back as an object array of ``bytes``. ``check_shape(shape)``, if given, is
    called with the declared shape (a list of ints) before anything is allocated. Raises
    ``ServingError`` (INVALID_ARGUMENT) naming ``alias`` for a wrong dtype or a malformed proto:
    a ``tensor_content`` whose length is not the shape's, more values than the shape holds
    (fewer are allowed: as in TensorFlow, the last one is repeated), or values in a field that
    TensorFlow ignores for the dtype (``int64_val`` of an int32 tensor; any ``*_val`` beside
    ``tensor_content``), which would be read as an empty tensor or as other values.
    """
    if proto.dtype != dtype_enum:
        raise invalid_argument(
            f"input '{alias}' must be {dtype_name(dtype_enum)}, got {dtype_name(proto.dtype)}"
        )
    if proto.tensor_shape.unknown_rank:
        raise invalid_argument(f"input '{alias}' has an unknown rank; send its full shape")
    shape = [d.size for d in proto.tensor_shape.dim]
    if any(size < 0 for size in shape):
        raise invalid_argument(f"input '{alias}' has a negative dimension in shape {shape}")
    if check_shape is not None:
        check_shape(shape)
    _check_content(proto, alias, shape)
    try:
        array = tf.make_ndarray(proto)
    except (ValueError, TypeError) as e:
        raise invalid_argument(f"input '{alias}' is a malformed TensorProto: {e}") from None
    if list(array.shape) != shape:  # make_ndarray repeats a short value list; refuse a long one
        raise invalid_argument(f"input '{alias}' holds values that do not fit its shape {shape}")
    if proto.dtype == types_pb2.DT_STRING and not proto.string_val and array.size:
        # make_ndarray fills a string tensor of no values with "" (text): empty bytes, as the
        # values of every other string tensor are
        array = np.full(array.shape, b"", dtype=object)
    return array


def _check_content(proto, alias, shape):
    """INVALID_ARGUMENT unless the proto's content fits its declared ``shape``."""
    elements = math.prod(shape)
    if proto.tensor_content and proto.dtype == types_pb2.DT_STRING:
        raise invalid_argument(f"input '{alias}' is a string tensor: send string_val")
    fields = [field.name for field, _ in proto.ListFields() if field.name.endswith("_val")]
    read = _VALUE_FIELDS.get(proto.dtype)
    ignored = [name for name in fields if name != read or proto.tensor_content]
    if ignored:
        where = "beside its tensor_content" if proto.tensor_content else f"(it reads {read})"
        raise invalid_argument(
            f"input '{alias}' is {dtype_name(proto.dtype)} and holds {ignored[0]}, which "
            f"TensorFlow ignores {where}: send its values in "
            f"{read + ' or ' if read else ''}tensor_content"
        )
    if proto.tensor_content:
        itemsize = tf.dtypes.as_dtype(proto.dtype).size
        if len(proto.tensor_content) != elements * itemsize:
            raise invalid_argument(
                f"input '{alias}' declares shape {shape} ({elements} values) but its "
                f"tensor_content holds {len(proto.tensor_content)} bytes"
            )
        return
    values = sum(len(value) for field, value in proto.ListFields() if field.name.endswith("_val"))
    if values > elements:
        raise invalid_argument(
            f"input '{alias}' declares shape {shape} ({elements} values) but holds {values}"
        )


# The field of a TensorProto that TensorFlow reads the values of each dtype from (when it has no
# tensor_content); it ignores the others (tensorflow/core/framework/tensor.proto).
_VALUE_FIELDS = {
    types_pb2.DT_FLOAT: "float_val",
    types_pb2.DT_DOUBLE: "double_val",
    types_pb2.DT_HALF: "half_val",
    types_pb2.DT_BFLOAT16: "half_val",
    types_pb2.DT_INT8: "int_val",
    types_pb2.DT_INT16: "int_val",
    types_pb2.DT_INT32: "int_val",
    types_pb2.DT_UINT8: "int_val",
    types_pb2.DT_UINT16: "int_val",
    types_pb2.DT_INT64: "int64_val",
    types_pb2.DT_UINT32: "uint32_val",
    types_pb2.DT_UINT64: "uint64_val",
    types_pb2.DT_BOOL: "bool_val",
    types_pb2.DT_STRING: "string_val",
    types_pb2.DT_COMPLEX64: "scomplex_val",
    types_pb2.DT_COMPLEX128: "dcomplex_val",
}


def to_tensor_proto(array):
    """``TensorProto`` of a numpy array (numbers as ``tensor_content``, as TF Serving sends)."""
    return tf.make_tensor_proto(array)


def from_json(value, alias, dtype_enum, check_shape=None):
    """The numpy array of a JSON value (nested lists) for input ``alias`` of ``dtype_enum``.

    Strings are JSON strings (sent as UTF-8) or ``{"b64": "..."}`` objects (any bytes), as in
    TF Serving's REST API. ``check_shape(shape)``, if given, is called with the shape of the
    first element at each depth before the values are read. Raises ``ServingError`` naming
    ``alias`` for ragged nesting or a value of the wrong type.
    """
    if dtype_enum == types_pb2.DT_STRING:
        convert, np_dtype = _json_bytes, object
    elif dtype_enum == types_pb2.DT_BOOL:
        convert, np_dtype = _json_bool, np.bool_
    else:
        try:
            np_dtype = tf.dtypes.as_dtype(dtype_enum).as_numpy_dtype
        except TypeError:
            raise invalid_argument(f"input '{alias}' has an unsupported dtype") from None
        convert = _json_int if np.issubdtype(np_dtype, np.integer) else _json_float
    shape = []
    probe = value
    while isinstance(probe, list):
        shape.append(len(probe))
        if not probe:
            break
        probe = probe[0]
    if check_shape is not None:
        check_shape(shape)
    flat = []

    def walk(v, depth):
        if depth == len(shape):
            if isinstance(v, list):
                raise invalid_argument(f"input '{alias}' is ragged: every row needs one length")
            try:
                flat.append(convert(v))
            except _InvalidBase64 as e:
                raise invalid_argument(
                    f"input '{alias}' holds {v!r:.40}, whose \"b64\" is not base64 ({e})"
                ) from None
            except UnicodeEncodeError as e:  # a lone surrogate (JSON's "\ud800")
                raise invalid_argument(
                    f"input '{alias}' holds a string that is not Unicode text: a lone surrogate "
                    f"{e.object[e.start : e.end]!r} at character {e.start}; send text, or bytes as "
                    '{"b64": ...}'
                ) from None
            except (TypeError, ValueError):
                raise invalid_argument(
                    f"input '{alias}' must hold {dtype_name(dtype_enum)} values, got {v!r:.40}"
                ) from None
            return
        if not isinstance(v, list) or len(v) != shape[depth]:
            raise invalid_argument(f"input '{alias}' is ragged: every row needs one length")
        for item in v:
            walk(item, depth + 1)

    walk(value, 0)
    try:
        array = np.empty(len(flat), dtype=np_dtype)
        array[:] = flat
    except (OverflowError, ValueError):
        raise invalid_argument(
            f"input '{alias}' holds a value out of the range of {dtype_name(dtype_enum)}"
        ) from None
    return array.reshape(shape)


def to_json(array):
    """A JSON-ready value of a numpy array (bytes as UTF-8 text, else ``{"b64": ...}``)."""
    if array.dtype == object:
        return np.vectorize(_bytes_to_json, otypes=[object])(array).tolist()
    return array.tolist()


# An array of more values than this is encoded row by row (``json_pieces``).
WHOLE_ARRAY_VALUES = 4096


def json_pieces(value):
    """The JSON text of ``value`` (dicts, lists, numpy arrays and JSON scalars), in pieces.

    The text equals ``json.dumps`` of the value with its arrays through ``to_json``, but an
    array of more than ``WHOLE_ARRAY_VALUES`` values is encoded one row at a time: ``tolist()``
    of a whole answer makes a Python object of ~32 bytes per float and its text ~20 bytes more,
    ten times the float32 array (2,048 rows of 30 tokens of the published model's outputs: an
    array of 1.1 GB, objects and text past 10 GB), where the pieces hold one row's at most.

    >>> "".join(json_pieces({"a": np.zeros((2, 3), np.float32)}))
    '{"a": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]}'
    """
    if isinstance(value, dict):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield (", " if index else "") + json.dumps(key) + ": "
            yield from json_pieces(item)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for index, item in enumerate(value):
            if index:
                yield ", "
            yield from json_pieces(item)
        yield "]"
    elif isinstance(value, np.ndarray) and value.ndim and value.size > WHOLE_ARRAY_VALUES:
        yield from json_pieces(list(value))  # views of its rows: nothing is copied
    elif isinstance(value, np.ndarray | np.generic):
        yield json.dumps(to_json(np.asarray(value)))
    else:
        yield json.dumps(value)


class _InvalidBase64(ValueError):
    """A ``{"b64": ...}`` value whose text does not decode."""


def _json_bytes(v):
    if isinstance(v, str):
        return v.encode("utf-8")  # pragma: no mutate, equivalent: codec names ignore case
    if isinstance(v, dict) and set(v) == {"b64"} and isinstance(v["b64"], str):
        try:
            return base64.b64decode(v["b64"], validate=True)
        except binascii.Error as e:
            raise _InvalidBase64(str(e)) from None
    raise TypeError(type(v).__name__)  # pragma: no mutate, equivalent: from_json never shows it


def _json_int(v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(type(v).__name__)  # pragma: no mutate, equivalent: from_json never shows it
    return v


def _json_float(v):
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(type(v).__name__)  # pragma: no mutate, equivalent: from_json never shows it
    return v


def _json_bool(v):
    if not isinstance(v, bool):
        raise TypeError(type(v).__name__)  # pragma: no mutate, equivalent: from_json never shows it
    return v


def _bytes_to_json(b):
    try:
        return b.decode("utf-8")  # pragma: no mutate, equivalent: codec names ignore case
    except UnicodeDecodeError:
        text = base64.b64encode(b).decode(
            "ascii"  # pragma: no mutate, equivalent: codec names ignore case
        )
        return {"b64": text}
