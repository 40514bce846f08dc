"""The model on the Keras backend this process runs (``KERAS_BACKEND``): the suite runs these
on TensorFlow, and CI runs them again on JAX (and on PyTorch where it is installed), with the
layer and golden tests (``tests/test_layers.py``, ``tests/test_golden_allennlp.py``).

Every check here holds on each backend by itself; test_backends.py compares the backends.
"""

import json
import zipfile

import keras
import numpy as np
import pytest
from support.layer_checks import MIXED_POLICIES, skip_if_onednn_isa_capped
from support.numerics import assert_half_precision, assert_reordered, assert_same, to_numpy
from support.paths import ROOT, TINY

import elmo_tf
from elmo_tf import backend, precision

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


# The bundled model's bfloat16 fidelity against its float32 run (elmo_tf.probes.fidelity): per
# token cosine over the probe set's 72 sentences and examples/sentences.txt. Measured on an AMD
# EPYC Zen 4 (AVX-512 BF16), TensorFlow and PyTorch alike: mean 0.99998 and 1st percentile
# 0.99995 for every key; the bounds leave 20x in 1 - cosine. A kernel off by a coarse rounding
# (the control below) falls far below them.
BFLOAT16_COS_MEAN, BFLOAT16_COS_P1 = 0.9995, 0.999


def _fidelity_sentences():
    from elmo_tf.probes import word_senses

    with open(ROOT / "examples" / "sentences.txt", encoding="utf-8") as f:
        examples = [line.split() for line in f if line.split()]
    return [list(e.tokens) for e in word_senses.load_examples()] + examples


@skip_if_onednn_isa_capped
@pytest.mark.numerics
@pytest.mark.skipif(
    not precision.native_bf16(backend.name()), reason="this CPU has no native bfloat16"
)
def test_bfloat16_fidelity_of_the_bundled_model():
    from elmo_tf.probes import fidelity

    sentences = _fidelity_sentences()
    exact = elmo_tf.ELMo.from_preset("sotu")
    approx = elmo_tf.ELMo.from_preset("sotu", precision="bfloat16")
    assert approx.dtype_policy.name == "bfloat16"
    assert {w.dtype for w in approx.weights} == {"bfloat16"}
    # The same numbers as Keras's mixed_bfloat16 (which casts each float32 weight first).
    mixed = elmo_tf.ELMo.from_preset("sotu", dtype="mixed_bfloat16").embed(sentences[:8])
    assert_same(approx.embed(sentences[:8])["elmo"], mixed["elmo"])
    reference = exact.embed(sentences)
    table = fidelity.compare(reference, approx.embed(sentences))
    assert sorted(table) == ["elmo", "lstm_outputs1", "lstm_outputs2", "word_emb"]
    for key, row in table.items():
        assert row.cos_mean >= BFLOAT16_COS_MEAN and row.cos_p1 >= BFLOAT16_COS_P1, (key, row)
        assert 0 < row.max_abs < 0.05 * row.scale, (key, row)

    # The control: the top LSTM layer's kernels rounded to 9 levels each (a quantisation whose
    # scale is off), every other weight float32, fails the bounds.
    for cell in (exact.bilstm.forward_cells[1], exact.bilstm.backward_cells[1]):
        kernel = to_numpy(cell.kernel.value)
        step = np.abs(kernel).max() / 4
        cell.kernel.assign(np.round(kernel / step) * step)
    broken = fidelity.compare(reference, exact.embed(sentences))["elmo"]
    assert broken.cos_p1 < BFLOAT16_COS_P1 and broken.cos_mean < BFLOAT16_COS_MEAN


def test_precision_is_checked_before_the_model_is_built():
    with pytest.raises(ValueError, match="pass precision or dtype, not both"):
        _model(precision="bfloat16", dtype="float32")
    with pytest.raises(precision.PrecisionError, match="int8 runs through an export"):
        _model(precision="int8")
    assert _model(precision="float32").dtype_policy.name == "float32"


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


