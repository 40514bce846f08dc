"""The ELMo model's contract: outputs, statelessness, explicit state, shapes, serialisation."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from support.batches import check_batches
from support.layer_checks import MIXED_POLICIES, skip_if_onednn_isa_capped
from support.numerics import assert_half_precision, assert_reordered, assert_same
from support.paths import FIXTURES

import elmo_tf
from elmo_tf.config import ElmoConfig

SENTENCES = [
    ["The", "quick", "brown", "fox", "."],
    [],
    ["Zürich", "😀", "naïve"],
    ["a"] * 12,
    ["Hello"],
]


def test_output_keys_and_shapes(tiny_model):
    out = tiny_model.embed(SENTENCES, batch_size=2)
    assert list(out) == [
        "word_emb",
        "lstm_outputs1",
        "lstm_outputs2",
        "elmo",
        "default",
        "sequence_len",
    ]
    assert out["word_emb"].shape == (5, 12, 16)
    for key in ("lstm_outputs1", "lstm_outputs2", "elmo"):
        assert out[key].shape == (5, 12, 32) and out[key].dtype == np.float32
    assert out["default"].shape == (5, 32)
    assert out["sequence_len"].tolist() == [5, 0, 3, 12, 1]


def test_padding_and_empty_sentence_are_zero(tiny_model):
    out = tiny_model.embed(SENTENCES)
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
        assert not out[key][1].any(), key
        assert not out[key][0, 5:].any(), key
        assert np.abs(out[key][0, :5]).min(axis=-1).max() > 0
    assert not out["default"][1].any()


@pytest.mark.numerics
def test_sentence_vectors_do_not_depend_on_the_batch(tiny_model):
    together = tiny_model.embed(SENTENCES, batch_size=5)
    for i, sentence in enumerate(SENTENCES):
        alone = tiny_model.embed([sentence])
        n = len(sentence)
        for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
            assert_reordered(alone[key][0, :n], together[key][i, :n])
        assert_reordered(alone["default"][0], together["default"][i])
    # batch_size and order change nothing either
    reordered = tiny_model.embed(SENTENCES[::-1], batch_size=1)
    assert_reordered(reordered["elmo"][::-1], together["elmo"])


@pytest.mark.numerics
def test_call_equals_embed(tiny_model):
    out = tiny_model(elmo_tf.batch_to_ids(SENTENCES))
    embedded = tiny_model.embed(SENTENCES)
    for key, value in embedded.items():
        assert_reordered(out[key].numpy(), value, err_msg=key)


@pytest.mark.numerics
def test_token_cache_changes_nothing(tiny_model):
    sentences = SENTENCES * 3
    cached = tiny_model.embed(sentences, batch_size=2, token_cache_size=4)
    uncached = tiny_model.embed(sentences, batch_size=2, token_cache_size=0)
    for key in cached:
        assert_reordered(cached[key], uncached[key])


@pytest.mark.numerics
def test_token_cache_lives_with_the_model(tiny_files):
    model = elmo_tf.load_pretrained(*tiny_files)
    first = model.embed(SENTENCES)
    cache = model.token_cache
    distinct = len({t for s in SENTENCES for t in s}) + 2  # and <S>, </S>
    assert len(cache) == distinct and cache.misses == distinct and cache.hits == 0
    again = model.embed(SENTENCES[::-1], batch_size=2)  # another call, other batches
    assert cache.hits >= distinct and cache.misses == distinct
    for key in first:
        assert_reordered(again[key][::-1], first[key])
    # the same batches, served from the cache: the same arithmetic, bitwise
    assert_same(model.embed(SENTENCES)["elmo"], first["elmo"])


@pytest.mark.numerics
def test_token_cache_never_serves_vectors_of_changed_weights(tiny_files):
    model = elmo_tf.load_pretrained(*tiny_files)
    reference = elmo_tf.load_pretrained(*tiny_files)
    model.embed(SENTENCES)
    encoder = model.character_encoder
    changes = {
        "assign": lambda: encoder.weights[0].assign(encoder.weights[0].numpy() * 1.5),
        "set_weights": lambda: encoder.set_weights(
            [w * 0.9 for w in reference.character_encoder.get_weights()]
        ),
        "optimizer step": lambda: keras.optimizers.SGD(0.5).apply_gradients(
            [(tf.ones_like(w.value), w) for w in encoder.trainable_weights]
        ),
        "restore": lambda: model.set_weights(reference.get_weights()),
    }
    for name, change in changes.items():
        change()
        reference.set_weights(model.get_weights())
        got = model.embed(SENTENCES)
        want = reference.embed(SENTENCES, token_cache_size=0)
        assert_same(got["word_emb"], want["word_emb"], err_msg=name)
        assert_same(got["elmo"], want["elmo"], err_msg=name)


@pytest.mark.numerics
def test_token_cache_is_shared_by_concurrent_callers(tiny_files):
    import concurrent.futures

    model = elmo_tf.load_pretrained(*tiny_files)
    batches = [SENTENCES[i:] + SENTENCES[:i] for i in range(len(SENTENCES))] * 3
    expected = [model.embed(b, token_cache_size=0)["elmo"] for b in batches]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda b: model.embed(b)["elmo"], batches))
    for got, want in zip(results, expected):
        assert_reordered(got, want)
    assert len(model.token_cache) == len({t for s in SENTENCES for t in s}) + 2


@pytest.mark.numerics
def test_dedupe_changes_nothing(tiny_files):
    plain = elmo_tf.load_pretrained(*tiny_files, dedupe_tokens=False)
    deduped = elmo_tf.load_pretrained(*tiny_files, dedupe_tokens=True)
    a, b = plain.embed(SENTENCES), deduped.embed(SENTENCES)
    for key in a:
        assert_reordered(a[key], b[key])


def test_empty_inputs(tiny_model):
    out = tiny_model.embed([])
    assert out["elmo"].shape == (0, 0, 32) and out["default"].shape == (0, 32)
    out = tiny_model.embed([[], []])
    assert out["elmo"].shape == (2, 0, 32) and not out["default"].any()
    assert out["sequence_len"].tolist() == [0, 0]
    compiled = tf.function(tiny_model)  # the graph path of the SavedModel signatures
    for shape in ([0, 0, 50], [2, 0, 50], [0, 3, 50]):
        out = compiled(np.zeros(shape, np.int32))
        assert out["elmo"].shape == (shape[0], shape[1], 32), shape
        assert out["default"].shape == (shape[0], 32), shape


def _assert_traced_once(model):
    """Every compiled function of the embed path traced once at most, whatever the batches
    (calls of few rows run in their own graph, ``lstm_layout.SMALL_BATCH_ROWS``)."""
    calls = model.embedder.calls  # TensorFlowCalls
    counts = [f.experimental_get_tracing_count() for f in
              (calls._contextualize, calls._contextualize_small, calls._encode)]  # fmt: skip
    assert counts[2] == 1 and max(counts[:2]) == 1 and min(counts[:2]) >= 0, counts


def test_no_retracing_across_batch_shapes(tiny_files):
    model = elmo_tf.load_pretrained(*tiny_files)
    for batch in ([["a"]], [["a", "b", "c"], ["d"]], SENTENCES, [[]]):
        model.embed(batch, batch_size=2)
    _assert_traced_once(model)


@pytest.mark.parametrize("bad", [-1, -300, 262, 100_000])
def test_character_ids_out_of_range_are_refused(tiny_model, bad):
    """A negative id is not read from the table's end (keras.ops.take's NumPy rule): a
    direct call names it, a traced call fails in the lookup, as an id past the table does."""
    ids = np.array(elmo_tf.batch_to_ids([["a", "b"]]))
    ids[0, 1, 3] = bad
    with pytest.raises(ValueError, match=f"character ids from 0 to 261 .*, got {bad}"):
        tiny_model(ids)
    traced = tf.function(lambda x: tiny_model(x)["elmo"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="is not in"):
        traced(ids)


@pytest.mark.numerics
def test_character_ids_of_another_shape_or_kind_are_refused(tiny_model):
    """A direct call names a wrong shape, text, or values that are not whole numbers (none is
    truncated, none fails in TensorFlow's words); whole floats are ids."""
    ids = np.array(elmo_tf.batch_to_ids([["a", "b"]]))
    cases = [
        (ids[..., :49], r"shape \(batch, tokens, 50\) .*, got shape \(1, 2, 49\)"),
        (ids[0], r"shape \(batch, tokens, 50\) .*, got shape \(2, 50\)"),
        (np.where(ids > 0, ids + 0.7, 0.0), "must be whole numbers .*, got 259.7"),
        (np.full(ids.shape, np.nan), "must be whole numbers .*, got nan"),
        (np.full(ids.shape, "a"), "must be integer character ids"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message):
            tiny_model(bad)
    np.testing.assert_array_equal(
        tiny_model(ids.astype(np.float64))["elmo"], tiny_model(ids)["elmo"]
    )
    with pytest.raises(ValueError, match=r"shape \(batch, tokens, 50\)"):
        tiny_model(keras.Input(shape=(None, 49), dtype="int32"))  # symbolic: its static shape


@pytest.mark.numerics
def test_explicit_state_round_trip(tiny_model):
    first, second = SENTENCES[:3], SENTENCES[2:]
    out, state = tiny_model.embed(first, return_state=True)
    assert state.cell.shape == (3, 2, 2, 32) and state.hidden.shape == (3, 2, 2, 16)
    assert state.cell[1].any()  # an empty sentence still reads <S> and </S>
    zero = tiny_model.embed(first, initial_state=tiny_model.zero_state(3))
    assert_reordered(zero["elmo"], out["elmo"])
    carried = tiny_model.embed(second, initial_state=state)
    fresh = tiny_model.embed(second)
    assert np.abs(carried["elmo"] - fresh["elmo"]).max() > 1e-3
    # the state of each row is what that row alone would carry
    _, alone = tiny_model.embed([first[2]], return_state=True)
    assert_reordered(alone.hidden[0], state.hidden[2])


def test_bad_state_is_named(tiny_model):
    with pytest.raises(ValueError, match=r"initial_state.cell has shape \(2, 2, 2, 32\)"):
        tiny_model.embed(SENTENCES[:3], initial_state=tiny_model.zero_state(2))
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        tiny_model.embed(SENTENCES, batch_size=0)
    with pytest.raises(TypeError, match="sentence 0 is a single string.*list of tokens"):
        tiny_model.embed(["one string per sentence"])
    with pytest.raises(TypeError, match=r"sentences is one string \('The bank closed \.'\)"):
        tiny_model.embed("The bank closed .")
    with pytest.raises(TypeError, match="sentences is one string"):
        elmo_tf.batch_to_ids("The bank closed .")


# Lengths 20, 12, 9, 7, 5, 5, 3, 2, 1, 1, 0: with batch_size=4 and a budget of 16 padded tokens
# the batches are [20] (over budget, alone), [12], [9], [7, 5], [5, 3, 2], [1, 1, 0].
LONG_SENTENCES = [
    *SENTENCES,
    [f"w{i}" for i in range(20)],
    ["b"] * 7,
    ["c", "d"],
    ["Zürich", "and", "the", "lake", "."],
    ["Hi"],
    ["The", "fox", "again", "and", "again", "and", "again", ".", "!"],
]


@pytest.mark.numerics
def test_token_budget_changes_nothing_and_does_not_retrace(tiny_files):
    model = elmo_tf.load_pretrained(*tiny_files)
    lengths = [len(s) for s in LONG_SENTENCES]
    seen = [indices for indices, _ in model.embed_batches(LONG_SENTENCES, 4, max_batch_tokens=16)]
    check_batches(seen, lengths, 4, 16)
    assert [len(indices) for indices in seen] == [1, 1, 1, 2, 3, 3]
    budgeted = model.embed(LONG_SENTENCES, batch_size=4, max_batch_tokens=16)
    assert_same(budgeted["sequence_len"], np.array(lengths, np.int32))
    for tiny_budget in (1, 5):  # every batch a single sentence; a mix
        other = model.embed(LONG_SENTENCES, batch_size=4, max_batch_tokens=tiny_budget)
        for key, value in budgeted.items():
            assert_reordered(other[key], value, err_msg=key)
    for no_budget in (None, 0):
        plain = model.embed(LONG_SENTENCES, batch_size=4, max_batch_tokens=no_budget)
        for key, value in budgeted.items():
            assert plain[key].shape == value.shape, key
            assert_reordered(plain[key], value, err_msg=key)
    _assert_traced_once(model)
    with pytest.raises(ValueError, match="max_batch_tokens"):
        model.embed(LONG_SENTENCES, max_batch_tokens=-3)


@pytest.mark.numerics
def test_token_budget_with_explicit_state(tiny_model):
    _, state = tiny_model.embed(LONG_SENTENCES[::-1], return_state=True)  # a non-zero state
    results = [
        tiny_model.embed(
            LONG_SENTENCES,
            batch_size=4,
            initial_state=state,
            return_state=True,
            max_batch_tokens=budget,
        )
        for budget in (None, 16, 1)
    ]
    (plain, plain_state), budgeted = results[0], results[1:]
    assert np.abs(plain["elmo"] - tiny_model.embed(LONG_SENTENCES)["elmo"]).max() > 1e-3
    for out, out_state in budgeted:
        for key, value in plain.items():
            assert_reordered(out[key], value, err_msg=key)
        assert_reordered(out_state.cell, plain_state.cell)
        assert_reordered(out_state.hidden, plain_state.hidden)
    # return_state alone (a zero initial state) splits the rows the same way
    _, fresh = tiny_model.embed(LONG_SENTENCES, batch_size=4, return_state=True)
    _, fresh_budgeted = tiny_model.embed(
        LONG_SENTENCES, batch_size=4, return_state=True, max_batch_tokens=1
    )
    assert_reordered(fresh_budgeted.hidden, fresh.hidden)
    assert_reordered(fresh_budgeted.cell, fresh.cell)


def test_several_scalar_mixes_and_layer_norm(tiny_files):
    model = elmo_tf.load_pretrained(*tiny_files, num_output_representations=2, do_layer_norm=True)
    model.scalar_mixes[1].scalar_weights.assign([5.0, -5.0, -5.0])
    out = model.embed(SENTENCES[:1])
    assert "elmo_1" in out and out["elmo_1"].shape == out["elmo"].shape
    assert np.abs(out["elmo"] - out["elmo_1"]).max() > 1e-2


@pytest.mark.parametrize(
    "count, message",
    [
        (0, "must be an integer from 1 to 64, got 0"),
        (-1, "must be an integer from 1 to 64, got -1"),
        (65, "must be an integer from 1 to 64, got 65"),
        (2.0, "must be an integer from 1 to 64, got 2.0"),
        (True, "must be an integer from 1 to 64, got True"),
    ],
)
def test_a_number_of_output_representations_outside_1_to_64_is_refused(tiny_model, count, message):
    """No mix at all (0) has no ``elmo`` output to give: refused before anything is built, as
    are counts past the bound and numbers that are not integers."""
    with pytest.raises(ValueError, match=f"num_output_representations {message}"):
        elmo_tf.ELMo(tiny_model.config, num_output_representations=count)


def test_gradients_reach_every_weight(tiny_files):
    model = elmo_tf.load_pretrained(*tiny_files, dropout=0.5)
    ids = elmo_tf.batch_to_ids(SENTENCES)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(ids, training=True)["elmo"] ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)
    assert all(float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)


@pytest.mark.numerics
def test_get_config_and_keras_save_round_trip(tiny_model, tmp_path):
    clone = elmo_tf.ELMo.from_config(tiny_model.get_config())
    assert clone.config == tiny_model.config
    path = tmp_path / "elmo.keras"
    tiny_model.save(path)
    restored = keras.models.load_model(path)
    ids = elmo_tf.batch_to_ids(SENTENCES)
    assert_same(restored(ids)["elmo"], tiny_model(ids)["elmo"])


@pytest.mark.numerics
@skip_if_onednn_isa_capped
@pytest.mark.parametrize("policy", MIXED_POLICIES)
def test_mixed_precision_call_and_embed(tiny_files, policy):
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    kwargs = {"do_layer_norm": True, "num_output_representations": 2}
    full = elmo_tf.load_pretrained(*tiny_files, **kwargs)
    half = elmo_tf.load_pretrained(*tiny_files, dtype=policy, **kwargs)
    assert {layer.dtype_policy.name for layer in half._flatten_layers()} == {policy}
    assert {weight.dtype for weight in half.weights} == {"float32"}
    ids = elmo_tf.batch_to_ids(SENTENCES)
    called, expected_called = half(ids), full(ids)
    # batch_size=2 puts the empty sentence in a batch of its own: every position masked, so
    # the layer norm's variance is 0 and only its epsilon keeps the mix finite. (The layer
    # norm's moments span a batch, so embed is compared with embed, call with call.)
    embedded, state = half.embed(SENTENCES, batch_size=2, return_state=True)
    expected, expected_state = full.embed(SENTENCES, batch_size=2, return_state=True)
    for key, value in expected.items():
        if key == "sequence_len":
            assert_same(called[key], value)
            assert_same(embedded[key], value)
            continue
        assert called[key].dtype == compute_dtype, key
        assert embedded[key].dtype == np.float32, key
        pairs = [
            (tf.cast(called[key], tf.float32).numpy(), expected_called[key].numpy()),
            (embedded[key], value),
        ]
        for actual, reference in pairs:
            assert np.isfinite(actual).all(), key
            assert_half_precision(actual, reference, compute_dtype, err_msg=key)
    for actual, value in zip(state, expected_state):
        assert actual.dtype == np.float32
        assert_half_precision(actual, value, compute_dtype)
    # the state goes back in (float32 on the host, the compute dtype inside)
    carried = half.embed(SENTENCES[::-1], initial_state=state)["elmo"]
    assert_half_precision(
        carried, full.embed(SENTENCES[::-1], initial_state=expected_state)["elmo"], compute_dtype
    )


@pytest.mark.numerics
@pytest.mark.parametrize(
    "frozen", [("character_encoder", "bilstm"), ("character_encoder",), ("bilstm",)]
)
def test_frozen_parts_change_no_gradient(tiny_files, frozen, monkeypatch):
    model = elmo_tf.load_pretrained(*tiny_files)
    for name in frozen:
        getattr(model, name).trainable = False
    ids = elmo_tf.batch_to_ids(SENTENCES)

    def gradients():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(ids)["elmo"] ** 2)
        return tape.gradient(loss, model.trainable_weights)

    cut = gradients()
    monkeypatch.setattr(type(model), "_encoder_frozen", lambda self: False)  # nothing cut
    whole = gradients()
    assert len(cut) == len(model.trainable_weights) > 0
    for weight, a, b in zip(model.trainable_weights, cut, whole, strict=True):
        assert a is not None, weight.path
        np.testing.assert_array_equal(tf.convert_to_tensor(a), tf.convert_to_tensor(b), weight.path)


