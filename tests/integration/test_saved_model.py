"""The exported SavedModel: signatures, TF1/TF Serving-style loading, reuse from Keras."""

import os
import re
import shutil
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from support.numerics import (
    assert_half_precision,
    assert_reordered,
    assert_reordered_dict,
    assert_same,
)

import elmo_tf
from elmo_tf import precision
from elmo_tf.cli.main import main
from elmo_tf.export.saved_model import export_saved_model
from elmo_tf.models import output_keys

OUTPUT_KEYS = output_keys(2)  # the tiny model has two LSTM layers
MIX_WEIGHTS = [0.5, -0.25, 1.0]
L2 = 0.01


@pytest.fixture(scope="module")
def exported(tiny_files, tmp_path_factory):
    """The tiny model with non-trivial mix weights, exported through the CLI's code path."""
    from elmo_tf.export.saved_model import export_saved_model

    model = elmo_tf.load_pretrained(*tiny_files, dropout=0.5)
    model.scalar_mixes[0].scalar_weights.assign(MIX_WEIGHTS)
    model.scalar_mixes[0].gamma.assign(0.8)
    base = tmp_path_factory.mktemp("exported")
    path = export_saved_model(model, str(base), trainable="mix", l2_coefficient=L2)
    return model, path


@pytest.fixture(scope="module")
def loaded(exported):
    return tf.saved_model.load(exported[1])


def _golden_sentences(golden, batches=("mixed", "with_empty", "special")):
    meta, _ = golden
    return [meta["sentences"][n] for b in batches for n in meta["batches"][b]]


def _padded_tokens(sentences):
    width = max(len(s) for s in sentences)
    return [s + [""] * (width - len(s)) for s in sentences], [len(s) for s in sentences]


def _model_outputs(model, char_ids):
    """The in-memory model's outputs, compiled as the SavedModel's functions are."""
    return {k: v.numpy() for k, v in tf.function(model)(char_ids).items()}


def _assert_outputs_equal(outputs, expected):
    assert sorted(outputs) == sorted(OUTPUT_KEYS)
    assert_reordered_dict(outputs, expected, keys=OUTPUT_KEYS)


def test_layout_and_cli(exported, tiny_files, tmp_path):
    _, path = exported
    assert os.path.basename(path) == "1"
    assert sorted(os.listdir(os.path.dirname(path))) == ["1"]  # no staging directory left
    options, weights = map(str, tiny_files)
    argv = ["export", "saved-model", str(tmp_path), "--options", options, "--weights", weights]
    (tmp_path / "4").mkdir()  # an older version being served
    assert main(argv) == 0  # writes the next version number
    assert main([*argv, "--version", "5"]) == 1  # refuses to overwrite
    assert sorted(os.listdir(tmp_path)) == ["4", "5"]


@pytest.mark.numerics
def test_every_signature_equals_the_model(exported, loaded, golden):
    model, _ = exported
    sentences = _golden_sentences(golden)
    char_ids = elmo_tf.batch_to_ids(sentences)
    expected = _model_outputs(model, char_ids)
    _assert_outputs_equal(loaded.signatures["char_ids"](char_ids=tf.constant(char_ids)), expected)
    tokens, lengths = _padded_tokens(sentences)
    _assert_outputs_equal(
        loaded.signatures["tokens"](tokens=tf.constant(tokens), sequence_len=tf.constant(lengths)),
        expected,
    )
    # Whitespace joining loses empty-string tokens, so compare on sentences without them.
    plain = [s for s in sentences if "" not in s]
    expected = _model_outputs(model, elmo_tf.batch_to_ids(plain))
    joined = tf.constant([" ".join(s) for s in plain])
    _assert_outputs_equal(loaded.signatures["default"](sentences=joined), expected)
    _assert_outputs_equal(loaded.signatures["serving_default"](sentences=joined), expected)


