"""ElmoModule: the ELMo SavedModel's contract, as a ``tf.Module``.

Signatures (``serving_default`` is ``default``):

=============  ===========================================  =====================================
signature      inputs                                       notes
=============  ===========================================  =====================================
``default``    ``sentences`` string ``[batch]``             split in the graph on
                                                            ``characters.WHITESPACE``
``tokens``     ``tokens`` string ``[batch, max_len]``,      TF Hub ELMo's contract: rows padded
               ``sequence_len`` int32 ``[batch]``           with ""; a token at a position below
                                                            ``sequence_len`` is real, even ""
``char_ids``   ``char_ids`` int32 ``[batch, max_len, 50]``  ids from ``elmo_tf.batch_to_ids``;
                                                            zero rows are padding (a code-point
                                                            model's: 51 wide, ``ELMo.batch_to_ids``)
=============  ===========================================  =====================================

Every signature returns the outputs of ``elmo_tf.models.outputs`` (its table is the one
statement of them), T being the longest sentence of the request; their vectors are float32,
also from a model that computes in bfloat16 (``elmo-tf export saved-model --precision
bfloat16``: its weights stored and its matmuls run in bfloat16, its outputs widened).

Padded positions are zero. Bad input (a wrong dtype or rank, or a ``sequence_len`` that is
negative, longer than its row, or of another batch size) fails with an error naming the input.

The module is also a reusable SavedModel (the ``hub.KerasLayer`` API), called the way TF Hub's
``google/elmo`` module is: ``__call__(sentences, training=False, as_dict=False)`` returns the
``default`` sentence vectors ``[batch, 2P]``, so a plain ``hub.KerasLayer(path)`` is a drop-in
for ``hub.KerasLayer("https://tfhub.dev/google/elmo/3")``; with ``as_dict=True`` (through
``hub.KerasLayer(path, arguments={"as_dict": True}, output_key="elmo")``) it returns the dict
above. It is traced for each combination of ``training`` and ``as_dict``. Further: ``variables``;
``trainable_variables`` (as chosen at export: the mix weights, all, or none); and
``regularization_losses`` (the paper's ``λ ||w||²`` on the mix weights, when λ > 0).
``elmo_config()`` returns the JSON that ``elmo_tf.ElmoLayer`` needs to rebuild the model
natively, and ``elmo_variables`` lists the variables in ``ELMo.weights`` order.

A model converted from ELMoForManyLangs (``config.uses_codepoints``) maps tokens with its own
tables in the graph (``elmo_tf.export.codepoint_ids``) instead of bilm-tf's UTF-8 bytes.

The graph uses core TensorFlow ops only: stock TF Serving runs it, and loading it never needs
``tensorflow_text``.
"""

import json
import math
import numbers

from elmo_tf import backend

backend.require_tensorflow("the SavedModel module")  # one line, before TensorFlow

import tensorflow as tf

from elmo_tf.errors import ExportError
from elmo_tf.export.codepoint_ids import CodepointIds
from elmo_tf.models.elmo import fine_tuned_weights
from elmo_tf.models.outputs import output_keys
from elmo_tf.models.settings import check_fine_tune
from elmo_tf.tokens import characters


def split_sentences(sentences):
    """Splits a ``[batch]`` string tensor on ``characters.WHITESPACE`` (as ``str.split()`` does,
    no-break space included): (tokens ``[batch, T]``, lengths)."""
    # StringSplitV2 splits on ASCII whitespace only; map the other separators to " " first.
    spaced = characters.whitespace_to_space(sentences)
    tokens = tf.strings.split(spaced)  # RaggedTensor, core op StringSplitV2
    return tokens.to_tensor(""), tf.cast(tokens.row_lengths(), tf.int32)


def checked_tokens_to_model_ids(tokens, sequence_len, token_ids=None):
    """``tokens_to_model_ids`` of the ``tokens`` signature's inputs (TF Hub's: string ``[batch,
    max_len]`` and int32 ``[batch]``), after checking that ``sequence_len`` has one entry per
    row, none negative, none past its row (an InvalidArgumentError naming the input)."""
    max_len = tf.shape(tokens)[1]
    checks = [
        tf.debugging.assert_equal(
            tf.shape(sequence_len)[0],
            tf.shape(tokens)[0],
            message="sequence_len must have one entry per row of tokens",
        ),
        tf.debugging.assert_non_negative(sequence_len, message="sequence_len must not be negative"),
        tf.debugging.assert_less_equal(
            sequence_len, max_len, message="sequence_len is longer than its row of tokens"
        ),
    ]
    with tf.control_dependencies(checks):
        return tokens_to_model_ids(tokens, sequence_len, token_ids)


def tokens_to_model_ids(tokens, sequence_len, token_ids=None):
    """Id rows ``[batch, T, width]`` for padded string tokens and their row lengths: bilm-tf's
    character ids (``characters.tokens_to_char_ids``), or ``token_ids(tokens)``'s (a
    code-point model's ``CodepointIds``); zero at padded positions."""
    mask = tf.sequence_mask(sequence_len, maxlen=tf.shape(tokens)[1])
    ids = (token_ids or characters.tokens_to_char_ids)(tokens)
    return ids * tf.cast(mask, tf.int32)[:, :, None]


