"""Models with 1 and 3 LSTM layers: every surface returns ``lstm_outputs1..L`` for L layers.

The tiny fixture's options with ``lstm.n_layers`` changed and random weights, saved and
reloaded through the official weight file, then compared surface by surface with the
in-memory model.
"""

import re

import keras
import pytest
import tensorflow as tf
from support.numerics import assert_reordered, assert_reordered_dict

import elmo_tf
from elmo_tf.export.saved_model import export_saved_model
from elmo_tf.models import output_keys

SENTENCES = [["The", "quick", "fox", "."], [], ["Zürich", "naïve"]]


P = 16  # the tiny model's projection size


SIGNATURES = ("default", "serving_default", "tokens", "char_ids")


@pytest.fixture(scope="module")
def model(model_of_n_layers):
    return model_of_n_layers


@pytest.fixture(scope="module")
def exported(model, tmp_path_factory):
    """(path, loaded SavedModel) of ``model``."""
    path = export_saved_model(model, str(tmp_path_factory.mktemp("exported")))
    return path, tf.saved_model.load(path)


def _n_layers(model):
    return model.config.n_lstm_layers


def _expected(model, char_ids):
    """The in-memory model's outputs, compiled as the exported functions are."""
    return {k: v.numpy() for k, v in tf.function(model)(char_ids).items()}


@pytest.mark.numerics
def test_every_signature_equals_the_model(model, exported):
    _, loaded = exported
    keys = set(output_keys(_n_layers(model)))
    char_ids = elmo_tf.batch_to_ids(SENTENCES)
    expected = _expected(model, char_ids)
    texts = tf.constant([" ".join(s) for s in SENTENCES])
    width = max(len(s) for s in SENTENCES)
    tokens = tf.constant([s + [""] * (width - len(s)) for s in SENTENCES])
    lengths = tf.constant([len(s) for s in SENTENCES])
    inputs = {
        "default": {"sentences": texts},
        "serving_default": {"sentences": texts},
        "tokens": {"tokens": tokens, "sequence_len": lengths},
        "char_ids": {"char_ids": tf.constant(char_ids)},
    }
    assert set(loaded.signatures) == set(SIGNATURES)
    for name in SIGNATURES:
        signature = loaded.signatures[name]
        assert set(signature.structured_outputs) == keys, name
        outputs = {k: v.numpy() for k, v in signature(**inputs[name]).items()}
        assert set(outputs) == keys, name
        assert_reordered_dict(outputs, expected, keys=sorted(keys))
    called = {k: v.numpy() for k, v in loaded(texts, training=False, as_dict=True).items()}
    assert set(called) == keys
    assert_reordered_dict(called, expected, keys=sorted(keys))


@pytest.mark.numerics
def test_elmo_layer_offers_exactly_the_models_keys(model, exported):
    path, _ = exported
    n_layers = _n_layers(model)
    top = f"lstm_outputs{n_layers}"
    inputs = keras.Input(shape=(), dtype="string")
    layer = elmo_tf.ElmoLayer(path, output_key=top)
    assert layer(inputs).shape == (None, None, 2 * P)
    texts = [" ".join(s) for s in SENTENCES]
    expected = _expected(model, elmo_tf.batch_to_ids(SENTENCES))[top]
    assert_reordered(layer(texts), expected)
    assert len(layer.elmo.scalar_mixes[0].scalar_weights.numpy()) == n_layers + 1

    # One layer past the top (lstm_outputs2 for the 1-layer model): the error lists the keys.
    missing = f"lstm_outputs{n_layers + 1}"
    valid = re.escape(", ".join(output_keys(n_layers)))
    with pytest.raises(ValueError, match=rf"one of {valid} for this model .* got '{missing}'$"):
        elmo_tf.ElmoLayer(path, output_key=missing)


@pytest.mark.numerics
def test_tflite_outputs_equal_the_model(model, tmp_path):
    pytest.importorskip("ai_edge_litert")
    from elmo_tf.export.tflite import export_tflite, run_tflite

    path = tmp_path / "elmo.tflite"
    export_tflite(model, path, batch_size=2)  # 3 sentences: two chunks
    char_ids = elmo_tf.batch_to_ids(SENTENCES)
    outputs = run_tflite(path, char_ids)
    keys = output_keys(_n_layers(model))
    assert set(outputs) == set(keys)
    assert_reordered_dict(outputs, _expected(model, char_ids), keys=keys)
