"""gRPC's messages in process, without a server: a ``TensorProto``'s values in a field that
TensorFlow ignores are refused."""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.tensors import from_tensor_proto

INT32, STRING = types_pb2.DT_INT32, types_pb2.DT_STRING


def _proto(dtype, shape, **fields):
    proto = tensor_pb2.TensorProto(dtype=dtype, **fields)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


@pytest.mark.parametrize(
    ("proto", "message"),
    [
        # TensorFlow read it as [1, 2, 50] of zeros: the request ran on padding.
        (
            _proto(INT32, [1, 2, 50], int64_val=[7] * 100),
            "input 'char_ids' is int32 and holds int64_val, which TensorFlow ignores (it reads "
            "int_val): send its values in int_val or tensor_content",
        ),
        (
            _proto(INT32, [1, 1, 2], float_val=[1.0, 2.0]),
            "input 'char_ids' is int32 and holds float_val, which TensorFlow ignores",
        ),
        # TensorFlow reads tensor_content alone: the int_val a filter checked is not what runs.
        (
            _proto(INT32, [1, 1, 2], tensor_content=bytes(8), int_val=[300, 300]),
            "input 'char_ids' is int32 and holds int_val, which TensorFlow ignores beside its "
            "tensor_content",
        ),
    ],
    ids=["int64_val of int32", "float_val of int32", "int_val beside tensor_content"],
)
def test_values_in_a_field_tensorflow_ignores_are_refused(proto, message):
    with pytest.raises(ServingError) as error:
        from_tensor_proto(proto, "char_ids", INT32)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.message.startswith(message), error.value.message


def test_values_in_the_field_tensorflow_reads_are_taken():
    # The negative control: what clients send (tf.make_tensor_proto and the value fields).
    ids = np.arange(100, dtype=np.int32).reshape(1, 2, 50)
    for proto in (tf.make_tensor_proto(ids), _proto(INT32, [1, 2, 50], int_val=ids.ravel())):
        np.testing.assert_array_equal(from_tensor_proto(proto, "char_ids", INT32), ids)
    strings = from_tensor_proto(_proto(STRING, [2], string_val=[b"a", b"b"]), "sentences", STRING)
    assert strings.tolist() == [b"a", b"b"]
