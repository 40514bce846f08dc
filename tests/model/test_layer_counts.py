"""Models of 1 and 3 LSTM layers: embed's keys, shapes and mix of every layer."""

import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_reordered

import elmo_tf
from elmo_tf.models import output_keys

SENTENCES = [["The", "quick", "fox", "."], [], ["Zürich", "naïve"]]


P = 16  # the tiny model's projection size


@pytest.fixture(scope="module")
def model(model_of_n_layers):
    return model_of_n_layers


def _n_layers(model):
    return model.config.n_lstm_layers


@pytest.mark.numerics
def test_embed_keys_shapes_and_mix_of_every_layer(model):
    n_layers = _n_layers(model)
    out = model.embed(SENTENCES)
    assert tuple(out) == output_keys(n_layers)
    assert out["word_emb"].shape == (3, 4, P)
    for k in range(1, n_layers + 1):
        assert out[f"lstm_outputs{k}"].shape == (3, 4, 2 * P)
    assert out["elmo"].shape == (3, 4, 2 * P)
    assert out["default"].shape == (3, 2 * P)
    assert out["sequence_len"].tolist() == [4, 0, 2]
    assert model.output_shapes(3, 4) == {key: value.shape for key, value in out.items()}

    # ScalarMix mixes L + 1 layers: the token layer (word_emb twice) and every LSTM layer.
    mix = model.scalar_mixes[0]
    weights = tf.nn.softmax(mix.scalar_weights).numpy()
    assert weights.shape == (n_layers + 1,)
    layers = [np.concatenate([out["word_emb"]] * 2, axis=-1)]
    layers += [out[f"lstm_outputs{k}"] for k in range(1, n_layers + 1)]
    mixed = mix.gamma.numpy() * sum(w * layer for w, layer in zip(weights, layers))
    assert_reordered(out["elmo"], mixed)

    called = model(elmo_tf.batch_to_ids(SENTENCES))
    assert tuple(called) == output_keys(n_layers)
