"""ELMo as deployable artefacts, and the Keras layer that reuses them.

=======================  ================================================================
``saved_model``          ``export_saved_model``: a versioned TF SavedModel (TF Serving, Hub)
``saved_model_module``   ``ElmoModule``: the SavedModel's contract (signatures, outputs)
``versions``             TF Serving's version directories ``BASE/N/``: one parser
``elmo_layer``           ``ElmoLayer``: an exported SavedModel as a fine-tunable Keras 3 layer
``tflite``               ``export_tflite``: a TFLite flatbuffer with built-in ops only
``tflite_arguments``     what ``export_tflite`` accepts, checked without TensorFlow
``litert``               ``run_tflite``: running it with LiteRT (the ``[tflite]`` extra)
=======================  ================================================================
"""
