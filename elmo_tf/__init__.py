"""elmo-tf: ELMo (Peters et al. 2018) for TensorFlow 2 and Keras 3.

>>> import elmo_tf
>>> model = elmo_tf.load_pretrained("options.json", "weights.hdf5")
>>> out = model.embed([["The", "cat", "sat", "."], ["Hello", "!"]])
>>> out["elmo"].shape
(2, 4, 1024)

``import elmo_tf`` imports every public name, so its Keras classes (the layers, ``ELMo`` and
``ElmoLayer``) are registered and a ``.keras`` file holding them loads after this import alone.
TensorFlow's harmless native start-up lines (oneDNN notice, missing CUDA drivers on a CPU
machine) are dropped while it is imported; ``TF_CPP_MIN_LOG_LEVEL=0`` shows them.
"""

__version__ = "0.1.0"

import contextlib as _contextlib
import sys as _sys

from elmo_tf import native_logs as _native_logs

if "tensorflow" not in _sys.modules:
    with _native_logs.filtered_stderr() if _native_logs.wanted() else _contextlib.nullcontext():
        import tensorflow as _tensorflow  # noqa: F401

from elmo_tf.characters import batch_to_ids  # noqa: E402
from elmo_tf.config import ElmoConfig, OptionsError  # noqa: E402
from elmo_tf.cpu_threads import configure_threads  # noqa: E402
from elmo_tf.elmo_layer import ElmoLayer  # noqa: E402
from elmo_tf.models import ELMo, LSTMState  # noqa: E402
from elmo_tf.presets import preset  # noqa: E402
from elmo_tf.weight_file import (  # noqa: E402
    WeightFileError,
    load_pretrained,
    load_weights,
    save_weights,
)

__all__ = [
    "ELMo",
    "ElmoConfig",
    "ElmoLayer",
    "LSTMState",
    "OptionsError",
    "WeightFileError",
    "batch_to_ids",
    "configure_threads",
    "load_pretrained",
    "load_weights",
    "preset",
    "save_weights",
]
