"""gRPC's messages in process, without a server: a ``TensorProto``'s values in a field that
TensorFlow ignores are refused, and the RPCs the server does not serve answer UNIMPLEMENTED
without a traceback in its log."""

import logging

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.grpc_api import ModelServicer, PredictionServicer
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


class _Aborted(Exception):
    pass


class _Context:
    """A servicer context's ``abort``: records the status and raises, as gRPC's does."""

    def abort(self, code, details):
        self.code, self.details = code, details
        raise _Aborted


@pytest.mark.parametrize(
    ("servicer", "base"),
    [
        (PredictionServicer, prediction_service_pb2_grpc.PredictionServiceServicer),
        (ModelServicer, model_service_pb2_grpc.ModelServiceServicer),
    ],
    ids=["PredictionService", "ModelService"],
)
def test_every_rpc_of_the_services_answers_without_a_traceback(servicer, base, caplog):
    """The generated servicers answer an RPC they lack with ``NotImplementedError``, which gRPC
    logs with a 7-line traceback per call: each is answered UNIMPLEMENTED through ``abort``."""
    methods = [name for name in vars(base) if not name.startswith("_")]
    assert methods and all(getattr(servicer, name) is not getattr(base, name) for name in methods)
    served = {"Predict", "GetModelMetadata", "GetModelStatus"}
    for name in sorted(set(methods) - served):
        context = _Context()
        with caplog.at_level(logging.DEBUG), pytest.raises(_Aborted):
            getattr(servicer(server=None), name)(None, context)
        assert context.code == grpc.StatusCode.UNIMPLEMENTED
        assert context.details.startswith(f"{name} is not served"), context.details
    assert not caplog.records


def test_a_string_tensor_of_no_values_is_empty_bytes():
    # Found by fuzz/tensor_proto.py: sentences declared [32] with no string_val came back as 32
    # empty str (TensorFlow's padding), where every other string tensor holds bytes.
    data = b"\x08\x07\x12\x04\x12\x02\x08\x20mxse\x02Hi"  # the input, less the target's byte
    proto = tensor_pb2.TensorProto.FromString(data)
    array = from_tensor_proto(proto, "sentences", STRING)
    assert array.shape == (32,) and array.dtype == object
    assert all(type(value) is bytes and value == b"" for value in array.flat)
