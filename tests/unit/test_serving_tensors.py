"""Tensors on the wire in process, without a server: a ``TensorProto`` (gRPC) or a JSON value
(REST) becomes the numpy array of the input's declared dtype and shape, or is refused in one
exact line naming the input; answers go back as JSON text, a row at a time when large."""

import json

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.tensors import (
    WHOLE_ARRAY_VALUES,
    dtype_name,
    from_json,
    from_tensor_proto,
    json_pieces,
    to_json,
    to_tensor_proto,
)

INT32, STRING, FLOAT = types_pb2.DT_INT32, types_pb2.DT_STRING, types_pb2.DT_FLOAT
BOOL, VARIANT = types_pb2.DT_BOOL, types_pb2.DT_VARIANT


def _proto(dtype, shape, **fields):
    """A ``TensorProto`` that declares ``shape`` whatever it holds (as a hostile client can)."""
    proto = tensor_pb2.TensorProto(dtype=dtype, **fields)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


def _refusal(call, *args, **kwargs):
    """The message of the INVALID_ARGUMENT that ``call`` raises."""
    with pytest.raises(ServingError) as error:
        call(*args, **kwargs)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return error.value.message


def test_a_dtype_is_named_as_tensorflow_names_it():
    assert dtype_name(INT32) == "int32" and dtype_name(STRING) == "string"
    assert dtype_name(types_pb2.DT_INVALID) == "invalid (unset)"
    assert dtype_name(9999) == "DataType 9999"


@pytest.mark.parametrize(
    ("proto", "dtype", "message"),
    [
        (tf.make_tensor_proto([1, 2]), STRING, "input 'x' must be string, got int32"),
        (_proto(types_pb2.DT_INVALID, [1]), INT32, "input 'x' must be int32, got invalid (unset)"),
        (
            tensor_pb2.TensorProto(dtype=INT32, tensor_shape={"unknown_rank": True}),
            INT32,
            "input 'x' has an unknown rank; send its full shape",
        ),
        (_proto(INT32, [2, -1]), INT32, "input 'x' has a negative dimension in shape [2, -1]"),
        (
            _proto(STRING, [1], tensor_content=b"ab"),
            STRING,
            "input 'x' is a string tensor: send string_val",
        ),
        (
            _proto(INT32, [1, 4, 50], tensor_content=bytes(400)),
            INT32,
            "input 'x' declares shape [1, 4, 50] (200 values) but its tensor_content holds 400 "
            "bytes",
        ),
        (
            _proto(STRING, [1, 2], string_val=[b"a"] * 5),
            STRING,
            "input 'x' declares shape [1, 2] (2 values) but holds 5",
        ),
        (
            _proto(INT32, [2], int_val=[1, 2, 3]),
            INT32,
            "input 'x' declares shape [2] (2 values) but holds 3",
        ),
        (
            _proto(VARIANT, [1], int_val=[1]),  # a dtype of no value field: tensor_content only
            VARIANT,
            "input 'x' is variant and holds int_val, which TensorFlow ignores (it reads None): "
            "send its values in tensor_content",
        ),
        (
            _proto(INT32, [1, 2], int64_val=[7, 7]),
            INT32,
            "input 'x' is int32 and holds int64_val, which TensorFlow ignores (it reads int_val): "
            "send its values in int_val or tensor_content",
        ),
        (
            _proto(INT32, [2], tensor_content=bytes(8), int_val=[300, 300]),
            INT32,
            "input 'x' is int32 and holds int_val, which TensorFlow ignores beside its "
            "tensor_content: send its values in int_val or tensor_content",
        ),
    ],
    ids=[
        "dtype",
        "no dtype",
        "unknown rank",
        "negative dimension",
        "string tensor_content",
        "tensor_content length",
        "more strings",
        "more ints",
        "no value field",
        "another field",
        "beside tensor_content",
    ],
)
def test_a_malformed_tensor_proto_is_refused_naming_the_input(proto, dtype, message):
    assert _refusal(from_tensor_proto, proto, "x", dtype) == message


