"""Fuzz target: gRPC's ``TensorProto`` inputs, as ``Predict`` reads them
(``elmo_tf.serving.tensors.from_tensor_proto``, the declared shape checked against the
signature and the server's default ``RequestLimits`` first), then checked as the server checks
a request before it runs (``SignatureSpec.validate``).

The input: its first byte picks one input of the export's signatures (``sentences``,
``tokens``, ``sequence_len``, ``char_ids``) and, in its top bit, whether the proto's dtype is
set to the input's (so that the fuzzer spends its time past the dtype check); the rest is a
serialized ``TensorProto``. Bytes protobuf cannot parse are refused by gRPC before the server
sees them.

The contract: an array of the declared shape and the input's dtype, or a ``ServingError``
(INVALID_ARGUMENT or RESOURCE_EXHAUSTED) of one line; nothing else, and no array larger than
the limits allow.
"""

import grpc
from google.protobuf.message import DecodeError

from elmo_tf.system import extras

extras.require("serving", "fuzz/tensor_proto.py")

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.request_limits import RequestLimits
from elmo_tf.serving.tensors import from_tensor_proto
from elmo_tf.testing.signatures import export_signatures
from elmo_tf.tokens.characters import batch_to_ids

LIMITS = RequestLimits()  # the server's defaults
CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)


SIGNATURES = export_signatures()
INPUTS = [(spec, alias) for spec in SIGNATURES.values() for alias in sorted(spec.inputs)]


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    if not data:
        return
    spec, alias = INPUTS[(data[0] & 0x7F) % len(INPUTS)]
    proto = tensor_pb2.TensorProto()
    try:
        proto.ParseFromString(data[1:])
    except DecodeError:
        return  # gRPC refuses the message before the server sees it
    declared = spec.inputs[alias]
    if data[0] & 0x80:  # the dtype declared right, as most clients send it: the checks after
        proto.dtype = declared.dtype
    try:
        array = from_tensor_proto(
            proto,
            alias,
            declared.dtype,
            lambda shape: spec.check_declared_shape(alias, shape, LIMITS),
        )
        if len(spec.inputs) == 1:  # a whole request of its signature
            spec.validate({alias: array}, LIMITS)
    except ServingError as e:
        assert e.code in CODES and "\n" not in e.message, (e.code, e.message)
        return
    assert list(array.shape) == [d.size for d in proto.tensor_shape.dim]
    assert array.size <= LIMITS.max_request_tokens * 50, array.shape
    if declared.dtype == types_pb2.DT_STRING:
        assert array.dtype == object and all(isinstance(v, bytes) for v in array.flat)
    else:
        assert array.dtype == np.int32, array.dtype


def seed_corpus():
    """A valid proto of each input, as clients send them (``tf.make_tensor_proto``: numbers as
    ``tensor_content``), and as value lists (``string_val``, ``int_val``)."""
    ids = batch_to_ids([["The", "bank", "closed", "."], ["Hi"]])
    values = {
        "sentences": np.array([b"The bank closed .", b"Hi"], dtype=object),
        "tokens": np.array([[b"The", b"bank"], [b"Hi", b""]], dtype=object),
        "sequence_len": np.array([2, 1], np.int32),
        "char_ids": ids,
    }
    seeds = []
    for index, (_, alias) in enumerate(INPUTS):
        value = values[alias]
        protos = [tf.make_tensor_proto(value)]
        listed = tensor_pb2.TensorProto(dtype=protos[0].dtype, tensor_shape=protos[0].tensor_shape)
        if value.dtype == object:
            listed.string_val.extend(value.ravel())
        else:
            listed.int_val.extend(value.ravel().tolist())
        protos.append(listed)
        seeds += [bytes([index | 0x80]) + proto.SerializeToString() for proto in protos]
    return seeds
