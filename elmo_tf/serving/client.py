"""A gRPC client for ELMo served over TF Serving's protocol (``elmo-tf client``).

It uses only the stock ``PredictionServiceStub`` of ``tensorflow-serving-api``, so it works
against ``elmo-tf serve`` and against TF Serving itself (``serving/docker-compose.yml``):

>>> from elmo_tf.serving.client import embed
>>> out = embed("127.0.0.1:8500", ["The cat sat .", "Hello !"])
>>> out["elmo"].shape, out["default"].shape
((2, 3, 32), (2, 32))

A sentence is a string of whitespace-separated tokens or a list of tokens. The signature picks
what is sent (``elmo_tf.export.saved_model_module`` states the contract):

- ``default``: the sentences as strings, tokenised by the server;
- ``tokens``: a ``[batch, max_len]`` string tensor padded with ``""`` and ``sequence_len``;
- ``char_ids``: ``[batch, max_len, 50]`` character ids made here (``elmo_tf.batch_to_ids``).
"""

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from elmo_tf import checks
from elmo_tf.export.versions import MAX_VERSION
from elmo_tf.serving.options import check_seconds
from elmo_tf.tokens.characters import batch_to_ids, split_tokens

SIGNATURES = ("default", "tokens", "char_ids")


def make_request(sentences, signature="default", model_name="elmo", outputs=(), version=None):
    """The ``PredictRequest`` for ``sentences`` on ``signature``; ``outputs`` filters outputs."""
    if signature not in SIGNATURES:
        raise ValueError(f"signature must be one of {SIGNATURES}, got {signature!r}")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = checks.integer("version", version, 0, MAX_VERSION)
    request.output_filter.extend(outputs)
    token_lists = [split_tokens(s) if isinstance(s, str) else list(s) for s in sentences]
    if signature == "default":
        strings = [" ".join(tokens) for tokens in token_lists]
        request.inputs["sentences"].CopyFrom(tf.make_tensor_proto(strings, dtype=tf.string))
    elif signature == "tokens":
        width = max((len(t) for t in token_lists), default=0)
        padded = [t + [""] * (width - len(t)) for t in token_lists]
        tokens = np.array(padded, dtype=object).reshape(len(token_lists), width)
        request.inputs["tokens"].CopyFrom(tf.make_tensor_proto(tokens, dtype=tf.string))
        lengths = np.array([len(t) for t in token_lists], dtype=np.int32)
        request.inputs["sequence_len"].CopyFrom(tf.make_tensor_proto(lengths))
    else:
        char_ids = np.asarray(batch_to_ids(token_lists), dtype=np.int32)
        request.inputs["char_ids"].CopyFrom(tf.make_tensor_proto(char_ids))
    return request


def connect(server):
    """A channel to ``HOST:PORT`` that accepts answers of any size (ELMo outputs are large)."""
    return grpc.insecure_channel(server, options=[("grpc.max_receive_message_length", -1)])


class Client:
    """A connection to one server, for many calls (``embed`` opens one per call).

    Args:
        server: ``"HOST:PORT"`` of the gRPC API.
        model_name: the served model's name.
        timeout: seconds each call may take (at most a day).
    """

    def __init__(self, server, model_name="elmo", timeout=60.0):
        self.model_name = model_name
        self.timeout = check_seconds("timeout", timeout, error=ValueError)
        self.channel = connect(server)
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def embed(self, sentences, signature="default", outputs=(), version=None):
        """``{output: numpy array}`` for ``sentences``; raises ``grpc.RpcError`` on failure."""
        request = make_request(sentences, signature, self.model_name, outputs, version)
        response = self.stub.Predict(request, timeout=self.timeout)
        return {key: tf.make_ndarray(value) for key, value in response.outputs.items()}

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def embed(
    server, sentences, signature="default", model_name="elmo", outputs=(), version=None, timeout=60
):
    """ELMo outputs of ``sentences`` from the server at ``server`` (``"HOST:PORT"``).

    Args:
        server: the gRPC address.
        sentences: strings of whitespace-separated tokens, or lists of tokens.
        signature: ``"default"``, ``"tokens"`` or ``"char_ids"`` (the same numbers).
        model_name: the served model's name.
        outputs: output keys to return (default: all of the signature's outputs).
        version: a version number to insist on (default: the served one).
        timeout: seconds the call may take.

    Returns:
        ``{output key: numpy array}`` (see ``elmo_tf.models.outputs``).
    """
    with Client(server, model_name, timeout) as client:
        return client.embed(sentences, signature, outputs, version)
