"""``ElmoModelHandler``: Beam's ``RunInference`` over the Keras ``ELMo`` of a preset or files.

Beam's stock ``TFModelHandlerTensor`` cannot run ELMo: it needs ``tensorflow_hub`` and a
Keras 2 model, and it calls the model on one stacked tensor, while ELMo takes ragged token
lists. This handler loads the model once per worker process (``RunInference`` keeps it in a
per-process ``Shared`` handle) and runs each Beam batch through ``ELMo.embed_batches``: the
path of ``model.embed`` and ``elmo-tf embed``, so the numbers are theirs up to float32
summation order (batch composition changes kernel blocking, see ``tests/support/numerics.py``).

Example: a token list (``["The", "cat", "sat"]``; ``[]`` for a blank line). Prediction: a
``PredictionResult`` holding the example and, per ``layers``:

- ``None``: a dict of the model's outputs for that sentence alone, trimmed to its ``n``
  tokens: ``word_emb`` ``(n, P)``, ``lstm_outputs1`` .. ``lstm_outputsL`` ``(n, 2P)``,
  ``elmo`` ``(n, 2P)``, ``default`` ``(2P,)``, ``sequence_len`` (``n``);
- ``"all"``: ``(L + 1, n, 2P)``; ``"top"``, ``"average"``: ``(n, 2P)``; float32, what
  ``elmo-tf embed --all/--top/--average`` writes for the line
  (``elmo_tf.formats.embedding_file.layer_stack`` and ``select_layers``).

Batching: ``embed_batches`` sorts a batch by length and caches each distinct token's
context-free vector for the rest of the call, so both work better the more sentences one call
sees; Beam's ``BatchElements`` therefore gets ``min_batch_size``/``max_batch_size`` of
``DEFAULT_MIN_BATCH_SIZE``/``DEFAULT_MAX_BATCH_SIZE`` (``elmo_tf.beam``) and the model runs
``inner_batch_size`` sentences at a time inside it (``embed``'s ``batch_size``), with at most
``max_batch_tokens`` padded tokens per call (``embed``'s budget by default), so that a call's
memory stays bounded when a Beam batch holds long sentences.

>>> from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
>>> handler = KeyedModelHandler(ElmoModelHandler("sotu", layers="average"))
>>> # keyed_tokens | RunInference(handler) -> (key, PredictionResult(tokens, (n, 2P)))
"""

from elmo_tf import backend
from elmo_tf.system import extras

backend.require_tensorflow("the Beam job")  # one line, before TensorFlow
extras.require("beam", __name__)

import os

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from elmo_tf.beam import DEFAULT_INNER_BATCH_SIZE, DEFAULT_MAX_BATCH_SIZE, DEFAULT_MIN_BATCH_SIZE
from elmo_tf.beam.predictions import batch_bytes, check_layers, in_sentence_order
from elmo_tf.beam.remote_files import is_remote, join, local_copies
from elmo_tf.models import ELMo, load_pretrained
from elmo_tf.models.length_batches import DEFAULT_MAX_BATCH_TOKENS, check_max_batch_tokens
from elmo_tf.presets.bundled import DEFAULT_MODEL

# The files a remote model directory must hold (copied to local disk before loading).
_MODEL_FILES = ("options.json", "weights.hdf5")


class ElmoModelHandler(ModelHandler):
    """Runs ``ELMo.embed_batches`` on batches of token lists.

    Args:
        model: the bundled model (``"sotu"``, the default), a published model (``"small"``,
            ...: downloaded once per machine into the model cache) or a directory with
            ``options.json`` and ``weights.hdf5`` (local, or any Beam filesystem such as
            ``gs://``: copied to a local temporary directory when the worker loads it).
            Leave ``None`` with ``options_file``/``weight_file``.
        options_file, weight_file: an official ``options.json`` and its HDF5 weights,
            instead of ``model`` (local, on a Beam filesystem, or ``http(s)://`` URLs fetched
            through the model cache).
        layers: ``None`` for the dict of outputs, or ``"all"``, ``"top"``, ``"average"``
            for one array per sentence (see the module docstring).
        inner_batch_size: sentences per model call inside a Beam batch.
        max_batch_tokens: padded tokens (rows x longest sentence) per model call at most;
            ``None`` or 0: no budget (see ``ELMo.embed_batches``).
        token_cache_size: see ``ELMo.embed_batches``.
        min_batch_size, max_batch_size: Beam's batch bounds (sentences).
        **kwargs: further ``ModelHandler`` arguments (``max_batch_duration_secs`` for
            streaming, ``large_model``, ``model_copies``, ``env_vars``).
    """

    def __init__(
        self,
        model=None,
        *,
        options_file=None,
        weight_file=None,
        layers=None,
        inner_batch_size=DEFAULT_INNER_BATCH_SIZE,
        max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS,
        token_cache_size=None,
        min_batch_size=DEFAULT_MIN_BATCH_SIZE,
        max_batch_size=DEFAULT_MAX_BATCH_SIZE,
        **kwargs,
    ):
        if (options_file is None) != (weight_file is None):
            raise ValueError("pass options_file and weight_file together")
        if model is not None and options_file is not None:
            raise ValueError("pass model or options_file with weight_file, not both")
        check_layers(layers)
        if inner_batch_size < 1:
            raise ValueError(f"inner_batch_size must be at least 1, got {inner_batch_size}")
        check_max_batch_tokens(max_batch_tokens)
        super().__init__(min_batch_size=min_batch_size, max_batch_size=max_batch_size, **kwargs)
        self.model = DEFAULT_MODEL if model is None and options_file is None else model
        self.options_file = None if options_file is None else os.fspath(options_file)
        self.weight_file = None if weight_file is None else os.fspath(weight_file)
        self.layers = layers
        self.inner_batch_size = inner_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.token_cache_size = token_cache_size

    def load_model(self):
        if self.options_file is not None:
            with local_copies([self.options_file, self.weight_file]) as (options, weights):
                return load_pretrained(options, weights)
        model = os.fspath(self.model)
        if is_remote(model):
            paths = [join(model, name) for name in _MODEL_FILES]
            with local_copies(paths) as local:
                return ELMo.from_preset(os.path.dirname(local[0]))
        return ELMo.from_preset(model)

    def run_inference(self, batch, model, inference_args=None):
        batches = model.embed_batches(
            [list(tokens) for tokens in batch],
            self.inner_batch_size,
            token_cache_size=self.token_cache_size,
            max_batch_tokens=self.max_batch_tokens,
        )
        predictions = in_sentence_order(
            len(batch), batches, model.config.n_lstm_layers, self.layers
        )
        return [PredictionResult(tokens, p) for tokens, p in zip(batch, predictions)]

    def get_num_bytes(self, batch):
        return batch_bytes(batch)

    def get_metrics_namespace(self):
        return "ElmoModelHandler"