@pytest.mark.parametrize("bad", [2**32 + 73, 2**40, 2**31 + 5, 2**63 - 1])
@pytest.mark.parametrize("dtype", ["int64", "uint64", "float64"])
def test_an_id_past_32_bits_is_refused_as_given_never_wrapped(bad, dtype):
    """Checked before any conversion (JAX made int64 int32 first: 2**32 + 73 embedded as 73,
    2**40 as padding), and named as the caller wrote it (it was printed as 4.29497e+09)."""
    if dtype == "float64" and bad > 2**53:
        bad = 2**53 + 2  # a float64 holds it exactly
    model = _model()
    layer = elmo_tf.ElmoLayer.from_model(model, output_key="elmo")
    ids = elmo_tf.batch_to_ids([["a", "b"]]).astype(dtype)
    ids[0, 1, 3] = bad
    message = rf"from 0 to 261 \(elmo_tf.batch_to_ids makes them\), got {bad}$"
    for call in (model, layer):
        for given in (ids, ids.tolist(), {"char_ids": ids}):
            if call is layer and isinstance(given, dict):
                continue
            with pytest.raises(ValueError, match=message):
                call(given)


def test_ids_as_a_list_are_ids_and_text_is_refused():
    model = _model()
    ids = elmo_tf.batch_to_ids(SENTENCES)
    assert_same(to_numpy(model(ids.tolist())["elmo"]), to_numpy(model(ids)["elmo"]))
    for text in (ids.astype(str), ids.astype(bytes), ids.astype(object)):
        with pytest.raises(ValueError, match="must be integer character ids .*, got"):
            model(text)
    with pytest.raises(ValueError, match="got a ragged nested list"):
        model([[[1] * 50], [[1] * 50, [1] * 50]])
    with pytest.raises(ValueError, match=r"must be whole numbers .*, got 2\.5$"):
        model(np.where(ids > 0, 2.5, 0.0))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda m: m.embed(None), TypeError, "sentences must be a list of sentences, each a"),
        (lambda m: m.embed([None]), TypeError, "sentence 0 must be a list of tokens, got None"),
        (lambda m: m.embed(5), TypeError, "sentences must be a list of sentences, .*got int"),
        (
            lambda m: elmo_tf.ELMo.from_preset(None),
            TypeError,
            r"name_or_dir must be a model name \(.*sotu.*\) or a model directory, got NoneType",
        ),
        (
            lambda m: m.embed([["fine", "a\udcffb"]]),
            ValueError,
            r"a token must be Unicode text, got 'a\\udcffb', which holds a lone surrogate "
            "U\\+DCFF at character 2",
        ),
        (
            lambda m: elmo_tf.batch_to_ids([["\ud800"]]),
            ValueError,
            "holds a lone surrogate U\\+D800 at character 1",
        ),
    ],
)
def test_a_wrong_argument_is_named_in_one_line(call, error, message):
    with pytest.raises(error, match=message) as info:
        call(_model())
    assert "\n" not in str(info.value)


def _saved_layer(path, damage=None):
    """A classifier around ``ElmoLayer`` (tiny model) saved to ``path``; ``damage(layer)``
    first."""
    layer = elmo_tf.ElmoLayer.from_model(_model(), output_key="elmo")
    if damage is not None:
        damage(layer)
    inputs = keras.Input(shape=(None, 50), dtype="int32")
    keras.Model(inputs, layer(inputs)).save(path)
    return path


def _nan_at(variable, index=0):
    value = np.array(to_numpy(variable.value))
    value.flat[index] = np.nan
    variable.assign(value)


