"""``ElmoOnnxModelHandler``: Beam's ``RunInference`` over an ONNX export (``elmo-tf export
onnx``, float32 or int8) in ONNX Runtime, without TensorFlow.

Each worker loads the file once, as ``OnnxModel`` loads it (its contract and metadata checked,
a code-point model's tables read from it), and runs each Beam batch through
``OnnxModel.embed_batches``: the path of ``elmo-tf embed --onnx``, so a job on a file writes
what ``embed --onnx`` writes for the same lines (up to float32 summation order where a batch's
composition differs). Examples and predictions are those of ``ElmoModelHandler``
(``elmo_tf.beam.model_handler``): token lists in, per sentence the dict of outputs or the
``layers`` array (``elmo_tf.beam.predictions``).

Beam's own ``OnnxModelHandlerNumpy`` (``apache_beam.ml.inference.onnx_inference``) does not fit
ELMo's file, so this handler does not build on it:

- it ``numpy.stack``\\ s a batch's examples into one array, so they must share a shape, while
  sentences have their own lengths: the ids must be padded per batch, and a batch sorted by
  length first, or short sentences pay for the longest;
- it has no step from tokens to character ids: bilm-tf's UTF-8 bytes, or a code-point model's
  tables, which the file carries in its metadata and only ``OnnxModel`` reads;
- it returns the first output only (ELMo has one per layer) and loads the file with
  ``onnx.load`` and no contract check, so a file whose metadata disagrees with its graph would
  run instead of being refused as ``embed --onnx`` refuses it.

>>> from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
>>> handler = KeyedModelHandler(ElmoOnnxModelHandler("elmo-int8.onnx", layers="average"))
>>> # keyed_tokens | RunInference(handler) -> (key, PredictionResult(tokens, (n, 2P)))
"""

from elmo_tf.system import extras

extras.require("beam", __name__)
extras.require("onnx", __name__, modules=("onnxruntime",))

import os

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from elmo_tf.beam import DEFAULT_INNER_BATCH_SIZE, DEFAULT_MAX_BATCH_SIZE, DEFAULT_MIN_BATCH_SIZE
from elmo_tf.beam.predictions import batch_bytes, check_layers, in_sentence_order
from elmo_tf.beam.remote_files import local_copies
from elmo_tf.export.onnx import OnnxModel
from elmo_tf.models.length_batches import DEFAULT_MAX_BATCH_TOKENS, check_max_batch_tokens


class ElmoOnnxModelHandler(ModelHandler):
    """Runs ``OnnxModel.embed_batches`` on batches of token lists.

    Args:
        path: the ``.onnx`` file (local, or on any Beam filesystem such as ``gs://``: copied
            to a local temporary directory while the worker loads it).
        layers: ``None`` for the dict of outputs, or ``"all"``, ``"top"``, ``"average"``
            (``elmo_tf.beam.model_handler``'s docstring).
        inner_batch_size: sentences per ONNX Runtime call inside a Beam batch.
        max_batch_tokens: padded tokens (rows x longest sentence) per call at most; ``None``
            or 0: no budget.
        threads: ONNX Runtime's intra-op threads per worker (default: its own, one per
            physical core).
        min_batch_size, max_batch_size: Beam's batch bounds (sentences).
        **kwargs: further ``ModelHandler`` arguments.
    """

    def __init__(
        self,
        path,
        *,
        layers=None,
        inner_batch_size=DEFAULT_INNER_BATCH_SIZE,
        max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS,
        threads=None,
        min_batch_size=DEFAULT_MIN_BATCH_SIZE,
        max_batch_size=DEFAULT_MAX_BATCH_SIZE,
        **kwargs,
    ):
        check_layers(layers)
        if inner_batch_size < 1:
            raise ValueError(f"inner_batch_size must be at least 1, got {inner_batch_size}")
        check_max_batch_tokens(max_batch_tokens)
        super().__init__(min_batch_size=min_batch_size, max_batch_size=max_batch_size, **kwargs)
        self.path = os.fspath(path)
        self.layers = layers
        self.inner_batch_size = inner_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.threads = threads

    def load_model(self):
        with local_copies([self.path]) as (local,):
            return OnnxModel(local, threads=self.threads)

    def run_inference(self, batch, model, inference_args=None):
        sentences = [list(tokens) for tokens in batch]
        batches = model.embed_batches(sentences, self.inner_batch_size, self.max_batch_tokens)
        predictions = in_sentence_order(
            len(batch), batches, model.config.n_lstm_layers, self.layers
        )
        return [PredictionResult(tokens, p) for tokens, p in zip(batch, predictions)]

    def get_num_bytes(self, batch):
        return batch_bytes(batch)

    def get_metrics_namespace(self):
        return "ElmoOnnxModelHandler"
