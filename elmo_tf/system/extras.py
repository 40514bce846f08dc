"""The optional extras: which modules each needs, and one error that names the missing one.

A module or command that needs an extra calls ``require(extra, who)`` before any work, so a
user without it gets one line naming the extra and the command that installs it, never a
``ModuleNotFoundError`` deep in a traceback after minutes of work.
"""

import importlib.util
import os
import shlex

from elmo_tf.errors import ElmoError

DISTRIBUTION = "elmo-tf"

# extra -> the modules it installs that elmo-tf imports
EXTRAS = {
    # export saved-model's warm-up records are TF Serving's PredictionLog protos
    "tensorflow": ("tensorflow", "tensorflow_serving"),
    "serving": ("grpc", "tensorflow_serving", "aiohttp"),
    "tflite": ("ai_edge_litert",),
    # running an ONNX export needs onnxruntime alone; exporting, the converter too
    "onnx": ("onnxruntime", "onnx", "tf2onnx"),
    "beam": ("apache_beam", "pyarrow"),
    "hub": ("tensorflow_hub", "tf_keras"),
    "jax": ("jax",),
    "torch": ("torch",),
}


class MissingExtraError(ElmoError, ImportError):
    """An optional extra that a module or command needs is not installed."""


def install_command(extra):
    """The command that installs ``extra`` from wherever the user runs it.

    Run from a source tree (an editable install, or a clone on ``sys.path``), the tree's
    absolute path: ``pip install -e '/path/to/elmo-tf[serving]'``; installed as a package,
    its name: ``pip install 'elmo-tf[serving]'``.
    """
    root = source_tree()
    target = f"{DISTRIBUTION}[{extra}]" if root is None else f"{root}[{extra}]"
    return f"pip install {'' if root is None else '-e '}{shlex.quote(target)}"


def source_tree():
    """The source tree elmo_tf is imported from (the folder with its ``setup.py``), or ``None``
    for an installed package."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # elmo_tf/
    root = os.path.dirname(package)
    if os.path.isfile(os.path.join(root, "setup.py")):
        return root
    return None


def missing(extra):
    """The modules of ``extra`` that are not installed (empty when it is)."""
    return [module for module in EXTRAS[extra] if not _installed(module)]


def require(extra, who, modules=None):
    """Raises ``MissingExtraError`` when ``extra`` is not installed; ``who`` names what needs it
    (a module, or a command such as ``"elmo-tf serve"``). ``modules``: the ones of the extra
    that ``who`` needs, when it needs only some (default: all)."""
    absent = [m for m in missing(extra) if modules is None or m in modules]
    if absent:
        raise MissingExtraError(
            f"{who} needs the [{extra}] extra ({', '.join(absent)} not installed): "
            f"{install_command(extra)}"
        )


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or sys.modules[m] = None
        return False


# Keras's backends: the module each imports, and the extra that installs it.
BACKEND_EXTRAS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}


def missing_backend(error):
    """The one-line message for ``error`` when it is Keras failing to import its backend's
    framework (``KERAS_BACKEND``, TensorFlow by default) because it is not installed, else
    ``None``."""
    name = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    name = (name or "").split(".")[0]
    if name not in BACKEND_EXTRAS:
        return None
    others = [b for b in BACKEND_EXTRAS if b != name and _installed(b)]
    instead = f", or set KERAS_BACKEND to {' or '.join(others)}" if others else ""
    return (
        f"Keras runs on {name} here (KERAS_BACKEND; TensorFlow when unset) and {name} is not "
        f"installed: {install_command(BACKEND_EXTRAS[name])}{instead}"
    )
