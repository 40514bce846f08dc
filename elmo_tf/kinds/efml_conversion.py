"""An ELMoForManyLangs model as our model's options and weights (bilm-tf's layout, extended).

``convert(model_folder)`` (a ``efml_folder.ModelFolder``) returns the ``ElmoConfig`` and the
``{dataset: array}`` of the weight file that ``elmo-tf convert`` writes and
``weight_file.load_arrays`` loads. Each of EFML's tensors maps to one dataset (``_TABLE``); the
traps, each commented where it is handled:

- the convolutions: PyTorch's ``Conv1d`` weight is ``(out, in, width)``; bilm-tf's is a
  Conv2D kernel ``(1, width, in, out)``. Both are cross-correlations, so only the axes move;
- highway: AllenNLP's convention (EFML's ``Highway``) is ``p = A x + a``, the first half of
  ``p`` the transform (always ``relu`` in EFML, whatever the config's activation), the second
  half the gate ``g``, and ``y = g * x + (1 - g) * relu(transform)``: the gate multiplies the
  *carried input*. bilm-tf's "carry" gate ``c`` multiplies the transform:
  ``y = c * relu(t) + (1 - c) * x``, so ``c = 1 - g = sigmoid(-(A_g x + a_g))``: the carry
  weights are the gate half negated;
- the projection reads ``concat([word, char])``: the word rows come first (``CNN_proj/W_proj``
  ``(W + F, P)``), as our ``CharacterEncoder`` concatenates them;
- the LSTM: AllenNLP's ``LstmCellWithProjection`` has separate input and state matrices, gate
  blocks in the order i, f, g, o, and no forget bias added at run time. bilm-tf's ``W_0`` is
  one matrix over ``[x; h]`` with gate columns i, j (= g), f, o, and its cell adds 1.0 to the
  forget gate at run time: the blocks are reordered and 1.0 is subtracted from the stored
  forget bias (in float32, ``(b - 1) + 1`` is ``b`` within one rounding, 6e-8);
- ids: every table keeps EFML's rows as they are; our id is EFML's + 1 (0: a padded position,
  whose zero row the loader prepends), so no row moves.

The mix of the layers needs nothing: EFML's ``output_layer=-1`` is their plain mean, what
``ScalarMix`` starts as (weights 0, gamma 1).
"""

import numpy as np

from elmo_tf.config import ElmoConfig, InvalidValue
from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign.efml_folder import MAX_CHARACTERS_PER_TOKEN
from elmo_tf.tokens.codepoints import CODEPOINTS, CodepointVocabulary


def config_of(model, size_limits=None):
    """The ``ElmoConfig`` of a ``ModelFolder`` (its size bounded: ``elmo_tf.config``)."""
    efml = model.config
    _, char_specials, word_specials = CodepointVocabulary.from_lexicons(
        model.char_lexicon, model.word_lexicon
    )
    try:
        return _checked_config(model, efml, char_specials, word_specials, size_limits)
    except InvalidValue as e:  # named as the model config names it
        subject = "the model" if e.key is None else f"'{_EFML_KEYS.get(e.key, e.key)}'"
        source = model.config_source
        if source == "standard":
            source = f"{model.folder} (EFML's standard model config)"
        raise ForeignModelError(f"{source}: {subject} {e.message}") from None


# Our options' keys, as an EFML model config names the same values.
_EFML_KEYS = {
    "lstm.dim": "encoder.dim",
    "lstm.projection_dim": "encoder.projection_dim",
    "lstm.n_layers": "encoder.n_layers",
    "char_cnn.filters": "token_embedder.filters",
    "char_cnn.n_highway": "token_embedder.n_highway",
    "char_cnn.embedding.dim": "token_embedder.char_dim",
    "word_embedding.dim": "token_embedder.word_dim",
}


