"""A version held as an ONNX export (``elmo-tf export onnx``, float32 or int8), run in ONNX
Runtime behind the same servable interface as a SavedModel (``servable.ServableBase``).

A version directory holds ``model.onnx`` (Triton's layout: ``BASE/N/model.onnx``) where a
SavedModel version holds ``saved_model.pb``. The file is loaded as ``OnnxModel`` loads it:
its contract checked (one input, the outputs, the ``elmo_tf.options`` metadata against the
graph), its precision and a code-point model's tables read from its metadata. It answers the
SavedModel's three signatures with the same inputs and outputs (``elmo_tf.models.outputs``),
mapping tokens to ids on the host as ``OnnxModel`` does (bilm-tf's UTF-8 bytes, or the model's
own code-point tables), so a TF Serving client written for the SavedModel works unchanged:

=============  =================================================================
``default``    ``sentences`` ``[batch]`` split on ``characters.WHITESPACE``, as the graph splits
``tokens``     ``tokens`` ``[batch, T]`` and ``sequence_len`` ``[batch]``: each row's first
               ``sequence_len`` tokens, padded to ``T`` positions
``char_ids``   ``char_ids`` ``[batch, T, width]`` as they are
=============  =================================================================

Requests are validated, batched and bounded before they get here, as for a SavedModel.
"""

import os

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from elmo_tf.export.onnx import OnnxModel
from elmo_tf.models.outputs import output_shapes
from elmo_tf.serving.errors import invalid_argument
from elmo_tf.serving.servable import ServableBase
from elmo_tf.serving.signature import SignatureSpec, input_rules
from elmo_tf.tokens.characters import split_tokens

# The file of an ONNX version, as Triton names it.
ONNX_FILE = "model.onnx"
PREDICT_METHOD = "tensorflow/serving/predict"  # TF Serving's, as the SavedModel's signatures


def signature_defs(config):
    """The SavedModel export's ``SignatureDef``s for a model of ``config``: ``default``
    (``serving_default`` too), ``tokens``, ``char_ids``, each with every output's dtype and
    shape, as ``GetModelMetadata`` lists them."""
    declared = {
        "default": {"sentences": (types_pb2.DT_STRING, [-1])},
        "tokens": {
            "tokens": (types_pb2.DT_STRING, [-1, -1]),
            "sequence_len": (types_pb2.DT_INT32, [-1]),
        },
        "char_ids": {"char_ids": (types_pb2.DT_INT32, [-1, -1, config.id_width])},
    }
    outputs = output_shapes(config)
    defs = {}
    for name, inputs in declared.items():
        signature = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
        for alias, (dtype, dims) in inputs.items():
            _tensor_info(signature.inputs[alias], f"{name}_{alias}:0", dtype, dims)
        for alias, shape in outputs.items():
            dtype = types_pb2.DT_INT32 if alias == "sequence_len" else types_pb2.DT_FLOAT
            dims = [-1 if d is None else d for d in shape]
            _tensor_info(signature.outputs[alias], f"{name}_{alias}:0", dtype, dims)
        defs[name] = signature
    defs["serving_default"] = defs["default"]
    return defs


def _tensor_info(info, tensor_name, dtype, dims):
    info.name = tensor_name
    info.dtype = dtype
    for size in dims:
        info.tensor_shape.dim.add(size=size)


class OnnxServable(ServableBase):
    """One version held as an ONNX export, run in ONNX Runtime (``ServableBase``'s interface).

    Args:
        name: the model name.
        version: the version number.
        path: the version's directory, holding ``model.onnx``.
        batching: ``BatchingOptions``, or ``None`` to run every request on its own.
    """

    def __init__(self, name, version, path, batching=None):
        super().__init__(name, version, path, batching)
        self.model = OnnxModel(os.path.join(path, ONNX_FILE))
        config = self.model.config
        self.signature_defs = signature_defs(config)
        bounds, utf8_text = input_rules(config)
        self.specs = {
            key: SignatureSpec(key, signature, bounds, utf8_text)
            for key, signature in self.signature_defs.items()
        }
        self.start_batchers()

    @property
    def precision(self):
        """``"int8"`` or ``"float32"``: what the file's weights are."""
        return self.model.precision

    def run(self, key, inputs):
        """Runs signature ``key`` on validated inputs: their tokens mapped to ids on the host,
        then the file; a fault of the ids is INVALID_ARGUMENT."""
        if key == "char_ids":
            char_ids = inputs["char_ids"]
        elif key == "tokens":
            tokens, lengths = inputs["tokens"], inputs["sequence_len"]
            rows = [list(row[:n]) for row, n in zip(tokens, lengths)]
            char_ids = self._ids(rows, tokens.shape[1])
        else:  # default, serving_default: the sentences split as the graph splits them
            rows = [_split(sentence) for sentence in inputs["sentences"]]
            char_ids = self._ids(rows)
        try:
            return self.model(char_ids)
        except ValueError as e:
            raise invalid_argument(e) from None

    def _ids(self, rows, length=None):
        try:
            return self.model.token_mapper.batch_to_ids(rows, max_length=length)
        except ValueError as e:  # a code-point model's text that is not UTF-8
            raise invalid_argument(e) from None

    def release_model(self):
        self.model = None


def _split(sentence):
    """A sentence's tokens, as bytes: split on ``characters.WHITESPACE`` as the graph splits,
    each token's bytes kept as sent (invalid UTF-8 included, as the graph keeps it)."""
    if isinstance(sentence, bytes):
        text = sentence.decode("utf-8", "surrogateescape")
        return [token.encode("utf-8", "surrogateescape") for token in split_tokens(text)]
    return split_tokens(str(sentence))
