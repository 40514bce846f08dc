"""The ELMo model and its host side.

==================  ==============================================================
``elmo``            ``ELMo``: the Keras model (graph), ``load_pretrained``
``loading``         what ``ELMo.from_preset`` does: a model of any kind, built
``outputs``         ``output_keys`` and ``LSTMState``: what a model returns
``embedder``        the host side of ``ELMo.embed``: batches, cache, compiled calls
``token_cache``     the bounded token-vector cache ``embed`` keeps per model
``length_batches``  length-sorted batches under a token budget; the default sizes
==================  ==============================================================

The names below are imported on first use, so that ``length_batches``' defaults reach the
command line's ``--help`` without TensorFlow.
"""

from elmo_tf._lazy import lazy_exports

_EXPORTS = {
    "ELMo": "elmo_tf.models.elmo",
    "load_pretrained": "elmo_tf.models.elmo",
    "LSTMState": "elmo_tf.models.outputs",
    "output_keys": "elmo_tf.models.outputs",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
