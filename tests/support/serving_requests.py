"""gRPC requests the serving tests send."""

import tensorflow as tf

from elmo_tf.serving.client import make_request

# Sentences the serving tests send: an empty one, a non-ASCII word, one without punctuation.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog .",
    "Hello !",
    "",
    "Zürich is a city in Switzerland .",
    "ELMo gives every word a vector",
]


def proto_request(signature, **inputs):
    """A ``PredictRequest`` of ``signature`` whose inputs are exactly ``inputs`` (arrays made
    TensorProtos), whatever the signature takes."""
    request = make_request(["a b"], "default")
    request.model_spec.signature_name = signature
    del request.inputs["sentences"]
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return request
