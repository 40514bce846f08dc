"""Models of 1 and 3 LSTM layers: embed's keys, shapes and mix of every layer."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_reordered

import elmo_tf
from elmo_tf.models import output_keys

SENTENCES = [["The", "quick", "fox", "."], [], ["Zürich", "naïve"]]


P = 16  # the tiny model's projection size


@pytest.fixture(scope="module", params=[1, 3], ids=["1-layer", "3-layer"])
def model(request, tiny_files, tmp_path_factory):
    """The tiny architecture with ``request.param`` LSTM layers, through its weight file."""
    with open(tiny_files[0], encoding="utf-8") as f:
        options = json.load(f)
    options["lstm"]["n_layers"] = request.param
    directory = tmp_path_factory.mktemp(f"layers{request.param}")
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    keras.utils.set_random_seed(request.param)
    elmo_tf.save_weights(elmo_tf.ELMo(options), directory / "weights.hdf5")
    loaded = elmo_tf.load_pretrained(directory / "options.json", directory / "weights.hdf5")
    assert loaded.config.n_lstm_layers == request.param
    # Unequal mix weights, so the test below sees which layer gets which weight.
    loaded.scalar_mixes[0].scalar_weights.assign(np.linspace(-1.0, 1.0, request.param + 1))
    loaded.scalar_mixes[0].gamma.assign(0.8)
    return loaded


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
