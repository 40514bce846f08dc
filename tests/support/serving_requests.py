"""gRPC requests the serving tests send."""

import tensorflow as tf

from elmo_tf.serving.client import make_request


def proto_request(signature, **inputs):
    """A ``PredictRequest`` of ``signature`` whose inputs are exactly ``inputs`` (arrays made
    TensorProtos), whatever the signature takes."""
    request = make_request(["a b"], "default")
    request.model_spec.signature_name = signature
    del request.inputs["sentences"]
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return request
