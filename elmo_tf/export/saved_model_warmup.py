"""TF Serving's warm-up records of an ELMo SavedModel: ``assets.extra/tf_serving_warmup_requests``.

TF Serving reads this file when it loads a version and runs each record's request before it
reports the version AVAILABLE, so that the first client request does not pay the graph's
initialisation (its optimisation passes, the kernels' first runs); ``elmo-tf serve``
(``elmo_tf.serving.model_manager``) does the same. The file is a TFRecord file of
``tensorflow.serving.PredictionLog`` protos, each holding a ``PredictRequest``: one per
signature of ``elmo_tf.export.saved_model_module`` (``default``, ``tokens``, ``char_ids``),
each on ``WARMUP_SENTENCE``. As in TF Serving, a record that does not parse or whose request
fails makes the load fail, and a file of more than ``MAX_RECORDS`` records is refused.
"""

import os

import numpy as np

from elmo_tf import characters

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# TF Serving's limit (WarmupConsts::kMaxNumRecords): a longer file fails the load.
MAX_RECORDS = 1000
# A short sentence: the first request's cost is the graph's, whatever its length.
WARMUP_SENTENCE = ("The", "bank", "closed", ".")
SIGNATURES = ("default", "tokens", "char_ids")


def warmup_inputs():
    """``{signature: {input alias: numpy array}}``: the request of each record."""
    tokens = np.array([list(WARMUP_SENTENCE)], dtype=object)
    return {
        "default": {"sentences": np.array([" ".join(WARMUP_SENTENCE)], dtype=object)},
        "tokens": {"tokens": tokens, "sequence_len": np.array([len(WARMUP_SENTENCE)], np.int32)},
        "char_ids": {"char_ids": characters.batch_to_ids([list(WARMUP_SENTENCE)])},
    }


def write_warmup_requests(saved_model_dir, model_name="elmo"):
    """Writes the warm-up records into the SavedModel directory ``saved_model_dir``; returns
    the file's path. ``model_name`` goes into each request's ``model_spec`` (TF Serving runs a
    record on the version it is loading, whatever name it holds)."""
    import tensorflow as tf  # lazy: the export runs on TensorFlow; the reader's caller too
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2  # lazy: same

    path = os.path.join(saved_model_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for signature, inputs in warmup_inputs().items():
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature)
            )
            for alias, value in inputs.items():
                request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir):
    """``[(signature name, {input alias: numpy array})]`` of the SavedModel's warm-up records,
    in file order; ``[]`` when it has no warm-up file. ``ValueError`` for a record that is not
    a ``PredictionLog`` of a ``PredictRequest``, or more than ``MAX_RECORDS`` records."""
    import tensorflow as tf  # lazy: the reader runs in the server, on TensorFlow
    from tensorflow_serving.apis import prediction_log_pb2  # lazy: the [serving] extra

    path = os.path.join(saved_model_dir, WARMUP_FILE)
    if not os.path.isfile(path):
        return []
    requests = []
    for number, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator(), 1):
        if number > MAX_RECORDS:
            raise ValueError(f"{WARMUP_FILE}: more than {MAX_RECORDS} warm-up records")
        log = prediction_log_pb2.PredictionLog()
        try:
            log.ParseFromString(record)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, whichever implementation
            raise ValueError(f"{WARMUP_FILE}: record {number} is not a PredictionLog") from None
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{WARMUP_FILE}: record {number} holds no PredictRequest")
        request = log.predict_log.request
        inputs = {alias: tf.make_ndarray(tensor) for alias, tensor in request.inputs.items()}
        requests.append((request.model_spec.signature_name or "serving_default", inputs))
    return requests
