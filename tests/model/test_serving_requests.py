"""The bad-request tables, answered in this process by the same code the servers run: a gRPC
``PredictRequest`` through ``PredictionServicer.predict``, a REST body through
``RestProtocol.answer``, on a ``ModelServer`` that has loaded the tiny export and listens on no
port. Each request is refused with its status and one line naming what is wrong; declared
shapes are checked before anything is allocated. What only a socket shows (the HTTP layer, a
body's length and coding, one case of each table end to end):
tests/integration/test_serving_robustness.py."""

import json
import time

import numpy as np
import pytest
import tensorflow as tf
from grpc import StatusCode
from support.serving_requests import proto_request
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

from elmo_tf.serving import rest_protocol
from elmo_tf.serving.client import make_request
from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.grpc_api import ModelServicer, PredictionServicer
from elmo_tf.serving.server import ModelServer, ServerOptions

# The servers' limits in these tables (tests/integration/test_serving_robustness.py too).
LIMITS = dict(max_request_rows=16, max_tokens_per_row=12, max_request_tokens=64, max_token_bytes=40)


@pytest.fixture(scope="module")
def served(tiny_export):
    """``(gRPC servicer, REST protocol)`` of a ModelServer of the tiny export, not listening."""
    options = ServerOptions(str(tiny_export), port=0, rest_port=0, poll_seconds=0, **LIMITS)
    server = ModelServer(options)
    server.manager.poll()
    prediction, model = PredictionServicer(server), ModelServicer(server)
    yield prediction, rest_protocol.RestProtocol(server, prediction, model)
    server.manager.stop(5)


def _request(signature, **protos):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "elmo"
    request.model_spec.signature_name = signature
    for alias, proto in protos.items():
        request.inputs[alias].CopyFrom(proto)
    return request


def _proto(dtype, shape, **fields):
    """A ``TensorProto`` that declares ``shape`` whatever it holds (as a hostile client can)."""
    proto = tensor_pb2.TensorProto(dtype=dtype, **fields)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


def _lengths(values):
    return tf.make_tensor_proto(np.array(values, np.int32))


STRING, INT32 = types_pb2.DT_STRING, types_pb2.DT_INT32


