"""ElmoLayer: ELMo as a native, fine-tunable Keras 3 layer, from an exported SavedModel or a
model in memory."""

import json
import os

import keras
import numpy as np

from elmo_tf import backend
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import PresetError
from elmo_tf.models.char_ids import check_char_ids, host_char_ids, is_host_array
from elmo_tf.models.elmo import ELMo, set_fine_tuning
from elmo_tf.models.outputs import output_keys
from elmo_tf.models.settings import check_fine_tune

# What the layer reads: whitespace-tokenised sentences (split in the graph: TensorFlow only), or
# character ids (B, T, 50) as elmo_tf.batch_to_ids makes them (every backend).
INPUT_FORMATS = ("sentences", "tokens", "char_ids")

# What an elmo_config (a SavedModel's elmo_config(), a .keras file's layer config) must hold.
ELMO_CONFIG_KEYS = (
    "options",
    "num_output_representations",
    "do_layer_norm",
    "l2_coefficient",
    "dropout",
    "trainable",
)


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoLayer(keras.layers.Layer):
    """ELMo on raw sentences, for functional and Sequential Keras 3 models.

    The layer rebuilds the ``ELMo`` model natively from an exported SavedModel (its
    ``elmo_config()`` and ``elmo_variables``), or from a model in memory
    (:meth:`from_model`, :meth:`from_preset`), so its weights are ordinary Keras variables:
    any Keras optimizer trains them and ``model.save()`` stores them. (Keras' ``TFSMLayer``
    wraps the SavedModel's own variables instead, whose duplicate names break the optimizer's
    slot variables.) On JAX and PyTorch the layer reads character ids (``inputs="char_ids"``):
    a SavedModel and sentence strings are TensorFlow's.

    Args:
        saved_model: path of an exported version directory (``OUTDIR/N``), or an object from
            ``tf.saved_model.load`` of one (TensorFlow only); or what ``ELMo.from_preset``
            takes, a model name or a model directory (every backend).
        output_key: which output to return: ``"default"`` (B, 2P) for sentence vectors, or
            any other key of the SavedModel's outputs (``"elmo"``, ``"word_emb"``,
            ``"lstm_outputs1"`` .. ``"lstm_outputs{L}"`` for its L LSTM layers,
            ``"sequence_len"``; shapes and meaning in the table of
            ``elmo_tf.models.outputs``).
        fine_tune: which weights train: ``"mix"`` (ScalarMix weights and gamma), ``"all"``, or
            ``"none"``; default: what the SavedModel was exported with.
        dropout: dropout on ``elmo`` during training; default: the exported rate.
        inputs: ``"sentences"`` (default; TensorFlow only), ``"tokens"`` (TF Hub's
            ``tokens`` signature: TensorFlow only) or ``"char_ids"``.
        elmo_config: the model description (set by ``get_config``; leave unset).

    Call arguments:
        inputs: with ``inputs="sentences"``, ``(B,)`` or ``(B, 1)`` sentences, one
            whitespace-tokenised sentence each: a string tensor, a list of ``str``, or a NumPy
            array of ``str``/``bytes``/``object``. (In ``fit``/``predict``, Keras 3's own input
            handling rejects Python lists and NumPy ``str`` arrays for every model; pass
            ``np.array(texts, dtype=object)``, ``tf.constant(texts)`` or a
            ``tf.data.Dataset``.) With ``inputs="tokens"``, a dict of ``"tokens"``, string
            ``(B, T)`` padded with ``""``, and ``"sequence_len"``, int32 ``(B,)`` (TF Hub's
            ``tokens`` signature), or the pair ``(tokens, sequence_len)``. With
            ``inputs="char_ids"``, int ``(B, T, 50)`` character ids (``elmo_tf.batch_to_ids``).
        training: enables dropout.

    Example:
    >>> inputs = keras.Input(shape=(), dtype="string")
    >>> vectors = elmo_tf.ElmoLayer("exported/1", output_key="default")(inputs)
    >>> model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(vectors))

    On any backend:
    >>> inputs = keras.Input(shape=(None, 50), dtype="int32")
    >>> vectors = elmo_tf.ElmoLayer.from_preset("sotu")(inputs)  # inputs="char_ids"
    """

    def __init__(
        self,
        saved_model=None,
        output_key="default",
        fine_tune=None,
        dropout=None,
        elmo_config=None,
        inputs="sentences",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if fine_tune is not None:  # before it can go into an elmo_config under another name
            fine_tune = check_fine_tune(fine_tune)
        if inputs not in INPUT_FORMATS:
            raise ValueError(f"inputs must be one of {INPUT_FORMATS}, got {inputs!r}")
        if inputs in ("sentences", "tokens"):
            backend.require_tensorflow(
                f'ElmoLayer on strings (inputs="{inputs}"; inputs="char_ids" with '
                "elmo_tf.batch_to_ids runs on every backend)"
            )
        if (saved_model is None) == (elmo_config is None):
            raise ValueError("ElmoLayer needs a SavedModel path or loaded SavedModel")
        self.inputs = inputs
        values = None
        source = None
        if saved_model is not None and not _is_saved_model(saved_model):
            source = _model_of(saved_model)  # a model name or directory: every backend
            elmo_config = model_config(source, fine_tune or "mix")
            saved_model = None
        if saved_model is not None:
            backend.require_tensorflow("loading a SavedModel into ElmoLayer")
            import tensorflow as tf  # lazy: a SavedModel is TensorFlow's

            loaded = (
                tf.saved_model.load(saved_model) if isinstance(saved_model, str) else saved_model
            )
            if not hasattr(loaded, "elmo_config") or not hasattr(loaded, "elmo_variables"):
                raise ValueError(
                    f"{saved_model!r} is not an elmo-tf SavedModel (no elmo_config/elmo_variables);"
                    " export one with `elmo-tf export saved-model`"
                )
            elmo_config = json.loads(loaded.elmo_config().numpy().decode("utf-8"))
            values = [v.numpy() for v in loaded.elmo_variables]
        missing = [key for key in ELMO_CONFIG_KEYS if key not in elmo_config]
        if missing:
            raise ValueError(f"the elmo_config lacks {', '.join(map(repr, missing))}")
        config = ElmoConfig.from_options(elmo_config["options"], source="elmo_config")
        n_layers = config.n_lstm_layers
        keys = output_keys(n_layers)
        if output_key not in keys:
            raise ValueError(
                f"output_key must be one of {', '.join(keys)} for this model ({n_layers} LSTM "
                f"layer{'s' if n_layers > 1 else ''}), got {output_key!r}"
            )
        self.output_key = output_key
        self.elmo_config = elmo_config
        # Both are checked, whichever is used: an unknown value is never ignored.
        trainable = check_fine_tune(elmo_config["trainable"], "the elmo_config's trainable")
        self.fine_tune = trainable if fine_tune is None else fine_tune
        self.dropout = elmo_config["dropout"] if dropout is None else dropout
        self.elmo = ELMo(
            config,
            num_output_representations=elmo_config["num_output_representations"],
            do_layer_norm=elmo_config["do_layer_norm"],
            l2_coefficient=elmo_config["l2_coefficient"],
            dropout=self.dropout,
            name="elmo",
        )
        if values is not None:
            self._assign(values, elmo_config["variable_paths"])
        if source is not None:
            self.elmo.set_weights(source.get_weights())
            self.elmo.token_mapper = source.token_mapper  # a code-point model's own tables
        set_fine_tuning(self.elmo, self.fine_tune)

    @classmethod
    def from_model(cls, model, output_key="default", fine_tune="mix", inputs="char_ids", **kwargs):
        """An ``ElmoLayer`` holding a copy of ``model`` (an ``ELMo``): its architecture,
        settings and weights; ``fine_tune``, ``inputs`` and further ``Layer`` arguments as
        for the constructor."""
        elmo_config = model_config(model, check_fine_tune(fine_tune))
        layer = cls(
            output_key=output_key,
            fine_tune=fine_tune,
            elmo_config=elmo_config,
            inputs=inputs,
            **kwargs,
        )
        layer.elmo.set_weights(model.get_weights())
        layer.elmo.token_mapper = model.token_mapper  # a code-point model's own tables
        return layer

    @classmethod
    def from_preset(cls, name_or_dir, output_key="default", fine_tune="mix", inputs="char_ids",
                    **kwargs):  # fmt: skip
        """``from_model`` of ``ELMo.from_preset(name_or_dir)`` (a bundled or published name, or
        a model directory); keyword arguments of ``ELMo`` (``dropout``,
        ``num_output_representations``...) go to the model, the rest to the layer."""
        model_arguments = ("num_output_representations", "do_layer_norm", "l2_coefficient")
        model_kwargs = {k: kwargs.pop(k) for k in (*model_arguments, "dropout") if k in kwargs}
        model = ELMo.from_preset(name_or_dir, **model_kwargs)
        return cls.from_model(model, output_key, fine_tune, inputs, **kwargs)

    def _assign(self, values, paths):
        weights = self.elmo.weights
        if len(values) != len(weights):
            raise ValueError(
                f"the SavedModel holds {len(values)} variables, the model it describes "
                f"{len(weights)}"
            )
        for weight, value, path in zip(weights, values, paths):
            if tuple(weight.shape) != value.shape:
                raise ValueError(
                    f"SavedModel variable {path} has shape {value.shape}, expected {weight.shape}"
                )
            weight.assign(value.astype(weight.dtype))  # a bfloat16 export's, widened

    def build(self, input_shape):
        self.built = True

    def __call__(self, inputs, *args, **kwargs):
        if self.inputs == "char_ids":
            # checked as given, before Keras converts them (JAX narrows int64 to int32)
            inputs = host_char_ids(inputs)
            if is_host_array(inputs):
                check_char_ids(inputs, self.elmo.config)
        if self.inputs == "tokens":
            inputs = _tokens_inputs(inputs)
        # Keras passes only tensors positionally: make Python and NumPy strings one.
        if self.inputs == "sentences" and (
            isinstance(inputs, (list, tuple))
            or (isinstance(inputs, np.ndarray) and inputs.dtype.kind in "USO")
        ):
            import tensorflow as tf  # lazy: sentence strings are TensorFlow's

            inputs = tf.constant(np.asarray(inputs, dtype=object), dtype=tf.string)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=None):
        if self.inputs == "char_ids":
            return self.elmo(inputs, training=training)[self.output_key]
        # lazy: strings are TensorFlow's (the graph splits and maps them)
        import tensorflow as tf

        from elmo_tf.export import saved_model_module as module

        if self.inputs == "tokens":
            ids = module.checked_tokens_to_model_ids(inputs["tokens"], inputs["sequence_len"])
            return self.elmo(ids, training=training)[self.output_key]
        split_sentences, tokens_to_model_ids = module.split_sentences, module.tokens_to_model_ids
        sentences = tf.reshape(inputs, [-1])
        tokens, lengths = split_sentences(sentences)
        outputs = self.elmo(tokens_to_model_ids(tokens, lengths), training=training)
        return outputs[self.output_key]

    def compute_output_shape(self, input_shape):
        if self.inputs == "tokens":
            batch, length = tuple(input_shape["tokens"])[:2]
            return self.elmo.output_shapes(batch, length)[self.output_key]
        length = input_shape[1] if self.inputs == "char_ids" else None
        return self.elmo.output_shapes(input_shape[0], length)[self.output_key]

    def compute_output_spec(self, inputs, training=None):
        dtype = "int32" if self.output_key == "sequence_len" else self.compute_dtype
        shape = (
            {k: v.shape for k, v in inputs.items()} if isinstance(inputs, dict) else inputs.shape
        )
        return keras.KerasTensor(self.compute_output_shape(shape), dtype=dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            output_key=self.output_key,
            fine_tune=self.fine_tune,
            dropout=self.dropout,
            elmo_config=self.elmo_config,
            inputs=self.inputs,
        )
        return config

    @classmethod
    def from_config(cls, config):
        # A config only describes the model (a .keras file's weights fill it); it never names
        # a file to load: a SavedModel is code, and a downloaded .keras file must not make
        # load_model run a graph from anywhere on the machine. Paths belong to the caller of
        # ElmoLayer(saved_model=...).
        if "saved_model" in config:
            raise ValueError(
                "an ElmoLayer config describes the model (elmo_config) and never names a "
                "SavedModel to load; refused 'saved_model' in the config. Build the layer "
                "with ElmoLayer(saved_model=PATH) in your own code instead"
            )
        if not isinstance(config.get("elmo_config"), dict):
            raise ValueError("an ElmoLayer config needs its elmo_config (a dict)")
        return cls(**config)


