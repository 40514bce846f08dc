"""A versioned TF SavedModel for TF Serving and TF Hub-style reuse (``elmo-tf export saved-model``).

The artefact's contract (signatures ``default``, ``tokens``, ``char_ids`` and
``serving_default``; their outputs, ``lstm_outputs1`` .. ``lstm_outputsL`` for a model with L
LSTM layers among them; the reusable-SavedModel attributes) is stated in
``elmo_tf.saved_model_module``; ``saved_model_cli show --all --dir OUTDIR/N`` lists it.

The model is written to ``OUTDIR/N/`` (TF Serving's layout: the server loads the highest N)
through a temporary directory renamed into place, so a server watching OUTDIR never sees a
half-written version.
"""

import os

from elmo_tf import files
from elmo_tf.errors import ExportError


def next_version(outdir):
    versions = [int(n) for n in os.listdir(outdir) if n.isdigit()] if os.path.isdir(outdir) else []
    return max(versions, default=0) + 1


def version_directory(outdir, version=None):
    """``outdir/version`` (default: the next version), refusing to replace an existing one."""
    version = next_version(outdir) if version is None else version
    if version < 0:
        raise ExportError(f"version must be a non-negative integer, got {version}")
    target = os.path.join(outdir, str(version))
    if os.path.exists(target):
        raise ExportError(f"{target} already exists; choose another version")
    return version, target


def export_saved_model(model, outdir, version=None, trainable="mix", l2_coefficient=0.0):
    """Writes ``model`` (an ``ELMo``) as ``outdir/version/``; returns that path."""
    import tensorflow as tf

    from elmo_tf.saved_model_module import ElmoModule

    os.makedirs(outdir, exist_ok=True)
    version, target = version_directory(outdir, version)
    module = ElmoModule(model, trainable=trainable, l2_coefficient=l2_coefficient)
    with files.atomic_path(target) as staging:
        tf.saved_model.save(module, staging, signatures=module.signatures())
    return target