HOSTILE = {
    # a ~100-byte request declaring a huge shape: refused before anything is allocated
    "sentences [2**40]": (
        "default",
        {"sentences": _proto(STRING, [2**40], string_val=[b"a"])},
        "RESOURCE_EXHAUSTED",
        "2**40 rows",
    ),
    "tokens [1, 10**7]": (
        "tokens",
        {"tokens": _proto(STRING, [1, 10**7], string_val=[b"a"]), "sequence_len": _lengths([1])},
        "RESOURCE_EXHAUSTED",
        "(max_tokens_per_row)",
    ),
    "char_ids [1, 2**26, 50]": (
        "char_ids",
        {"char_ids": _proto(INT32, [1, 2**26, 50], int_val=[0])},
        "RESOURCE_EXHAUSTED",
        "(max_tokens_per_row)",
    ),
    "char_ids [2**40]": (
        "char_ids",
        {"char_ids": _proto(INT32, [2**40], int_val=[0])},
        "INVALID_ARGUMENT",
        "must have rank 3",
    ),
    "rows x tokens over the limit": (
        "tokens",
        {"tokens": _proto(STRING, [8, 10], string_val=[b"a"]), "sequence_len": _lengths([1] * 8)},
        "RESOURCE_EXHAUSTED",
        "(max_request_tokens)",
    ),
    "more values than the shape": (
        "tokens",
        {"tokens": _proto(STRING, [1, 2], string_val=[b"a"] * 5), "sequence_len": _lengths([2])},
        "INVALID_ARGUMENT",
        "declares shape [1, 2] (2 values) but holds 5",
    ),
    "tensor_content shorter than the shape": (
        "char_ids",
        {"char_ids": _proto(INT32, [1, 4, 50], tensor_content=b"\0" * 400)},
        "INVALID_ARGUMENT",
        "tensor_content holds 400 bytes",
    ),
    # Each sentence within max_tokens_per_row (12), but 6 rows padded to 11 tokens are 66.
    "sentences padding over the tokens limit": (
        "default",
        {"sentences": tf.make_tensor_proto([" ".join(["w"] * 11)] * 6)},
        "RESOURCE_EXHAUSTED",
        "pads to 6 rows x 11 tokens, over the limit of 64 (max_request_tokens)",
    ),
    "a sentence of too many tokens": (
        "default",
        {"sentences": tf.make_tensor_proto([" ".join(["w"] * 13)])},
        "RESOURCE_EXHAUSTED",
        "row of 13 tokens, over the limit of 12 (max_tokens_per_row)",
    ),
    "a token too long": (
        "tokens",
        {"tokens": tf.make_tensor_proto([["x" * 41]]), "sequence_len": _lengths([1])},
        "RESOURCE_EXHAUSTED",
        "41-byte token, over the limit of 40 (max_token_bytes)",
    ),
    "token lists sent to the sentence signature": (
        "default",
        {"sentences": tf.make_tensor_proto([["the", "cat"]])},
        "INVALID_ARGUMENT",
        "send token lists to the 'tokens' signature",
    ),
    "more rows than allowed": (
        "default",
        {"sentences": tf.make_tensor_proto(["a"] * 17)},
        "RESOURCE_EXHAUSTED",
        "17 rows, over the limit of 16 (max_request_rows)",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_declared_shapes_are_checked_before_allocating(case, served):
    prediction, _ = served
    signature, protos, code, fragment = HOSTILE[case]
    fragment = fragment.replace("2**40", str(2**40))
    start = time.monotonic()
    with pytest.raises(ServingError) as e:
        prediction.predict(_request(signature, **protos))
    assert e.value.code.name == code, e.value.message
    assert fragment in e.value.message
    # Nothing of 10**7 or 2**40 elements was made (seconds to fill; 2**40 cannot be at all).
    assert time.monotonic() - start < 20


REST_CASES = {
    "deeply nested JSON": (
        b'{"instances": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        413,
        "the body holds 100,001 JSON arrays and objects, more than the",
    ),
    "a body of short strings (20 times its size once parsed)": (
        b'{"instances": [' + b'"ab",' * 20_000 + b'"ab"]}',
        413,
        "the body holds 20,002 JSON strings, more than the 224",
    ),
    "a body of empty lists (30 times its size once parsed)": (
        b'{"instances": [' + b"[]," * 20_000 + b"[]]}",
        413,
        "JSON arrays and objects, more than the 144 a request of at most max_request_tokens",
    ),
    "a huge integer": (
        b'{"inputs": {"char_ids": ' + b"9" * 5000 + b"}}",
        400,
        "value out of range",
    ),
    "an integer out of int32": (
        {"signature_name": "char_ids", "inputs": {"char_ids": [[[10**30] * 50]]}},
        400,
        "out of the range of int32",
    ),
    "token lists sent to the sentence signature": (
        {"instances": [["the", "cat"], ["a", "dog"]]},
        400,
        "send token lists to the 'tokens' signature",
    ),
    "the tokens signature's inputs sent to the sentence signature": (
        {"instances": [{"tokens": ["a", "b"], "sequence_len": 2}]},
        400,
        "send token lists to the 'tokens' signature",
    ),
    "a key given twice": (
        b'{"instances": ["a"], "signature_name": "tokens", "instances": ["b c"]}',
        400,
        "gives the key 'instances' twice in one object",
    ),
    "too many tokens per row": (
        {"signature_name": "tokens", "inputs": {"tokens": [["a"] * 13], "sequence_len": [13]}},
        413,
        "(max_tokens_per_row)",
    ),
    "sentences padding over the tokens limit": (
        {"instances": [" ".join(["w"] * 11)] * 6},
        413,
        "pads to 6 rows x 11 tokens, over the limit of 64 (max_request_tokens)",
    ),
    "a b64 string that is not base64": (
        {"instances": [{"b64": "!!!!"}]},
        400,
        "input 'sentences' holds {'b64': '!!!!'}, whose \"b64\" is not base64 (",
    ),
    "ragged deep JSON for a rank-1 input": (
        {"instances": [[[[["a"]]]]]},
        400,
        "must have rank 1",
    ),
    "a lone surrogate": (
        b'{"instances": ["ok", "a\\ud800b"]}',
        400,
        "holds a string that is not Unicode text: a lone surrogate '\\ud800' at character 1",
    ),
    "a signature name of 100 KB": (
        {"signature_name": "s" * 100_000, "instances": ["a"]},
        404,
        "(100000 characters)' not found",
    ),
}


@pytest.mark.parametrize("case", sorted(REST_CASES))
def test_rest_hostile_bodies(case, served):
    _, protocol = served
    body, status, fragment = REST_CASES[case]
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(ServingError) as e:
        protocol.answer(rest_protocol.route("POST", "/v1/models/elmo:predict"), data)
    assert e.value.http_status == status, e.value.message
    assert fragment in e.value.message and len(e.value.message) < 300, e.value.message


def test_the_tables_leave_the_server_answering(served):
    prediction, protocol = served
    for case in sorted(HOSTILE):
        signature, protos, _, _ = HOSTILE[case]
        with pytest.raises(ServingError):
            prediction.predict(_request(signature, **protos))
    route = rest_protocol.route("POST", "/v1/models/elmo:predict")
    answer = protocol.answer(route, b'{"instances": ["still up ."]}')
    assert answer["predictions"][0]["sequence_len"] == 3


def _with_spec(request, name="elmo", version=None):
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    return request


IDS = np.ones((1, 2, 50), np.int32)


# A request wrong in its names, types, shapes or values (the transport's size limit: a socket's).
BAD_GRPC = {
    "wrong dtype": (
        lambda: proto_request("default", sentences=np.array([1, 2], np.int32)),
        StatusCode.INVALID_ARGUMENT,
        "'sentences' must be string, got int32",
    ),
    "missing input": (
        lambda: proto_request("tokens", tokens=np.array([[b"a"]], object)),
        StatusCode.INVALID_ARGUMENT,
        "'sequence_len' is missing",
    ),
    "unknown input": (
        lambda: proto_request("default", sentences=[b"a"], words=[b"a"]),
        StatusCode.INVALID_ARGUMENT,
        "'words' is not an input",
    ),
    "wrong rank": (
        lambda: proto_request("default", sentences=np.array([[b"a b"]], object)),
        StatusCode.INVALID_ARGUMENT,
        "'sentences' must have rank 1",
    ),
    "empty batch": (
        lambda: proto_request("default", sentences=np.zeros([0], object)),
        StatusCode.INVALID_ARGUMENT,
        "'sentences' has an empty batch",
    ),
    "wrong char width": (
        lambda: proto_request("char_ids", char_ids=np.ones((1, 2, 49), np.int32)),
        StatusCode.INVALID_ARGUMENT,
        "'char_ids' must have size 50 in dimension 2",
    ),
    "char id out of range": (
        lambda: proto_request("char_ids", char_ids=IDS * 300),
        StatusCode.INVALID_ARGUMENT,
        "'char_ids' must hold ids in [0, 261]",
    ),
    "sequence_len too long": (
        lambda: proto_request(
            "tokens", tokens=np.array([[b"a", b"b"]], object), sequence_len=np.array([3], np.int32)
        ),
        StatusCode.INVALID_ARGUMENT,
        "'sequence_len' holds 3, longer than the rows",
    ),
    "batch sizes differ": (
        lambda: proto_request(
            "tokens", tokens=np.array([[b"a"]], object), sequence_len=np.array([1, 1], np.int32)
        ),
        StatusCode.INVALID_ARGUMENT,
        "'tokens' has batch size 1 but input 'sequence_len' has 2",
    ),
    "unknown output": (
        lambda: make_request(["a"], outputs=["vectors"]),
        StatusCode.INVALID_ARGUMENT,
        "output 'vectors' is not an output",
    ),
    "unknown model": (
        lambda: _with_spec(make_request(["a"]), name="bert"),
        StatusCode.NOT_FOUND,
        "no model 'bert'",
    ),
    "unknown version": (
        lambda: make_request(["a"], version=2),
        StatusCode.NOT_FOUND,
        "Specific(elmo, 2)",
    ),
    "unknown signature": (
        lambda: proto_request("words", sentences=[b"a"]),
        StatusCode.NOT_FOUND,
        "signature 'words' not found",
    ),
}


@pytest.mark.parametrize("case", list(BAD_GRPC))
def test_bad_grpc_request(case, served):
    prediction, _ = served
    build, code, message = BAD_GRPC[case]
    with pytest.raises(ServingError) as e:
        prediction.predict(build())
    assert e.value.code == code and message in e.value.message, e.value.message


BAD_REST = {
    "not JSON": ("/v1/models/elmo:predict", b"{instances", 400, "not valid JSON"),
    "wrong type": (
        "/v1/models/elmo:predict",
        {"signature_name": "tokens", "inputs": {"tokens": [["a"]], "sequence_len": ["1"]}},
        400,
        "'sequence_len' must hold int32 values",
    ),
    "ragged": (
        "/v1/models/elmo:predict",
        {
            "signature_name": "tokens",
            "inputs": {"tokens": [["a"], ["b", "c"]], "sequence_len": [1, 2]},
        },
        400,
        "'tokens' is ragged",
    ),
    "missing input": (
        "/v1/models/elmo:predict",
        {"signature_name": "tokens", "instances": [{"tokens": ["a"]}]},
        400,
        "'sequence_len' is missing",
    ),
    "empty batch": ("/v1/models/elmo:predict", {"instances": []}, 400, "empty batch"),
    "unknown model": ("/v1/models/bert:predict", {"instances": ["a"]}, 404, "no model 'bert'"),
    "unknown version": ("/v1/models/elmo/versions/2", None, 404, "version 2"),
    "unknown signature": (
        "/v1/models/elmo:predict",
        {"signature_name": "x", "instances": ["a"]},
        404,
        "'x' not found",
    ),
}


@pytest.mark.parametrize("case", list(BAD_REST))
def test_bad_rest_request(case, served):
    _, protocol = served
    path, body, status, message = BAD_REST[case]
    method, data = ("GET", b"") if body is None else ("POST", body)
    if not isinstance(data, bytes):
        data = json.dumps(data).encode()
    with pytest.raises(ServingError) as e:
        protocol.answer(rest_protocol.route(method, path), data)
    assert e.value.http_status == status and message in e.value.message, e.value.message