def _checked_config(model, efml, char_specials, word_specials, size_limits):
    config = ElmoConfig(
        filters=efml.filters,
        char_embedding_dim=efml.char_dim,
        n_highway=efml.n_highway,
        activation=efml.activation,
        projection_dim=efml.projection_dim,
        lstm_dim=efml.dim,
        n_lstm_layers=efml.n_layers,
        cell_clip=efml.cell_clip,
        proj_clip=efml.proj_clip,
        # ElmobiLm adds each layer's input from layer 2 on
        use_skip_connections=True,  # pragma: no mutate, equals the default (dropped)
        max_characters_per_token=MAX_CHARACTERS_PER_TOKEN,  # pragma: no mutate, equals the default
        n_characters=len(model.char_lexicon) + 1,
        character_scheme=CODEPOINTS,
        special_characters=char_specials,
        word_embedding_dim=efml.word_dim,
        n_words=len(model.word_lexicon) + 1 if efml.word_dim else 0,
        special_words=word_specials if efml.word_dim else None,
    )
    config.check_size(size_limits)
    return config


def convert(model, size_limits=None):
    """``(ElmoConfig, {dataset: array})`` of a ``ModelFolder``: the options and the weight file
    (vocabulary datasets included) of our format."""
    config = config_of(model, size_limits)
    embedder, encoder = model.token_embedder, model.encoder
    f = config.n_filters
    arrays = {"char_embed": embedder["char_emb_layer.embedding.weight"]}  # EFML's rows as is
    if config.word_embedding_dim:
        arrays["word_embed"] = embedder["word_emb_layer.embedding.weight"]
    for i in range(len(config.filters)):
        # Conv1d (out, in, width) -> Conv2D (1, width, in, out); both cross-correlate.
        weight = embedder[f"convolutions.{i}.weight"]
        arrays[f"CNN/W_cnn_{i}"] = weight.transpose(2, 1, 0)[None]
        arrays[f"CNN/b_cnn_{i}"] = embedder[f"convolutions.{i}.bias"]
    for k in range(config.n_highway):
        weight = embedder[f"highways._layers.{k}.weight"]  # (2F, F): [transform; gate]
        bias = embedder[f"highways._layers.{k}.bias"]
        # EFML's gate g multiplies the carried input; bilm-tf's carry c = 1 - g multiplies the
        # transform, and 1 - sigmoid(z) = sigmoid(-z): the gate half, negated.
        arrays[f"CNN_high_{k}/W_carry"] = -weight[f:].T
        arrays[f"CNN_high_{k}/b_carry"] = -bias[f:]
        arrays[f"CNN_high_{k}/W_transform"] = weight[:f].T
        arrays[f"CNN_high_{k}/b_transform"] = bias[:f]
    # Linear (P, W + F) -> (W + F, P); the word columns come first in both.
    arrays["CNN_proj/W_proj"] = embedder["projection.weight"].T
    arrays["CNN_proj/b_proj"] = embedder["projection.bias"]
    for direction, name in enumerate(("forward", "backward")):
        for layer in range(config.n_lstm_layers):
            prefix = f"{name}_layer_{layer}"
            out = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            # W_in x + W_st h = [W_in, W_st] [x; h]: bilm-tf's one matrix over [x; h].
            weight = np.concatenate(
                [encoder[f"{prefix}.input_linearity.weight"],
                 encoder[f"{prefix}.state_linearity.weight"]], axis=1
            )  # fmt: skip
            bias = _gates_to_bilm(encoder[f"{prefix}.state_linearity.bias"])
            d = config.lstm_dim
            # bilm-tf's cell adds forget_bias=1.0 at run time; EFML's adds nothing (its 1.0
            # was only an initial value, trained since): stored 1.0 lower, it comes out even.
            bias[2 * d : 3 * d] -= np.float32(1.0)
            arrays[f"{out}/W_0"] = _gates_to_bilm(weight).T  # (2P, 4D), columns i, j, f, o
            arrays[f"{out}/B"] = bias
            arrays[f"{out}/W_P_0"] = encoder[f"{prefix}.state_projection.weight"].T
    vocabulary, _, _ = CodepointVocabulary.from_lexicons(model.char_lexicon, model.word_lexicon)
    arrays.update(vocabulary.arrays())
    return config, {k: np.ascontiguousarray(v) for k, v in arrays.items()}


def _gates_to_bilm(array):
    """Blocks of the first axis from AllenNLP's gate order i, f, g, o to bilm-tf's i, j (g),
    f, o (a copy)."""
    i, f, g, o = np.split(np.asarray(array), 4, axis=0)  # pragma: no mutate, axis 0 is the default
    blocks = np.concatenate([i, g, f, o], axis=0)  # pragma: no mutate, axis 0 is the default
    return blocks.astype(np.float32)