def test_reusable_savedmodel_attributes(exported, loaded):
    model, _ = exported
    assert len(loaded.variables) == len(model.weights)
    assert sorted(v.shape.rank for v in loaded.trainable_variables) == [0, 1]  # gamma, weights
    (penalty,) = loaded.regularization_losses
    assert_reordered(penalty().numpy(), L2 * np.sum(np.square(MIX_WEIGHTS)))
    sentences = tf.constant(["the cat sat", "hello"])
    inference = loaded(sentences, training=False, as_dict=True)["elmo"].numpy()
    np.testing.assert_array_equal(
        loaded(sentences, training=False, as_dict=True)["elmo"].numpy(), inference
    )
    training = loaded(sentences, training=True, as_dict=True)["elmo"].numpy()  # dropout 0.5
    # Called like TF Hub's elmo module, it returns the ``default`` sentence vectors.
    default = loaded(sentences).numpy()
    assert default.shape == (2, 32)
    assert_same(default, loaded(sentences, training=False, as_dict=True)["default"].numpy())
    real = np.array([[True, True, True], [True, False, False]])
    assert (inference[real] != 0).all() and (inference[~real] == 0).all()
    assert 0.3 < (training[real] == 0).mean() < 0.7


def test_tf1_session_loader_like_tf_serving(exported, golden):
    """TF Serving's C++ loader restores variables the way the TF1 loader does."""
    model, path = exported
    sentences = [s for s in _golden_sentences(golden) if "" not in s]
    char_ids = elmo_tf.batch_to_ids(sentences)
    expected = _model_outputs(model, char_ids)
    tokens, lengths = _padded_tokens(sentences)
    feeds = {
        "default": {"sentences": [" ".join(s) for s in sentences]},
        "tokens": {"tokens": tokens, "sequence_len": lengths},
        "char_ids": {"char_ids": char_ids},
    }
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        for name, feed in feeds.items():
            signature = meta_graph.signature_def[name]
            fetches = {k: v.name for k, v in signature.outputs.items()}
            outputs = session.run(fetches, {signature.inputs[k].name: v for k, v in feed.items()})
            _assert_outputs_equal(outputs, expected)