@pytest.mark.parametrize(
    ("proto", "expected"),
    [
        (tf.make_tensor_proto(np.arange(6, dtype=np.int32).reshape(2, 3)), [[0, 1, 2], [3, 4, 5]]),
        (_proto(INT32, [2, 2], int_val=[1, 2]), [[1, 2], [2, 2]]),  # the last value repeated
        (_proto(INT32, [0]), np.zeros([0], np.int32)),
        (_proto(INT32, [2, 0]), np.zeros([2, 0], np.int32)),
        (_proto(INT32, []), np.array(0, np.int32)),
    ],
    ids=["tensor_content", "fewer values", "[0]", "[2, 0]", "scalar"],
)
def test_a_tensor_proto_becomes_the_array_of_its_shape(proto, expected):
    array = from_tensor_proto(proto, "x", INT32)
    np.testing.assert_array_equal(array, np.asarray(expected, np.int32), strict=True)


def test_the_declared_shape_is_checked_before_any_array_is_made():
    shapes = []

    def refuse(shape):
        shapes.append(shape)
        raise ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED, "too large")

    with pytest.raises(ServingError, match="^too large$"):
        from_tensor_proto(_proto(INT32, [2**40], int_val=[1]), "x", INT32, check_shape=refuse)
    assert shapes == [[2**40]]


def test_a_shape_numpy_cannot_hold_is_a_malformed_tensor_proto():
    # 2**62 x 4 values of int32: numpy refuses the shape before allocating anything
    message = _refusal(from_tensor_proto, _proto(INT32, [2**62, 4]), "x", INT32)
    assert message.startswith("input 'x' is a malformed TensorProto: array is too big"), message


def test_an_array_of_another_shape_than_declared_is_refused(monkeypatch):
    monkeypatch.setattr(tf, "make_ndarray", lambda proto: np.zeros([3], np.int32))
    assert _refusal(from_tensor_proto, _proto(INT32, [2], int_val=[1]), "x", INT32) == (
        "input 'x' holds values that do not fit its shape [2]"
    )


def test_to_tensor_proto_is_tensorflows_and_reads_back():
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    proto = to_tensor_proto(array)
    assert proto == tf.make_tensor_proto(array)
    np.testing.assert_array_equal(from_tensor_proto(proto, "x", INT32), array, strict=True)


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        (["a b", {"b64": "/w=="}, "é"], STRING, np.array([b"a b", b"\xff", "é".encode()], object)),
        ([[True, False]], BOOL, np.array([[True, False]])),
        ([[1, 2], [3, 4]], INT32, np.array([[1, 2], [3, 4]], np.int32)),
        ([1.5, 2], FLOAT, np.array([1.5, 2.0], np.float32)),
        (5, INT32, np.array(5, np.int32)),
        ([], INT32, np.zeros([0], np.int32)),
        ([[]], STRING, np.zeros([1, 0], object)),
        ([[[]], [[]]], INT32, np.zeros([2, 1, 0], np.int32)),
    ],
    ids=["strings", "bools", "ints", "floats", "scalar", "[]", "[[]]", "[[[]], [[]]]"],
)
def test_a_json_value_becomes_the_array_of_its_dtype(value, dtype, expected):
    array = from_json(value, "x", dtype)
    assert array.dtype == expected.dtype
    np.testing.assert_array_equal(array, expected, strict=True)


def test_the_json_shape_is_checked_before_the_values_are_read():
    shapes = []
    array = from_json([[1, 2, 3], [4, 5, 6]], "x", INT32, check_shape=shapes.append)
    assert shapes == [[2, 3]] and array.shape == (2, 3)
    from_json([[]], "x", INT32, check_shape=shapes.append)
    from_json(7, "x", INT32, check_shape=shapes.append)
    assert shapes == [[2, 3], [1, 0], []]


RAGGED = "input 'x' is ragged: every row needs one length"


