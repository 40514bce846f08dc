"""ELMo vectors of a whole corpus on Apache Beam (``pip install 'elmo-tf[beam]'``).

- ``ElmoModelHandler``: ``RunInference`` over the Keras ``ELMo`` (a preset, a directory or
  options/weights files), the path of ``model.embed``;
- ``ElmoSavedModelHandler``: ``RunInference`` over an exported SavedModel's ``tokens`` or
  ``default`` signature;
- ``python -m elmo_tf.beam`` (also ``elmo-tf beam``): the pipeline that embeds every line of
  the files matching a glob and writes sharded Parquet or TFRecord files, bad lines to dead
  letters (``elmo_tf.beam.pipeline``; docs/beam.md shows local, Dataflow, Flink and Spark
  runs).
"""

from elmo_tf.beam.model_handler import ElmoModelHandler
from elmo_tf.beam.saved_model_handler import ElmoSavedModelHandler

__all__ = ["ElmoModelHandler", "ElmoSavedModelHandler"]
