"""ELMo vectors of a whole corpus on Apache Beam (the ``[beam]`` extra).

- ``ElmoModelHandler``: ``RunInference`` over the Keras ``ELMo`` (a preset, a directory or
  options/weights files), the path of ``model.embed``;
- ``ElmoSavedModelHandler``: ``RunInference`` over an exported SavedModel's ``tokens`` or
  ``default`` signature;
- ``ElmoOnnxModelHandler``: ``RunInference`` over an ONNX export (float32 or int8) in ONNX
  Runtime, the path of ``elmo-tf embed --onnx``;
- ``pipeline``: ``EmbedFiles``, ``WriteRecords`` and ``build_pipeline``, the job that embeds
  every line of the files matching a glob into sharded Parquet or TFRecord files, bad lines to
  dead letters; ``records``: what those files hold.

``python -m elmo_tf.beam`` (also ``elmo-tf beam``; its flags are in ``elmo_tf.cli.beam``) runs
the job; docs/beam.md shows local, Dataflow, Flink and Spark runs.

This package's own names are imported on first use, and its defaults (below) need no Beam, so
the command line shows its help and checks its flags before it imports Beam or TensorFlow.
"""

from elmo_tf._lazy import lazy_exports
from elmo_tf.models.length_batches import DEFAULT_BATCH_SIZE

# Sentences per Beam batch. One handler on 2,000 State of the Union sentences, bundled sotu
# model, a 2-core CPU: Beam batches of 64 -> 190-280 sentences/s, 256 -> 290-490, 512 ->
# 560-600, 1,024 -> 650, all 2,000 in one call -> 710-730: larger calls sort better and hit
# the token cache more. 1,024 caps memory: a batch of the published "original" model's
# all-layer outputs (3 x n x 1024 float32 a sentence, n ~ 22) is about 280 MB.
DEFAULT_MIN_BATCH_SIZE = 256
DEFAULT_MAX_BATCH_SIZE = 1024
# Sentences per model call inside a Beam batch: embed's default batch_size.
DEFAULT_INNER_BATCH_SIZE = DEFAULT_BATCH_SIZE
# The SavedModel signatures ElmoSavedModelHandler runs.
SIGNATURES = ("tokens", "default")
FORMATS = ("parquet", "tfrecord")

_EXPORTS = {
    "ElmoModelHandler": "elmo_tf.beam.model_handler",
    "ElmoSavedModelHandler": "elmo_tf.beam.saved_model_handler",
    "ElmoOnnxModelHandler": "elmo_tf.beam.onnx_model_handler",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
