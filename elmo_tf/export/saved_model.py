"""A versioned TF SavedModel for TF Serving and TF Hub-style reuse (``elmo-tf export saved-model``).

The artefact's contract (signatures ``default``, ``tokens``, ``char_ids`` and
``serving_default``; their outputs, ``lstm_outputs1`` .. ``lstm_outputsL`` for a model with L
LSTM layers among them; the reusable-SavedModel attributes) is stated in
``elmo_tf.export.saved_model_module``; ``saved_model_cli show --all --dir OUTDIR/N`` lists it.

The model is written to ``OUTDIR/N/`` (TF Serving's layout: the server loads the highest N)
through a temporary directory renamed into place, so a server watching OUTDIR never sees a
half-written version.
"""

import os

import tensorflow as tf

from elmo_tf import files
from elmo_tf.export.saved_model_module import ElmoModule
from elmo_tf.export.versions import version_directory
from elmo_tf.layers import lstm_layout


def export_saved_model(model, outdir, version=None, trainable="mix", l2_coefficient=0.0):
    """Writes ``model`` (an ``ELMo``) as ``outdir/version/``; returns that path."""
    os.makedirs(outdir, exist_ok=True)
    version, target = version_directory(outdir, version)
    # Traced with the layout that runs best across CPUs: the graph runs where it is served.
    with lstm_layout.exporting():
        module = ElmoModule(model, trainable=trainable, l2_coefficient=l2_coefficient)
        with files.atomic_path(target) as staging:
            tf.saved_model.save(module, staging, signatures=module.signatures())
    return target