@pytest.mark.parametrize(
    "where, path",
    [
        # JAX's max-pooling passes over this NaN: the outputs looked finite there
        (lambda elmo: elmo.character_encoder.cnn.weights[0], "char_cnn/kernel_0"),
        (lambda elmo: elmo.character_encoder.char_embedding.weights[0], "char_embedding/emb"),
        (lambda elmo: elmo.bilstm.weights[2], "bilstm/forward_0/projection_kernel"),
        (lambda elmo: elmo.scalar_mixes[0].gamma, "scalar_mix_0/gamma"),
    ],
)
def test_a_keras_file_with_nan_weights_is_refused_on_load(where, path, tmp_path):
    saved = _saved_layer(tmp_path / "nan.keras", lambda layer: _nan_at(where(layer.elmo)))
    with pytest.raises(ValueError, match=f"the saved weight elmo/.*{path}.* holds NaN or inf"):
        keras.models.load_model(saved)
    model = _model()
    _nan_at(where(model))
    model.save(tmp_path / "elmo.keras")
    with pytest.raises(ValueError, match=f"{path}.* holds NaN or inf"):
        keras.models.load_model(tmp_path / "elmo.keras")


def test_a_keras_file_with_an_unknown_trainable_is_refused(tmp_path):
    """The elmo_config's ``trainable`` was ignored when ``fine_tune`` was set (always, in a
    saved file): an unknown value loaded as whatever fine_tune said."""
    saved = _saved_layer(tmp_path / "ok.keras")
    damaged = tmp_path / "trainable.keras"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(damaged, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                (layer,) = [x for x in config["config"]["layers"] if x["class_name"] == "ElmoLayer"]
                layer["config"]["elmo_config"]["trainable"] = "everything"
                data = json.dumps(config).encode()
            target.writestr(item, data)
    with pytest.raises(ValueError, match="trainable must be one of .*, got 'everything'"):
        keras.models.load_model(damaged)
    with pytest.raises(ValueError, match="fine_tune must be one of .*, got 'some'"):
        elmo_tf.ElmoLayer.from_model(_model(), fine_tune="some")


@pytest.mark.skipif(backend.name() != "jax", reason="the compiled shapes of JAX's embed path")
def test_jax_compiles_a_few_bucketed_shapes_with_the_unbucketed_numbers(monkeypatch):
    """One call per sentence of 40 lengths compiles 3 shapes (it compiled one per multiple of
    8 and kept each: 37.6 s and 270 MB for 40 lengths); a row's values are those of a call of
    exactly its shape (the padding is masked)."""
    from elmo_tf.models import compiled_calls

    sentences = [[f"w{i % 7}" for i in range(n)] for n in range(1, 41)]
    model = _model()
    one_by_one = [model.embed([s]) for s in sentences]
    shapes = model.embedder.calls.compiled_shapes()["contextualize"]
    assert sorted(steps for (rows, steps, _), _lengths in shapes) == [16, 32, 64]
    assert {rows for (rows, _, _), _lengths in shapes} == {1}
    together = model.embed(sentences)  # 40 rows, padded to 64

    monkeypatch.setattr(compiled_calls, "position_bucket", lambda n: n)
    monkeypatch.setattr(compiled_calls, "_power_of_two", lambda n: n)
    exact = _model()
    unbucketed = exact.embed(sentences)
    assert {s[0] for s in exact.embedder.calls.compiled_shapes()["contextualize"]} == {(40, 42, 16)}
    for key, value in unbucketed.items():
        assert_reordered(together[key], value, err_msg=key)
        for i, alone in enumerate(one_by_one):
            n = len(sentences[i])
            expected = value[i, :n] if value.ndim == 3 else value[i]
            got = alone[key][0, :n] if value.ndim == 3 else alone[key][0]
            assert_reordered(got, expected, err_msg=f"{key} of sentence {i}")


@pytest.mark.skipif(backend.name() != "jax", reason="the compiled shapes of JAX's embed path")
def test_jax_keeps_a_bounded_number_of_compiled_shapes():
    import jax

    from elmo_tf.models.compiled_calls import CompiledShapes

    made = []

    def compile_one():
        made.append(jax.jit(lambda values, x: x * values))
        return made[-1]

    compiled = CompiledShapes(compile_one, max_shapes=2)
    for n in (1, 2, 3, 1, 3):
        np.testing.assert_array_equal(compiled(2.0, np.ones(n, np.float32)), np.full(n, 2.0))
    # 1, 2, 3 compiled; 1 dropped when 3 came, compiled again; 3 reused
    assert len(made) == 4 and compiled.shapes() == [((1,),), ((3,),)]
