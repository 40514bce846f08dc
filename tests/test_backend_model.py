"""The model on the Keras backend this process runs (``KERAS_BACKEND``): the suite runs these
on TensorFlow, and CI runs them again on JAX (and on PyTorch where it is installed), with the
layer and golden tests (``tests/test_layers.py``, ``tests/test_golden_allennlp.py``).

Every check here holds on each backend by itself; test_backends.py compares the backends.
"""

import json

import keras
import numpy as np
import pytest
from conftest import TINY
from layer_checks import MIXED_POLICIES, skip_if_onednn_isa_capped
from numerics import assert_half_precision, assert_reordered, assert_same, to_numpy

import elmo_tf
from elmo_tf import backend

SENTENCES = [["The", "bank", "closed", "."], ["A", "river", "bank"], ["Hello", "!"], []]


def _model(**kwargs):
    return elmo_tf.load_pretrained(TINY / "options.json", TINY / "weights.hdf5", **kwargs)


def _called(model, sentences, **kwargs):
    """``model``'s call on ``sentences`` as NumPy arrays (``ELMo.call``, not ``embed``)."""
    return {k: to_numpy(v) for k, v in model(elmo_tf.batch_to_ids(sentences), **kwargs).items()}


def test_embed_equals_call():
    """The embed path (host-side cache, compiled calls) computes what the model's call does."""
    model = _model()
    embedded, called = model.embed(SENTENCES), _called(model, SENTENCES)
    assert sorted(embedded) == sorted(called)
    for key, value in called.items():
        assert_reordered(embedded[key], value, err_msg=key)


def test_stateful_chunks_equal_one_pass():
    """bilm-tf's stateful use: the state after a first call carries into the next."""
    model = _model()
    first, state = model.embed([["a", "b", "c"], ["d"]], return_state=True)
    second, after = model.embed([["e", "f"], ["g", "h"]], initial_state=state, return_state=True)
    zero = model.zero_state(2)
    again, again_state = model.embed(
        [["a", "b", "c"], ["d"]], initial_state=zero, return_state=True
    )
    assert_same(again["elmo"], first["elmo"])
    assert_same(again_state.cell, state.cell)
    fresh = model.embed([["e", "f"], ["g", "h"]])
    assert not np.allclose(second["lstm_outputs1"], fresh["lstm_outputs1"], atol=1e-4)
    assert after.cell.shape == (2, 2, 2, 32) and np.abs(after.cell).max() <= 3.0


@pytest.mark.parametrize("layers", [1, 3])
def test_every_number_of_layers(layers, tmp_path):
    with open(TINY / "options.json", encoding="utf-8") as f:
        options = json.load(f)
    options["lstm"]["n_layers"] = layers
    keras.utils.set_random_seed(layers)
    model = elmo_tf.ELMo(options)
    out = model.embed(SENTENCES)
    assert sorted(out) == sorted(elmo_tf.models.output_keys(layers)) or set(out) >= {
        f"lstm_outputs{layers}"
    }
    assert f"lstm_outputs{layers}" in out and f"lstm_outputs{layers + 1}" not in out
    for key, value in _called(model, SENTENCES).items():
        assert_reordered(out[key], value, err_msg=key)


def test_scalar_mixes_and_layer_norm():
    model = _model(num_output_representations=2, do_layer_norm=True)
    model.scalar_mixes[1].scalar_weights.assign([5.0, -5.0, -5.0])
    out = model.embed(SENTENCES[:2])
    assert out["elmo_1"].shape == out["elmo"].shape
    assert np.abs(out["elmo"] - out["elmo_1"]).max() > 1e-2
    for key, value in _called(model, SENTENCES[:2]).items():
        assert_reordered(out[key], value, err_msg=key)


def test_dropout_under_training_only():
    model = _model(dropout=0.5)
    ids = elmo_tf.batch_to_ids(SENTENCES[:2])
    inference = [to_numpy(model(ids)["elmo"]) for _ in range(2)]
    assert_same(inference[0], inference[1])
    trained = to_numpy(model(ids, training=True)["elmo"])
    assert not np.allclose(trained, inference[0])
    zeros = (trained == 0) & (inference[0] != 0)
    assert 0.3 < zeros.sum() / (inference[0] != 0).sum() < 0.7  # about half dropped


