"""A versioned TF SavedModel for TF Serving and TF Hub-style reuse (``elmo-tf export saved-model``).

The artefact's contract (signatures ``default``, ``tokens``, ``char_ids`` and
``serving_default``; their outputs, ``lstm_outputs1`` .. ``lstm_outputsL`` for a model with L
LSTM layers among them; the reusable-SavedModel attributes) is stated in
``elmo_tf.export.saved_model_module``; ``saved_model_cli show --all --dir OUTDIR/N`` lists it.

The model is written to ``OUTDIR/N/`` (TF Serving's layout: the server loads the highest N)
through a temporary directory renamed into place, so a server watching OUTDIR never sees a
half-written version. It carries TF Serving's warm-up records
(``assets.extra/tf_serving_warmup_requests``, ``elmo_tf.export.saved_model_warmup``) unless
``warmup_requests=False``.
"""

import contextlib
import os

from elmo_tf import backend

backend.require_tensorflow("SavedModel export")  # one line, before TensorFlow

import tensorflow as tf

try:  # private; without it an export traces every function twice (see save_context)
    from tensorflow.python.saved_model import save_context as _tf_save_context
except ImportError:  # pragma: no cover
    _tf_save_context = None

from elmo_tf.export.saved_model_module import ElmoModule
from elmo_tf.export.saved_model_warmup import write_warmup_requests
from elmo_tf.export.versions import version_directory
from elmo_tf.layers import lstm_layout
from elmo_tf.system import extras, files


def export_saved_model(
    model, outdir, version=None, trainable="mix", l2_coefficient=0.0, warmup_requests=True
):
    """Writes ``model`` (an ``ELMo``) as ``outdir/version/``; returns that path.

    ``warmup_requests``: write TF Serving's warm-up records, one request per signature (they
    need the ``tensorflow_serving`` module of the [tensorflow] extra, checked before any work).
    """
    if warmup_requests:
        extras.require("tensorflow", "a SavedModel's warm-up records", ("tensorflow_serving",))
    os.makedirs(outdir, exist_ok=True)
    version, target = version_directory(outdir, version)
    # Traced with the layout that runs best across CPUs: the graph runs where it is served.
    options = tf.saved_model.SaveOptions()
    with lstm_layout.exporting():
        # Traced where tf.saved_model.save traces: a function traced outside its save context
        # is traced again inside it (the context is part of the trace's key), every trace of
        # the model twice (docs/performance.md, "Export").
        with save_context(options):
            module = ElmoModule(model, trainable=trainable, l2_coefficient=l2_coefficient)
            signatures = module.signatures()
        with files.atomic_path(target) as staging:
            tf.saved_model.save(module, staging, signatures=signatures, options=options)
            if warmup_requests:
                write_warmup_requests(staging, token_mapper=model.token_mapper)
    return target


def save_context(options):
    """TensorFlow's save context for ``options``: functions traced in it are the traces that
    ``tf.saved_model.save(..., options=options)`` keeps (a private module: where it is
    missing, no context, and the save traces again)."""
    if _tf_save_context is None:  # pragma: no cover - a TensorFlow that moved it
        return contextlib.nullcontext()
    return _tf_save_context.save_context(options)
