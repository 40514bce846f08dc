"""elmo-tf: ELMo (Peters et al. 2018) for TensorFlow 2 and Keras 3.

>>> import elmo_tf
>>> model = elmo_tf.ELMo.from_preset("sotu")  # the bundled model; 2P = 256
>>> out = model.embed([["The", "cat", "sat", "."], ["Hello", "!"]])
>>> out["elmo"].shape
(2, 4, 256)

``import elmo_tf`` imports every public name, so its Keras classes (the layers, ``ELMo`` and
``ElmoLayer``) are registered and a ``.keras`` file holding them loads after this import alone.
TensorFlow's harmless native start-up lines (oneDNN notice, CUDA probing on a machine without
a GPU) are dropped while it starts, and its INFO lines always (``TF_CPP_MIN_LOG_LEVEL=1``
where no level is set); ``TF_CPP_MIN_LOG_LEVEL=0`` shows them all.

The model runs on the Keras backend ``KERAS_BACKEND`` names (``elmo_tf.backend``): on JAX or
PyTorch, ``import elmo_tf`` and the model import no TensorFlow, and work where it is not
installed.

The one exception is the ``elmo-tf`` command itself (its console script, ``python -m elmo_tf``,
``python -m elmo_tf.beam``): there the public names are imported on first use, so that
``--help`` and argument errors answer without importing TensorFlow. Python runs this file
before any submodule, the command line's included, so it has to know which process it is in:
``_started_as_command`` reads the interpreter's own command line.
"""

__version__ = "0.2.0"

import importlib as _importlib
import os as _os
import sys as _sys

from elmo_tf import _moved
from elmo_tf.system import environment, extras, native_logs

_moved.install()

# public name -> the module that defines it
_PUBLIC = {
    "ELMo": "elmo_tf.models",
    "LSTMState": "elmo_tf.models",
    "load_pretrained": "elmo_tf.models",
    "ElmoConfig": "elmo_tf.config",
    "ElmoLayer": "elmo_tf.export.elmo_layer",
    "OptionsError": "elmo_tf.errors",
    "WeightFileError": "elmo_tf.errors",
    "batch_to_ids": "elmo_tf.tokens.characters",
    "configure_threads": "elmo_tf.system.cpu_threads",
    "load_weights": "elmo_tf.formats.weight_file",
    "preset": "elmo_tf.presets",
    "save_weights": "elmo_tf.formats.weight_file",
}
__all__ = sorted(_PUBLIC)

# How the elmo-tf command starts: its console script, or python -m with one of these modules.
_COMMAND_SCRIPTS = ("elmo-tf", "elmo-tf.exe", "elmo-tf-script.py")
_COMMAND_MODULES = ("elmo_tf", "elmo_tf.beam")
_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")


def _started_as_command(argv=None):
    """Whether this interpreter was started as the ``elmo-tf`` command (``sys.orig_argv``)."""
    argv = list(getattr(_sys, "orig_argv", ()) if argv is None else argv)
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None) in _COMMAND_MODULES
        if arg.startswith("-m"):
            return arg[2:] in _COMMAND_MODULES
        if arg in _OPTIONS_WITH_VALUE:
            next(args, None)
        elif arg == "-c" or not arg.startswith("-") or arg == "-":
            return _os.path.basename(arg) in _COMMAND_SCRIPTS
    return False


_no_backend = None  # why Keras cannot start: its backend's framework is not installed


def _import_public_names():
    global _no_backend
    environment.check()  # every ELMO_TF_* variable, once, before Keras starts
    try:
        native_logs.start_keras_quietly()
    except ModuleNotFoundError as e:
        # Keras's backend is an extra ([tensorflow], [jax], [torch]): without it, what needs
        # no model (batch_to_ids, elmo_tf.export.onnx's runner) still imports.
        _no_backend = extras.missing_backend(e)
        if _no_backend is None:
            raise
        return
    for name, module in _PUBLIC.items():
        globals()[name] = getattr(_importlib.import_module(module), name)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'elmo_tf' has no attribute {name!r}")
    if _no_backend is None:
        _import_public_names()
    if name not in globals():  # Keras cannot start: what needs no model still imports
        try:
            globals()[name] = getattr(_importlib.import_module(_PUBLIC[name]), name)
        except ModuleNotFoundError as e:
            if extras.missing_backend(e) is None:
                raise
            raise extras.MissingExtraError(f"elmo_tf.{name}: {_no_backend}") from None
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(__all__))


if not _started_as_command():
    _import_public_names()