def test_loads_without_tensorflow_text(exported):
    _, path = exported
    script = (
        "import sys; sys.modules['tensorflow_text'] = None\n"
        "import tensorflow as tf\n"
        f"m = tf.saved_model.load({path!r})\n"
        "out = m.signatures['default'](sentences=tf.constant(['Hello world .']))\n"
        "assert 'tensorflow_text' not in sys.modules or sys.modules['tensorflow_text'] is None\n"
        "print(out['elmo'].shape)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "(1, 3, 32)" in result.stdout


def test_saved_model_cli_lists_signatures(exported):
    _, path = exported
    # TensorFlow's script beside this interpreter, else where TensorFlow's environment put it
    # (a virtualenv reusing the system's packages)
    cli = shutil.which("saved_model_cli", path=os.path.dirname(sys.executable)) or shutil.which(
        "saved_model_cli"
    )
    assert cli, "TensorFlow's saved_model_cli is not installed"
    result = subprocess.run(
        [cli, "show", "--all", "--dir", path], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for name in ("default", "tokens", "char_ids", "serving_default"):
        assert f"signature_def['{name}']" in result.stdout
    for key in OUTPUT_KEYS:
        assert f"outputs['{key}']" in result.stdout


def test_bad_input_names_the_input(loaded):
    tokens = loaded.signatures["tokens"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="sequence_len is longer than its row"):
        tokens(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant([3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="sequence_len must not be negative"):
        tokens(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant([-1]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="one entry per row"):
        tokens(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant([1, 2]))
    # The restored functions check dtype and rank against the contract by input name.
    with pytest.raises(TypeError, match="name='sequence_len'"):
        loaded.tokens(tokens=tf.constant([["a"]]), sequence_len=tf.constant([1.0]))
    with pytest.raises(TypeError, match="name='tokens'"):
        loaded.tokens(tokens=tf.constant(["a"]), sequence_len=tf.constant([1]))  # rank 1
    with pytest.raises(TypeError, match="name='sentences'"):
        loaded.default(tf.constant([1, 2]))
    # Through the signature map TF reports the position only, but it never answers.
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a int32 tensor"):
        tokens(tokens=tf.constant([["a"]]), sequence_len=tf.constant([1.0]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"char_ids must be in \[0, 261\]"):
        loaded.signatures["char_ids"](char_ids=tf.fill([1, 2, 50], 262))
    # the model still answers correctly afterwards
    out = tokens(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant([2]))
    assert out["elmo"].shape == (1, 2, 32)


def _classifier_data():
    texts = ["good fine great", "bad awful", "great good", "awful bad bad"] * 4
    labels = [1, 0, 1, 0] * 4
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8)
    return tf.constant(texts), dataset


def test_elmo_layer_fine_tunes_in_functional_and_sequential_models(exported, tmp_path):
    _, path = exported
    texts, dataset = _classifier_data()
    inputs = keras.Input(shape=(), dtype="string")
    elmo_layer = elmo_tf.ElmoLayer(path, output_key="default")
    outputs = keras.layers.Dense(2, activation="softmax")(elmo_layer(inputs))
    model = keras.Model(inputs, outputs)
    assert [tuple(w.shape) for w in elmo_layer.trainable_weights] == [(3,), ()]
    frozen_before = elmo_layer.elmo.bilstm.weights[0].numpy().copy()
    mix_before = elmo_layer.elmo.scalar_mixes[0].scalar_weights.numpy().copy()
    assert_reordered(mix_before, MIX_WEIGHTS)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="sparse_categorical_crossentropy")
    loss_before = model.evaluate(dataset, verbose=0)
    model.fit(dataset, epochs=5, verbose=0)  # the exported dropout (0.5) makes fit's loss noisy
    assert model.evaluate(dataset, verbose=0) < loss_before
    assert np.abs(elmo_layer.elmo.scalar_mixes[0].scalar_weights.numpy() - mix_before).max() > 1e-3
    np.testing.assert_array_equal(elmo_layer.elmo.bilstm.weights[0].numpy(), frozen_before)

    # training=True applies the exported dropout; inference is deterministic
    batch = tf.constant(texts[:2])
    a, b = elmo_layer(batch, training=False), elmo_layer(batch, training=False)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(elmo_layer(batch, training=True), a)

    saved = tmp_path / "classifier.keras"
    model.save(saved)
    restored = keras.models.load_model(saved)
    assert_same(restored(texts), model(texts))

    # A loaded SavedModel object in a Sequential model, every weight trainable (fitting the
    # whole biLM is ElmoLayer's own code, tested on a model directory in test_backend_model.py)
    sequential = keras.Sequential(
        [
            keras.Input(shape=(), dtype="string"),
            elmo_tf.ElmoLayer(tf.saved_model.load(path), fine_tune="all"),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    assert len(sequential.layers[0].trainable_weights) == len(sequential.layers[0].weights)
    assert_same(sequential.layers[0](texts), elmo_tf.ElmoLayer(path)(texts))  # untrained


def test_elmo_layer_rejects_bad_arguments(exported, tmp_path):
    _, path = exported
    with pytest.raises(ValueError, match="output_key must be one of"):
        elmo_tf.ElmoLayer(path, output_key="top")
    with pytest.raises(ValueError, match="fine_tune must be one of"):
        elmo_tf.ElmoLayer(path, fine_tune="some")
    plain = tf.Module()
    plain.v = tf.Variable(1.0)
    tf.saved_model.save(plain, str(tmp_path / "plain"))
    with pytest.raises(ValueError, match="not an elmo-tf SavedModel"):
        elmo_tf.ElmoLayer(str(tmp_path / "plain"))


def test_a_keras_config_never_loads_a_saved_model_it_names(exported, tmp_path, monkeypatch):
    """A .keras file is data: its ElmoLayer config cannot point load_model at a SavedModel
    (which is code) anywhere on the machine, in safe mode or not."""
    import json
    import zipfile

    import keras

    _, path = exported
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, elmo_tf.ElmoLayer(path)(inputs))
    model.save(tmp_path / "good.keras")
    with zipfile.ZipFile(tmp_path / "good.keras") as good:
        members = {name: good.read(name) for name in good.namelist()}
    config = json.loads(members["config.json"])
    (layer,) = [x for x in config["config"]["layers"] if x["class_name"] == "ElmoLayer"]
    layer["config"]["saved_model"] = path  # what a crafted file would hold
    del layer["config"]["elmo_config"]
    members["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(tmp_path / "crafted.keras", "w") as crafted:
        for name, data in members.items():
            crafted.writestr(name, data)
    loaded = []
    monkeypatch.setattr(tf.saved_model, "load", lambda *a, **k: loaded.append(a))
    for safe_mode in (True, False):
        with pytest.raises(Exception, match="never names a SavedModel to load"):
            keras.models.load_model(tmp_path / "crafted.keras", safe_mode=safe_mode)
    assert loaded == []
    keras.models.load_model(tmp_path / "good.keras")  # the file as saved still loads


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("num_output_representations", 100_000, "must be an integer from 1 to 64, got 100000"),
        ("num_output_representations", 0, "must be an integer from 1 to 64, got 0"),
        ("num_output_representations", "2", "must be an integer from 1 to 64, got '2'"),
        ("do_layer_norm", "false", "do_layer_norm must be True or False, got 'false'"),
        ("l2_coefficient", float("nan"), "l2_coefficient must be a finite number >= 0, got nan"),
        ("dropout", 1.5, "dropout must be a finite number >= 0 and < 1, got 1.5"),
        ("options", None, "lacks 'options'"),
    ],
)
def test_a_keras_config_with_illegal_settings_is_refused_naming_them(exported, key, value, message):
    """An ElmoLayer config is read from a .keras file: every setting is checked as ELMo's
    arguments are, before anything is built (100,000 representations built for minutes and
    crashed the process; "false" read as true)."""
    _, path = exported
    config = elmo_tf.ElmoLayer(path).get_config()
    options = config["elmo_config"]["options"]
    if value is None:
        del config["elmo_config"][key]
    else:  # dropout: the layer's own setting, over the exported one
        (config if key == "dropout" else config["elmo_config"])[key] = value
    start = time.monotonic()
    with pytest.raises(ValueError, match=re.escape(message)):
        elmo_tf.ElmoLayer.from_config(config)
    assert time.monotonic() - start < 5
    with pytest.raises(ValueError, match="do_layer_norm must be True or False"):
        elmo_tf.ELMo(elmo_tf.ElmoConfig.from_options(options), do_layer_norm=1)


def test_elmo_layer_takes_the_string_inputs_keras_users_pass(exported):
    _, path = exported
    layer = elmo_tf.ElmoLayer(path, output_key="elmo")
    texts = ["the cat sat", "a dog ran far away", ""]
    expected = layer(tf.constant(texts)).numpy()
    assert expected.shape == (3, 5, 32)
    for form in (
        texts,
        np.array(texts),  # <U18
        np.array(texts, dtype=object),
        np.array([t.encode() for t in texts]),  # |S18
        [[t] for t in texts],  # (B, 1)
    ):
        assert_same(layer(form), expected)

    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, keras.layers.Dense(2)(elmo_tf.ElmoLayer(path)(inputs)))
    model.compile(optimizer="adam", loss="mse")
    labels = np.zeros([3, 2], "float32")
    for x in (np.array(texts, dtype=object), tf.constant(texts)):
        history = model.fit(x, labels, batch_size=2, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        assert model.predict(x, verbose=0).shape == (3, 2)
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(2)
    assert np.isfinite(model.fit(dataset, epochs=1, verbose=0).history["loss"][0])


@pytest.mark.parametrize("l2", [float("inf"), float("nan"), -1.0, True])
def test_a_regularisation_coefficient_that_poisons_the_loss_is_refused(tiny_model, tmp_path, l2):
    # inf or nan made every fine-tuning loss through hub.KerasLayer(trainable=True) NaN.
    with pytest.raises(elmo_tf.errors.ExportError, match="l2_coefficient must be a finite number"):
        export_saved_model(tiny_model, str(tmp_path / "out"), l2_coefficient=l2)
    assert not os.path.exists(tmp_path / "out" / "1")


@pytest.mark.stress
def test_elmo_layer_fine_tunes_the_whole_bilm_in_a_sequential_model(exported):
    """``fine_tune="all"``: fit moves the biLM's own weights too (tracing the whole backward
    pass: the stress tier)."""
    _, path = exported
    _, dataset = _classifier_data()
    layer = elmo_tf.ElmoLayer(tf.saved_model.load(path), fine_tune="all")
    sequential = keras.Sequential(
        [keras.Input(shape=(), dtype="string"), layer, keras.layers.Dense(2, activation="softmax")]
    )
    before = layer.elmo.bilstm.weights[0].numpy().copy()
    sequential.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = sequential.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert np.abs(layer.elmo.bilstm.weights[0].numpy() - before).max() > 0


@pytest.mark.numerics
def test_elmo_layer_takes_the_tokens_signatures_inputs(exported, loaded):
    """``inputs="tokens"``: the ``tokens`` signature's inputs, by name or as the pair, give
    its outputs; a functional model on them fits (TF Hub cannot train through a signature)."""
    _, path = exported
    tokens = [["the", "cat", "sat"], ["hello", "", ""], ["a", "", ""]]
    lengths = [3, 1, 0]
    expected = loaded.signatures["tokens"](
        tokens=tf.constant(tokens), sequence_len=tf.constant(lengths)
    )
    layer = elmo_tf.ElmoLayer(path, output_key="elmo", inputs="tokens")
    assert_reordered(layer({"tokens": tokens, "sequence_len": lengths}), expected["elmo"])
    assert_reordered(layer((np.array(tokens, dtype=object), np.array(lengths))), expected["elmo"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="sequence_len is longer than"):
        layer({"tokens": tokens, "sequence_len": [4, 1, 0]})
    with pytest.raises(ValueError, match='inputs="tokens"\\) takes \\{"tokens"'):
        layer({"tokens": tokens})

    inputs = {
        "tokens": keras.Input(shape=(None,), dtype="string", name="tokens"),
        "sequence_len": keras.Input(shape=(), dtype="int32", name="sequence_len"),
    }
    head = elmo_tf.ElmoLayer(path, output_key="default", inputs="tokens")
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(head(inputs)))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="sparse_categorical_crossentropy")
    data = {"tokens": tf.constant(tokens), "sequence_len": tf.constant(lengths)}
    mix = head.elmo.scalar_mixes[0].scalar_weights.numpy().copy()
    model.fit(data, np.array([1, 0, 1]), epochs=2, verbose=0)
    assert np.abs(head.elmo.scalar_mixes[0].scalar_weights.numpy() - mix).max() > 1e-3


@pytest.mark.numerics
@pytest.mark.skipif(
    not precision.runs("bfloat16", "tensorflow"),
    reason="this CPU has no native bfloat16 (or oneDNN is kept from it)",
)
def test_a_bfloat16_export_computes_in_bfloat16_and_answers_in_float32(
    tiny_files, tiny_model, tmp_path, request
):
    """``export saved-model --precision bfloat16``: bfloat16 variables, float32 signatures;
    TF Serving's loader restores it, and ``elmo-tf serve`` serves it."""
    from elmo_tf.serving.client import embed
    from elmo_tf.serving.server import ModelServer, ServerOptions

    options, weights = tiny_files
    base = tmp_path / "elmo"
    argv = ["export", "saved-model", str(base), "--precision", "bfloat16"]
    assert main([*argv, "--options", str(options), "--weights", str(weights)]) == 0
    path = str(base / "1")
    loaded = tf.saved_model.load(path)
    floats = {v.dtype for v in loaded.variables if v.dtype.is_floating}
    assert floats == {tf.bfloat16}
    assert '"precision": "bfloat16"' in loaded.elmo_config().numpy().decode()
    sentences = [["The", "cat", "sat", "."], ["Zürich", "café"], ["a"]]
    tokens, lengths = _padded_tokens(sentences)
    outputs = loaded.signatures["tokens"](tokens=tf.constant(tokens), sequence_len=lengths)
    expected = tiny_model.embed(sentences)
    for key in OUTPUT_KEYS:
        value = outputs[key]
        assert value.dtype == (tf.int32 if key == "sequence_len" else tf.float32), key
        if key != "sequence_len":
            assert_half_precision(value, expected[key], "bfloat16", err_msg=key)

    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], path).signature_def
        fetch = signature["tokens"].outputs["elmo"].name
        feed = {signature["tokens"].inputs["tokens"].name: tokens}
        feed[signature["tokens"].inputs["sequence_len"].name] = lengths
        # TF Serving's loader runs the graph in a session, whose rewrites round bfloat16
        # otherwise than the function does: the same bound against float32, not the same bits
        assert_half_precision(session.run(fetch, feed), expected["elmo"], "bfloat16")

    server = ModelServer(ServerOptions(str(base), port=0, poll_seconds=0))
    request.addfinalizer(lambda: server.stop(grace=5))
    server.start()
    served = embed(f"127.0.0.1:{server.port}", sentences, "tokens", timeout=30)
    for key in OUTPUT_KEYS:
        assert_same(served[key], outputs[key].numpy())
