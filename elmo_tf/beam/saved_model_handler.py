"""``ElmoSavedModelHandler``: Beam's ``RunInference`` over an exported ELMo SavedModel.

For workers that should not import the Keras model code path, or a model known only as an
artefact: the directory ``elmo-tf export saved-model DIR`` writes (``DIR/1``; given ``DIR``,
the highest version under it is used) is loaded with ``tf.saved_model.load`` once per worker
process, without ``tensorflow_hub``, and one of its signatures (the contract is in
``elmo_tf.export.saved_model_module``) runs each batch:

- ``"tokens"`` (default): the token lists padded with ``""`` plus ``sequence_len``;
- ``"default"``: each token list joined by one space, split again in the graph (tokens from
  ``str.split`` hold no whitespace, so the graph sees the same tokens).

Examples, predictions and batching are those of ``ElmoModelHandler`` (``layers`` likewise):
a Beam batch is sorted by length and run ``inner_batch_size`` sentences (and at most
``max_batch_tokens`` padded tokens) at a time. The graph
has no token cache (each call runs the character CNN on every token), so it is slower than
the Keras handler on a CPU; the numbers are the same up to float32 summation order.
"""

from elmo_tf.system import extras

extras.require("beam", __name__)

import os

import numpy as np

from elmo_tf import backend

backend.require_tensorflow("the Beam SavedModel handler")  # one line, before TensorFlow

import tensorflow as tf
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from elmo_tf.beam import (
    DEFAULT_INNER_BATCH_SIZE,
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MIN_BATCH_SIZE,
    SIGNATURES,
)
from elmo_tf.beam.predictions import batch_bytes, check_layers, in_sentence_order
from elmo_tf.errors import ExportError
from elmo_tf.export.versions import versions_in
from elmo_tf.models import length_batches


class ElmoSavedModelHandler(ModelHandler):
    """Runs an exported ELMo SavedModel's ``tokens`` or ``default`` signature on token lists.

    Args:
        saved_model_dir: a SavedModel directory (``DIR/1``) or a base directory holding
            numbered versions (the highest is loaded); any path ``tf.saved_model.load``
            reads (local, ``gs://``).
        signature: ``"tokens"`` or ``"default"``.
        layers, inner_batch_size, max_batch_tokens, min_batch_size, max_batch_size, **kwargs:
            as for ``ElmoModelHandler``.
    """

    def __init__(
        self,
        saved_model_dir,
        *,
        signature="tokens",
        layers=None,
        inner_batch_size=DEFAULT_INNER_BATCH_SIZE,
        max_batch_tokens=length_batches.DEFAULT_MAX_BATCH_TOKENS,
        min_batch_size=DEFAULT_MIN_BATCH_SIZE,
        max_batch_size=DEFAULT_MAX_BATCH_SIZE,
        **kwargs,
    ):
        if signature not in SIGNATURES:
            raise ValueError(f"signature must be one of {SIGNATURES}, got {signature!r}")
        check_layers(layers)
        if inner_batch_size < 1:
            raise ValueError(f"inner_batch_size must be at least 1, got {inner_batch_size}")
        length_batches.check_max_batch_tokens(max_batch_tokens)
        super().__init__(min_batch_size=min_batch_size, max_batch_size=max_batch_size, **kwargs)
        self.saved_model_dir = os.fspath(saved_model_dir)
        self.signature = signature
        self.layers = layers
        self.inner_batch_size = inner_batch_size
        self.max_batch_tokens = max_batch_tokens

    def load_model(self):
        path = resolve_version(self.saved_model_dir)
        loaded = tf.saved_model.load(path)
        if self.signature not in loaded.signatures:
            raise ExportError(
                f"{path}: SavedModel has no {self.signature!r} signature "
                f"(has {sorted(loaded.signatures)}); export it with elmo-tf export saved-model"
            )
        return _Loaded(loaded, loaded.signatures[self.signature])

    def run_inference(self, batch, model, inference_args=None):
        sentences = [list(tokens) for tokens in batch]
        batches = self._embed_batches(model, sentences)
        predictions = in_sentence_order(len(batch), batches, model.n_lstm_layers, self.layers)
        return [PredictionResult(tokens, p) for tokens, p in zip(batch, predictions)]

    def _embed_batches(self, model, sentences):
        """``(indices, outputs)`` per inner batch of ``sentences``, as ``ELMo.embed_batches``
        yields them, from the SavedModel's signature."""
        batches = length_batches.length_batches(
            [len(s) for s in sentences], self.inner_batch_size, self.max_batch_tokens
        )
        for indices in batches:
            rows = [sentences[i] for i in indices]
            lengths = np.array([len(s) for s in rows], np.int32)
            if self.signature == "default":
                outputs = model.function(sentences=tf.constant([" ".join(s) for s in rows]))
            else:
                padded = np.full([len(rows), int(lengths.max(initial=0))], "", dtype=object)
                for b, tokens in enumerate(rows):
                    padded[b, : len(tokens)] = tokens
                outputs = model.function(
                    tokens=tf.constant(padded, tf.string), sequence_len=tf.constant(lengths)
                )
            yield indices, {key: value.numpy() for key, value in outputs.items()}

    def get_num_bytes(self, batch):
        return batch_bytes(batch)

    def get_metrics_namespace(self):
        return "ElmoSavedModelHandler"


class _Loaded:
    """The loaded SavedModel (kept alive: its signature functions hold weak references)."""

    def __init__(self, saved_model, function):
        self.saved_model = saved_model
        self.function = function
        keys = function.structured_outputs
        self.n_lstm_layers = sum(1 for key in keys if key.startswith("lstm_outputs"))


def resolve_version(path):
    """``path`` if it holds a SavedModel, else its highest version subdirectory
    (``elmo_tf.export.versions``: names of digits that fit in int64)."""
    if tf.io.gfile.exists(f"{path.rstrip('/')}/saved_model.pb"):
        return path
    versions = {}
    if tf.io.gfile.isdir(path):
        versions = versions_in(n.rstrip("/") for n in tf.io.gfile.listdir(path))
    if not versions:
        raise ExportError(
            f"{path}: no saved_model.pb and no numbered version directory (elmo-tf export "
            "saved-model DIR writes DIR/1)"
        )
    return f"{path.rstrip('/')}/{versions[max(versions)]}"