@pytest.mark.parametrize(
    ("value", "dtype", "message"),
    [
        ([1, [2]], INT32, RAGGED),
        ([[1, 2], 3], INT32, RAGGED),
        ([[1, 2], [3]], INT32, RAGGED),
        ([[1], [2, 3]], INT32, RAGGED),
        ([1.5], INT32, "input 'x' must hold int32 values, got 1.5"),
        ([True], INT32, "input 'x' must hold int32 values, got True"),
        (["1"], INT32, "input 'x' must hold int32 values, got '1'"),
        ([True], FLOAT, "input 'x' must hold float32 values, got True"),
        ([None], FLOAT, "input 'x' must hold float32 values, got None"),
        ([1], BOOL, "input 'x' must hold bool values, got 1"),
        ([1], STRING, "input 'x' must hold string values, got 1"),
        ([{"x": "y"}], STRING, "input 'x' must hold string values, got {'x': 'y'}"),
        ([{"b64": 5}], STRING, "input 'x' must hold string values, got {'b64': 5}"),
        (
            [{"b64": "QQ==", "x": 1}],
            STRING,
            "input 'x' must hold string values, got {'b64': 'QQ==', 'x': 1}",
        ),
        (
            [{"b64": "!!!!"}],
            STRING,
            "input 'x' holds {'b64': '!!!!'}, whose \"b64\" is not base64 (Only base64 data is "
            "allowed)",
        ),
        (
            ["ok", "a\ud800b"],
            STRING,
            "input 'x' holds a string that is not Unicode text: a lone surrogate '\\ud800' at "
            'character 1; send text, or bytes as {"b64": ...}',
        ),
        ([2**31], INT32, "input 'x' holds a value out of the range of int32"),
        ([1], 9999, "input 'x' has an unsupported dtype"),
    ],
    ids=[
        "a list among values",
        "a value among lists",
        "a shorter row",
        "a longer row",
        "a float for int32",
        "a bool for int32",
        "a string for int32",
        "a bool for float32",
        "null for float32",
        "a number for bool",
        "a number for string",
        "an object for string",
        "b64 of a number",
        "b64 and another key",
        "b64 not base64",
        "a lone surrogate",
        "out of int32",
        "unsupported dtype",
    ],
)
def test_a_json_value_of_another_shape_or_type_is_refused(value, dtype, message):
    assert _refusal(from_json, value, "x", dtype) == message


def test_to_json_writes_bytes_as_text_or_base64():
    strings = np.array([[b"a", b"\xff"], ["é".encode(), b""]], object)
    assert to_json(strings) == [["a", {"b64": "/w=="}], ["é", ""]]
    assert to_json(np.array([b"\xfe\xff"], object)) == [{"b64": "/v8="}]
    assert to_json(np.array([[1, 2]], np.int32)) == [[1, 2]]


@pytest.mark.parametrize(
    "value",
    [3, "a", None, 1.5, np.array(5), np.float32(1.5), [np.int32(2), {"k": np.zeros([2, 2])}]],
    ids=["int", "str", "None", "float", "0-d array", "numpy scalar", "nested"],
)
def test_json_pieces_write_what_json_dumps_writes(value):
    def plain(v):
        if isinstance(v, dict):
            return {k: plain(i) for k, i in v.items()}
        if isinstance(v, list):
            return [plain(i) for i in v]
        return to_json(np.asarray(v)) if isinstance(v, np.ndarray | np.generic) else v

    assert "".join(json_pieces(value)) == json.dumps(plain(value))


def test_json_pieces_write_an_array_whole_up_to_the_limit_then_by_rows():
    at_limit = np.zeros([WHOLE_ARRAY_VALUES], np.float32)
    assert list(json_pieces(at_limit)) == [json.dumps(to_json(at_limit))]
    over = np.zeros([2, WHOLE_ARRAY_VALUES // 2 + 1], np.float32)
    pieces = list(json_pieces(over))
    row = json.dumps(to_json(over[0]))
    assert pieces == ["[", row, ", ", row, "]"]