def _tokens_inputs(inputs):
    """``inputs="tokens"``'s call input as ``{"tokens", "sequence_len"}`` (a dict, or the pair
    as TF Hub's signature orders it), Python and NumPy values made tensors."""
    if isinstance(inputs, (list, tuple)) and len(inputs) == 2:
        inputs = {"tokens": inputs[0], "sequence_len": inputs[1]}
    if not isinstance(inputs, dict) or set(inputs) != {"tokens", "sequence_len"}:
        raise ValueError(
            'ElmoLayer(inputs="tokens") takes {"tokens": (B, T) strings, "sequence_len": (B,) '
            f"int32}} or the pair (tokens, sequence_len), got {type(inputs).__name__}"
        )
    import tensorflow as tf  # lazy: strings are TensorFlow's

    tokens, lengths = inputs["tokens"], inputs["sequence_len"]
    if isinstance(tokens, (list, tuple, np.ndarray)):
        tokens = tf.constant(np.asarray(tokens, dtype=object), dtype=tf.string)
    if isinstance(lengths, (list, tuple, np.ndarray)):
        lengths = tf.constant(np.asarray(lengths), dtype=tf.int32)
    return {"tokens": tokens, "sequence_len": lengths}


def model_config(model, fine_tune):
    """The ``elmo_config`` describing ``model`` (an ``ELMo``), fine-tuned as ``fine_tune`` says."""
    return {
        "options": model.config.to_options(),
        "num_output_representations": model.num_output_representations,
        "do_layer_norm": model.do_layer_norm,
        "l2_coefficient": model.l2_coefficient,
        "dropout": model.dropout_rate,
        "trainable": fine_tune,
    }


def _is_saved_model(saved_model):
    """Whether ``saved_model`` is a loaded SavedModel or the path of a SavedModel directory."""
    if not isinstance(saved_model, str | os.PathLike):
        return True
    return os.path.isfile(os.path.join(saved_model, "saved_model.pb"))


def _model_of(name_or_dir):
    """``ELMo.from_preset(name_or_dir)``, its error naming SavedModels too."""
    try:
        return ELMo.from_preset(name_or_dir)
    except PresetError as e:
        name = os.fspath(name_or_dir)
        raise PresetError(f"{name!r} is no SavedModel (saved_model.pb), and {e}") from None