@skip_if_onednn_isa_capped
@pytest.mark.parametrize("policy", MIXED_POLICIES)
def test_mixed_precision(policy):
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    full, half = _model(), _model(dtype=policy)
    assert {w.dtype for w in half.weights} == {"float32"}
    embedded, expected = half.embed(SENTENCES[:2]), full.embed(SENTENCES[:2])
    for key in ("word_emb", "lstm_outputs2", "elmo", "default"):
        assert embedded[key].dtype == np.float32
        assert_half_precision(embedded[key], expected[key], compute_dtype, err_msg=key)


def test_keras_file_round_trip(tmp_path):
    model = _model(num_output_representations=2)
    model.scalar_mixes[0].scalar_weights.assign([0.5, -0.25, 1.0])
    path = tmp_path / "elmo.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert_same(_called(restored, SENTENCES)["elmo"], _called(model, SENTENCES)["elmo"])


def test_elmo_layer_fine_tunes_a_classifier(tmp_path):
    """``fit`` of a small classifier on ``ElmoLayer`` (character ids, the mix trained)."""
    texts = [["a", "fine", "film"], ["a", "dull", "film"], ["moving", "!"], ["tedious", "."]]
    ids = elmo_tf.batch_to_ids(texts)
    labels = np.array([1, 0, 1, 0])
    elmo = elmo_tf.ElmoLayer.from_model(_model(dropout=0.1), output_key="default")
    inputs = keras.Input(shape=(None, 50), dtype="int32")
    classifier = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(elmo(inputs)))
    assert [tuple(w.shape) for w in elmo.trainable_weights] == [(3,), ()]
    frozen = elmo.elmo.bilstm.weights[0].numpy().copy()
    mix = elmo.elmo.scalar_mixes[0].scalar_weights.numpy().copy()
    classifier.compile(
        optimizer=keras.optimizers.Adam(0.05), loss="sparse_categorical_crossentropy"
    )
    history = classifier.fit(ids, labels, batch_size=4, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert np.abs(elmo.elmo.scalar_mixes[0].scalar_weights.numpy() - mix).max() > 1e-3
    assert_same(elmo.elmo.bilstm.weights[0].numpy(), frozen)
    path = tmp_path / "classifier.keras"
    classifier.save(path)
    restored = keras.models.load_model(path)
    assert_same(to_numpy(restored(ids)), to_numpy(classifier(ids)))


def test_elmo_layer_from_preset_reads_character_ids():
    layer = elmo_tf.ElmoLayer.from_preset("sotu", output_key="elmo")
    out = to_numpy(layer(elmo_tf.batch_to_ids([["Hello", "world"]])))
    assert out.shape == (1, 2, 256)
    expected = elmo_tf.ELMo.from_preset("sotu").embed([["Hello", "world"]])["elmo"]
    assert_reordered(out, expected)


TENSORFLOW_ONLY = [
    "elmo_tf.export.saved_model",
    "elmo_tf.export.tflite",
    "elmo_tf.serving.server",
    "elmo_tf.beam.pipeline",
    "elmo_tf.training.trainer",
]


@pytest.mark.skipif(backend.is_tensorflow(), reason="TensorFlow runs these")
@pytest.mark.parametrize("module", TENSORFLOW_ONLY)
def test_what_needs_tensorflow_says_so_naming_the_backend(module):
    import importlib

    with pytest.raises(backend.BackendError, match=f"runs Keras on {backend.name()}") as error:
        importlib.import_module(module)
    assert "KERAS_BACKEND=tensorflow" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.skipif(backend.is_tensorflow(), reason="TensorFlow runs these")
def test_sentence_inputs_need_tensorflow():
    with pytest.raises(backend.BackendError, match="KERAS_BACKEND=tensorflow"):
        elmo_tf.ElmoLayer.from_preset("sotu", inputs="sentences")


def test_elmo_layer_from_a_model_directory_on_every_backend():
    """ElmoLayer takes what ELMo.from_preset takes (here a directory with options.json and
    weights.hdf5), on character ids, on every backend."""
    layer = elmo_tf.ElmoLayer(str(TINY), inputs="char_ids", output_key="elmo")
    ids = elmo_tf.batch_to_ids(SENTENCES[:2])
    assert_same(to_numpy(layer(ids)), _called(_model(), SENTENCES[:2])["elmo"])
    with pytest.raises(elmo_tf.errors.PresetError, match="no SavedModel .* did you mean 'sotu'"):
        elmo_tf.ElmoLayer("sotuu", inputs="char_ids")
