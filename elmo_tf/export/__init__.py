"""ELMo as deployable artefacts, and the Keras layer that reuses them.

=======================  ================================================================
``saved_model``          ``export_saved_model``: a versioned TF SavedModel (TF Serving, Hub)
``saved_model_module``   ``ElmoModule``: the SavedModel's contract (signatures, outputs)
``saved_model_warmup``   TF Serving's warm-up records of a SavedModel (``assets.extra``)
``versions``             TF Serving's version directories ``BASE/N/``: one parser
``elmo_layer``           ``ElmoLayer``: an exported SavedModel as a fine-tunable Keras 3 layer
``tflite``               ``export_tflite``: a TFLite flatbuffer with built-in ops only
``tflite_arguments``     what ``export_tflite`` accepts, checked without TensorFlow
``litert``               ``run_tflite``: running it with LiteRT (the ``[tflite]`` extra)
``onnx_export``          ``export_onnx``: an ONNX model with built-in operators only
``onnx_lstm``            the biLSTM loop the ONNX export traces (tf2onnx converts it)
``onnx``                 ``run_onnx``, ``OnnxModel``: running it with ONNX Runtime, no TensorFlow
``onnx_contract``        what an ONNX export holds: its input, outputs and metadata, checked
``onnx_metadata``        its metadata entries, read in one walk of the file
``onnx_triton``          a Triton model repository for the ONNX export
=======================  ================================================================

The exporters are imported on first use (``elmo_tf.export.export_onnx``...): the runners and
the command line import this package without TensorFlow.
"""

from elmo_tf._lazy import lazy_exports

_EXPORTS = {
    "export_saved_model": "elmo_tf.export.saved_model",
    "export_tflite": "elmo_tf.export.tflite",
    "export_onnx": "elmo_tf.export.onnx_export",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
