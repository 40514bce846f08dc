"""An ELMoForManyLangs model folder as our config and weight datasets
(``elmo_tf.kinds.efml_conversion``), on the tiny EFML model read as data: the hyper-parameters
carried over, size limits and bad values named as the model config names them, and each
tensor's move (the highway gate negated, the LSTM's gate blocks reordered with the forget bias
lowered by 1.0). The converted model's outputs against EFML's: tests/model/test_efml_model.py."""

import dataclasses

import numpy as np
import pytest
from support.foreign_models import EFML_TINY

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import efml_folder
from elmo_tf.kinds import efml_conversion


@pytest.fixture(scope="module")
def model():
    return efml_folder.read_folder(EFML_TINY)


@pytest.fixture(autouse=True)
def _default_size_limits(monkeypatch):
    for name in ("ELMO_TF_MAX_PARAMETERS", "ELMO_TF_MAX_DIMENSION", "ELMO_TF_MAX_LAYERS"):
        monkeypatch.delenv(name, raising=False)


def _with_config(model, **changes):
    return dataclasses.replace(model, config=dataclasses.replace(model.config, **changes))


def _refusal(model, size_limits=None):
    with pytest.raises(ForeignModelError) as error:
        efml_conversion.config_of(model, size_limits)
    return str(error.value)


def test_the_config_carries_efmls_hyper_parameters_and_ids(model):
    config = efml_conversion.config_of(model)
    assert config.filters == ((1, 4), (2, 4), (3, 6)) and config.n_highway == 2
    assert (config.projection_dim, config.lstm_dim, config.n_lstm_layers) == (6, 10, 2)
    assert (config.cell_clip, config.proj_clip) == (0.5, 0.4)
    assert config.use_skip_connections is True and config.max_characters_per_token == 50
    assert (config.character_scheme, config.n_characters) == ("codepoints", 127)
    assert config.special_characters == (121, 122, 123, 124, 125, 126)
    assert (config.word_embedding_dim, config.n_words) == (3, 33)
    assert config.special_words == (1, 2, 3, 4)
    one_layer = efml_conversion.config_of(_with_config(model, n_layers=1, cell_clip=None))
    assert (one_layer.n_lstm_layers, one_layer.cell_clip, one_layer.proj_clip) == (1, None, 0.4)


def test_a_model_without_a_word_branch_has_no_word_ids(model):
    no_words = dataclasses.replace(_with_config(model, word_dim=0), word_lexicon=None)
    config = efml_conversion.config_of(no_words)
    assert (config.word_embedding_dim, config.n_words, config.special_words) == (0, 0, None)
    assert config.id_width == 50
    # a word dictionary beside a config without a word branch is left out
    config = efml_conversion.config_of(_with_config(model, word_dim=0))
    assert (config.word_embedding_dim, config.n_words, config.special_words) == (0, 0, None)


def test_a_model_over_a_size_limit_is_refused_naming_the_model_configs_key(model):
    assert _refusal(model, {"dimension": 8}) == (
        f"{EFML_TINY / 'cnn_tiny.json'}: 'encoder.dim' is 10, above the dimension limit of 8 "
        "(raise it with size_limits={'dimension': ...} or ELMO_TF_MAX_DIMENSION)"
    )
    with pytest.raises(ForeignModelError) as error:
        efml_conversion.convert(model, {"dimension": 8})
    assert str(error.value) == _refusal(model, {"dimension": 8})


def test_a_model_over_the_parameter_limit_is_refused_as_the_model(model):
    count = efml_conversion.config_of(model).parameter_count
    assert _refusal(model, {"parameters": count - 1}) == (
        f"{EFML_TINY / 'cnn_tiny.json'}: the model has {count} parameters, above the parameters "
        f"limit of {count - 1} (raise it with size_limits={{'parameters': ...}} or "
        "ELMO_TF_MAX_PARAMETERS)"
    )
    assert efml_conversion.config_of(model, {"parameters": count}).parameter_count == count


def test_a_value_efmls_config_has_no_name_for_is_named_as_ours(model):
    assert _refusal(_with_config(model, activation="sigmoid")) == (
        f"{EFML_TINY / 'cnn_tiny.json'}: 'char_cnn.activation' must be one of "
        "('relu', 'tanh'), got 'sigmoid'"
    )


def test_the_standard_config_is_named_by_the_folder(model):
    standard = dataclasses.replace(model, config_source="standard")
    assert _refusal(standard, {"dimension": 8}) == (
        f"{EFML_TINY} (EFML's standard model config): 'encoder.dim' is 10, above the dimension "
        "limit of 8 (raise it with size_limits={'dimension': ...} or ELMO_TF_MAX_DIMENSION)"
    )


def test_highway_carry_weights_are_efmls_gate_half_negated(model):
    _, arrays = efml_conversion.convert(model)
    for k in range(2):
        weight = model.token_embedder[f"highways._layers.{k}.weight"]
        bias = model.token_embedder[f"highways._layers.{k}.bias"]
        np.testing.assert_array_equal(arrays[f"CNN_high_{k}/W_carry"], -weight[14:].T)
        np.testing.assert_array_equal(arrays[f"CNN_high_{k}/b_carry"], -bias[14:])
        np.testing.assert_array_equal(arrays[f"CNN_high_{k}/W_transform"], weight[:14].T)
        np.testing.assert_array_equal(arrays[f"CNN_high_{k}/b_transform"], bias[:14])


def _bilm_order(blocks):
    i, f, g, o = np.split(blocks, 4)
    return np.concatenate([i, g, f, o])


def test_lstm_gates_are_reordered_and_the_forget_bias_lowered_by_one(model):
    before = {name: tensor.copy() for name, tensor in model.encoder.items()}
    _, arrays = efml_conversion.convert(model)
    for direction, name in enumerate(("forward", "backward")):
        for layer in range(2):
            prefix, out = f"{name}_layer_{layer}", f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}"
            bias = model.encoder[f"{prefix}.state_linearity.bias"]
            i, f, g, o = np.split(bias, 4)
            expected = np.concatenate([i, g, f - np.float32(1.0), o])
            stored = arrays[f"{out}/LSTMCell/B"]
            assert stored.dtype == np.float32
            np.testing.assert_array_equal(stored, expected)
            inputs = model.encoder[f"{prefix}.input_linearity.weight"]
            weight = np.concatenate([inputs, model.encoder[f"{prefix}.state_linearity.weight"]], 1)
            assert arrays[f"{out}/LSTMCell/W_0"].dtype == np.float32
            np.testing.assert_array_equal(arrays[f"{out}/LSTMCell/W_0"], _bilm_order(weight).T)
    for name, tensor in before.items():  # EFML's tensors are left as they were
        np.testing.assert_array_equal(model.encoder[name], tensor)


def test_gate_blocks_move_along_the_first_axis_as_float32():
    blocks = np.arange(16, dtype=np.float64).reshape(8, 2)
    moved = efml_conversion._gates_to_bilm(blocks)
    assert moved.dtype == np.float32
    assert moved[:, 0].tolist() == [0, 2, 8, 10, 4, 6, 12, 14]
    assert blocks[0, 0] == 0  # a copy: the input is left as it was