def _while_loops(concrete):
    return sum(op.type in ("While", "StatelessWhile") for op in concrete.graph.get_operations())


def test_frozen_elmo_traces_no_backward_lstm(tiny_files):
    """A first fit with ELMo frozen (ElmoLayer's default) traces no gradient of the LSTM loops."""
    model = elmo_tf.load_pretrained(*tiny_files)
    elmo_tf.models.elmo.set_fine_tuning(model, "mix")
    spec = tf.TensorSpec([None, None, 50], tf.int32)
    forward = tf.function(lambda ids: model(ids)["elmo"]).get_concrete_function(spec)

    @tf.function
    def step(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(ids)["elmo"] ** 2)
        return tape.gradient(loss, model.trainable_weights)

    assert _while_loops(forward) > 0
    assert _while_loops(step.get_concrete_function(spec)) == _while_loops(forward)


def test_parameter_count_matches_the_model(tiny_model):
    table = elmo_tf.formats.weight_file.weight_table(tiny_model)
    assert tiny_model.config.parameter_count == sum(int(e.variable.numpy().size) for e in table)
    original = FIXTURES / "official_options" / "elmo_2x4096_512_2048cnn_2xhighway_options.json"
    assert ElmoConfig.from_file(original).parameter_count == 93_600_864  # within the defaults