class ElmoModule(tf.__internal__.tracking.AutoTrackable):
    """Wraps an ``elmo_tf.ELMo`` for ``tf.saved_model.save``.

    A plain trackable rather than a ``tf.Module``: the reusable-SavedModel API needs
    ``variables`` and ``trainable_variables`` as saved attributes, which ``tf.Module`` reserves
    for properties.

    Args:
        model: the ``ELMo`` to export.
        trainable: which variables a reusing model trains: ``"mix"`` (the ScalarMix weights
            and gamma), ``"all"``, or ``"none"``.
        l2_coefficient: λ of the regularisation loss on the mix weights (0: none).
    """

    def __init__(self, model, trainable="mix", l2_coefficient=0.0):
        check_fine_tune(trainable, "trainable")
        if (
            isinstance(l2_coefficient, bool)
            or not isinstance(l2_coefficient, numbers.Real)
            or not math.isfinite(l2_coefficient)
            or l2_coefficient < 0
        ):  # nan, inf or a negative λ would make every fine-tuning loss NaN or unbounded
            raise ExportError(
                f"l2_coefficient must be a finite number >= 0, got {l2_coefficient!r}"
            )
        # Track the backing tf.Variables themselves, in ELMo.weights order; tracking the Keras
        # model object instead saves Keras-3 wrappers that TF1-style loaders cannot restore.
        self.elmo_variables = [w.value for w in model.weights]
        self.variables = list(self.elmo_variables)
        # Dropout's random-seed state: captured by the training=True trace, so it must be
        # reachable from the root, but it is no model weight.
        weight_ids = {id(w) for w in model.weights}
        self._rng_state = [v.value for v in model.variables if id(v) not in weight_ids]
        self.trainable_variables = [w.value for w in fine_tuned_weights(model, trainable)]
        self._model = _Untracked(model)
        self._config = model.config
        # A code-point model's tables (ELMoForManyLangs'), tracked: saved, and initialised
        # when the SavedModel loads.
        self.token_ids = None
        if model.config.uses_codepoints:
            self.token_ids = CodepointIds(model.token_mapper)
        self._output_keys = output_keys(model.config.n_lstm_layers)
        self._trainable = trainable
        self._config_json = json.dumps(
            {
                "options": model.config.to_options(),
                "num_output_representations": model.num_output_representations,
                "do_layer_norm": model.do_layer_norm,
                "l2_coefficient": l2_coefficient,
                "dropout": model.dropout_rate,
                "trainable": trainable,
                "variable_paths": [w.path for w in model.weights],
                "precision": model.dtype_policy.compute_dtype,
            }
        )
        self.regularization_losses = []
        if l2_coefficient:
            weights = [mix.scalar_weights.value for mix in model.scalar_mixes]

            @tf.function(input_signature=[])
            def mix_weight_penalty():
                return l2_coefficient * tf.add_n([tf.reduce_sum(tf.square(w)) for w in weights])

            self.regularization_losses.append(mix_weight_penalty)

        sentences = tf.TensorSpec([None], tf.string, name="sentences")
        self.default = tf.function(self._default, input_signature=[sentences])
        self.tokens = tf.function(
            self._tokens,
            input_signature=[
                tf.TensorSpec([None, None], tf.string, name="tokens"),
                tf.TensorSpec([None], tf.int32, name="sequence_len"),
            ],
        )
        self.char_ids = tf.function(
            self._char_ids,
            input_signature=[
                tf.TensorSpec([None, None, model.config.id_width], tf.int32, name="char_ids")
            ],
        )
        self.__call__ = tf.function(self._call)
        for training in (False, True):
            for as_dict in (False, True):
                self.__call__.get_concrete_function(sentences, training=training, as_dict=as_dict)
        self.elmo_config = tf.function(lambda: tf.constant(self._config_json), input_signature=[])

    def _run(self, char_ids, training=False):
        outputs = self._model.value(char_ids, training=training)
        # float32 out whatever the model computes in (a bfloat16 export's vectors widened)
        return {
            key: tf.cast(outputs[key], tf.float32) if outputs[key].dtype.is_floating
            else outputs[key]
            for key in self._output_keys
        }  # fmt: skip

    def _default(self, sentences):
        tokens, lengths = split_sentences(sentences)
        return self._run(tokens_to_model_ids(tokens, lengths, self.token_ids))

    def _tokens(self, tokens, sequence_len):
        return self._run(checked_tokens_to_model_ids(tokens, sequence_len, self.token_ids))

    def _char_ids(self, char_ids):
        config = self._config
        chars = char_ids[:, :, : config.max_characters_per_token]
        message = f"char_ids must be in [0, {config.char_table_rows - 1}]"
        checks = [
            tf.debugging.assert_non_negative(char_ids, message=message),
            tf.debugging.assert_less(chars, config.char_table_rows, message=message),
        ]
        if config.word_embedding_dim:  # the last column: word ids
            checks.append(
                tf.debugging.assert_less(
                    char_ids[:, :, -1],
                    config.n_words,
                    message=f"char_ids' last column must be word ids in [0, {config.n_words - 1}]",
                )
            )
        with tf.control_dependencies(checks):
            char_ids = tf.identity(char_ids)
        return self._run(char_ids)

    def _call(self, sentences, training=False, as_dict=False):
        tokens, lengths = split_sentences(sentences)
        outputs = self._run(tokens_to_model_ids(tokens, lengths, self.token_ids), training=training)
        return outputs if as_dict else outputs["default"]

    def signatures(self):
        """The ``signatures`` argument of ``tf.saved_model.save``."""
        return {
            "serving_default": self.default.get_concrete_function(),
            "default": self.default.get_concrete_function(),
            "tokens": self.tokens.get_concrete_function(),
            "char_ids": self.char_ids.get_concrete_function(),
        }


class _Untracked:
    """Holds an object without ``tf.Module`` tracking it (its variables are tracked directly)."""

    def __init__(self, value):
        self.value = value
