"""Each layer: the standard Keras checks and its formula against numpy."""

import keras
import numpy as np
import pytest
from support.layer_checks import MIXED_POLICIES, run_layer_test, skip_if_onednn_isa_capped
from support.numerics import assert_half_precision, assert_reordered, assert_same, to_numpy

from elmo_tf.layers import (
    BidirectionalLSTMStack,
    CharacterEncoder,
    CharCNN,
    CharEmbedding,
    Highway,
    LSTMCellWithProjection,
    ScalarMix,
)


@pytest.fixture
def rng():
    """The same draws for each test, whichever tests ran before it on its xdist worker."""
    return np.random.default_rng(0)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.numerics
def test_char_embedding(tmp_path, rng):
    ids = rng.integers(0, 262, size=(3, 50)).astype("int32")
    run_layer_test(
        CharEmbedding,
        {"embedding_dim": 4},
        ids,
        (3, 50, 4),
        tmp_path,
        expected_num_trainable_weights=1,
    )


@pytest.mark.numerics
def test_char_cnn_formula(tmp_path, rng):
    x = rng.normal(size=(3, 50, 4)).astype("float32")
    run_layer_test(
        CharCNN,
        {"filters": [[1, 2], [3, 5]]},
        x,
        (3, 7),
        tmp_path,
        expected_num_trainable_weights=4,
    )
    layer = CharCNN([[2, 3]], activation="tanh")
    out = to_numpy(layer(x))
    kernel, bias = layer.kernels[0].numpy(), layer.biases[0].numpy()
    conv = np.stack([np.einsum("nwe,wek->nk", x[:, t : t + 2], kernel) for t in range(49)], 1)
    assert_reordered(out, np.tanh(conv.max(axis=1) + bias))


@pytest.mark.numerics
def test_highway_formula(tmp_path, rng):
    x = rng.normal(size=(5, 6)).astype("float32")
    run_layer_test(Highway, {}, x, (5, 6), tmp_path, expected_num_trainable_weights=4)
    layer = Highway()
    layer(x)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    carry = _sigmoid(x @ layer.carry_kernel.numpy() + layer.carry_bias.numpy())
    transform = np.maximum(x @ layer.transform_kernel.numpy() + layer.transform_bias.numpy(), 0)
    assert_reordered(layer(x), carry * transform + (1 - carry) * x)


@pytest.mark.numerics
def test_character_encoder(tmp_path, rng):
    ids = rng.integers(1, 262, size=(4, 50)).astype("int32")
    kwargs = {
        "filters": [[1, 4], [2, 4]],
        "char_embedding_dim": 3,
        "n_highway": 2,
        "projection_dim": 5,
    }
    # embedding 1 + CNN 2 * 2 + highway 2 * 4 + projection 2
    run_layer_test(
        CharacterEncoder, kwargs, ids, (4, 5), tmp_path, expected_num_trainable_weights=15
    )
    # bilm-tf has no projection when the CNN width equals P.
    assert CharacterEncoder([[1, 4], [2, 4]], 3, 1, projection_dim=8).projection is None


def _cell_numpy(cell, x, c, h):
    kernel, bias = cell.kernel.numpy(), cell.bias.numpy()
    z = np.concatenate([x, h], -1) @ kernel + bias
    i, j, f, o = np.split(z, 4, axis=-1)
    c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
    c = np.clip(c, -cell.cell_clip, cell.cell_clip)
    h = np.clip(
        (_sigmoid(o) * np.tanh(c)) @ cell.projection_kernel.numpy(), -cell.proj_clip, cell.proj_clip
    )
    return c, h


@pytest.mark.numerics
def test_lstm_cell_in_keras_rnn(tmp_path, rng):
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    cell = LSTMCellWithProjection(8, 4, cell_clip=0.5, proj_clip=0.3)
    kwargs = {"cell": cell, "return_sequences": True, "return_state": True}
    shapes = [(2, 5, 4), (2, 8), (2, 4)]  # outputs, c, h
    run_layer_test(keras.layers.RNN, kwargs, x, shapes, tmp_path, expected_num_trainable_weights=3)


@pytest.mark.numerics
def test_lstm_cell_formula_and_keras_rnn(rng):
    cell = LSTMCellWithProjection(8, 4, cell_clip=0.5, proj_clip=0.3)
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    outputs, c_final, h_final = rnn(x)
    for w in cell.weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    outputs, c_final, h_final = rnn(x)
    c, h = np.zeros([2, 8], "float32"), np.zeros([2, 4], "float32")
    for t in range(5):
        c, h = _cell_numpy(cell, x[:, t], c, h)
        assert_reordered(outputs[:, t], h)
    assert_reordered(c_final, c)
    assert np.abs(c).max() <= 0.5 + 1e-7 and np.abs(h).max() <= 0.3 + 1e-7
    clone = LSTMCellWithProjection.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()


def _lengths_mask(lengths, max_len):
    return np.arange(max_len)[None, :] < np.array(lengths)[:, None]


@pytest.mark.numerics
def test_bidirectional_stack(tmp_path, rng):
    mask = _lengths_mask([5, 3], 5)
    x = rng.normal(size=(2, 5, 4)).astype("float32") * mask[..., None]
    kwargs = {"num_layers": 2, "units": 8, "projection_units": 4, "cell_clip": 3.0}
    outputs = [(2, 5, 8), (2, 5, 8)]
    state = ((2, 2, 2, 8), (2, 2, 2, 4))  # cell, hidden
    run_layer_test(
        BidirectionalLSTMStack,
        kwargs,
        x,
        (outputs, state),
        tmp_path,
        call_kwargs={"mask": mask},
        expected_num_trainable_weights=12,  # 2 layers * 2 directions * 3
    )


@pytest.mark.numerics
def test_bidirectional_stack_matches_keras_rnn_and_reverses_within_length(rng):
    stack = BidirectionalLSTMStack(2, 8, 4, cell_clip=3.0, proj_clip=3.0)
    stack.build((None, None, 4))
    for w in stack.weights:
        w.assign(rng.normal(scale=0.5, size=w.shape).astype("float32"))
    lengths = [5, 3]
    mask = _lengths_mask(lengths, 5)
    x = rng.normal(size=(2, 5, 4)).astype("float32") * mask[..., None]
    outputs, (cell_state, hidden_state) = stack(x, mask)
    assert [tuple(o.shape) for o in outputs] == [(2, 5, 8), (2, 5, 8)]
    for row, n in enumerate(lengths):
        xs = x[row : row + 1, :n]
        forward_in, backward_in = xs, xs[:, ::-1]
        for layer in range(2):
            f_rnn = keras.layers.RNN(stack.forward_cells[layer], return_sequences=True)
            b_rnn = keras.layers.RNN(stack.backward_cells[layer], return_sequences=True)
            forward, backward = to_numpy(f_rnn(forward_in)), to_numpy(b_rnn(backward_in))
            if layer > 0:  # skip connection
                forward, backward = forward + forward_in, backward + backward_in
            expected = np.concatenate([forward, backward[:, ::-1]], -1)[0]
            assert_reordered(outputs[layer][row, :n], expected)
            assert not to_numpy(outputs[layer])[row, n:].any()
            forward_in, backward_in = forward, backward
    # the final forward hidden state is the output at the last real token (before the skip)
    last = to_numpy(outputs[0])[np.arange(2), np.array(lengths) - 1, :4]
    assert_same(hidden_state[:, 0, 0], last)
    # the final backward hidden state is the backward output at position 0
    assert_same(hidden_state[:, 0, 1], to_numpy(outputs[0])[:, 0, 4:])
    assert tuple(cell_state.shape) == (2, 2, 2, 8)


@pytest.mark.numerics
def test_scalar_mix(tmp_path, rng):
    layers = [rng.normal(size=(2, 3, 4)).astype("float32") for _ in range(3)]
    kwargs = {"num_layers": 3, "do_layer_norm": True, "l2_coefficient": 0.1}
    call_kwargs = {"token_mask": _lengths_mask([2, 1], 3)}
    run_layer_test(
        ScalarMix,
        kwargs,
        layers,
        (2, 3, 4),
        tmp_path,
        call_kwargs=call_kwargs,
        expected_num_trainable_weights=2,
    )


@pytest.mark.numerics
@skip_if_onednn_isa_capped
@pytest.mark.parametrize("policy", MIXED_POLICIES)
def test_scalar_mix_layer_norm_in_half_precision(policy, rng):
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    # Every sentence empty: the variance is 0, so only the epsilon (1e-12, which is 0 in
    # float16) keeps 0 / sqrt(0 + eps) from being NaN.
    zeros = [np.zeros([2, 3, 4], "float32")] * 3
    empty = np.zeros([2, 3], bool)
    mixed = ScalarMix(3, do_layer_norm=True, dtype=policy)(zeros, token_mask=empty)
    assert_same(keras.ops.cast(mixed, "float32"), zeros[0])
    # 2 * 100 * 400 = 80,000 elements of mean square 1: their float16 sum is past 65504.
    layers = [rng.normal(size=(2, 100, 400)).astype("float32") for _ in range(3)]
    mask = np.ones([2, 100], bool)
    half = ScalarMix(3, do_layer_norm=True, dtype=policy)(layers, token_mask=mask)
    full = ScalarMix(3, do_layer_norm=True)(layers, token_mask=mask)
    assert_half_precision(keras.ops.cast(half, "float32"), full, compute_dtype)


@pytest.mark.numerics
def test_scalar_mix_formula_and_layer_norm(rng):
    layers = [rng.normal(size=(2, 3, 4)).astype("float32") for _ in range(3)]
    mask = np.array([[1, 1, 0], [1, 0, 0]], bool)
    mix = ScalarMix(3, initial_weights=[1.0, 2.0, 3.0], initial_gamma=0.5)
    w = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    expected = 0.5 * sum(wk * x for wk, x in zip(w, layers))
    assert_reordered(mix(layers), expected)

    normed = ScalarMix(3, do_layer_norm=True)
    m = mask[..., None].astype("float32")
    expected = []
    for x in layers:
        n = m.sum() * 4
        mean = (x * m).sum() / n
        var = (((x * m - mean) * m) ** 2).sum() / n
        expected.append((x - mean) / np.sqrt(var + 1e-12))
    assert_reordered(normed(layers, token_mask=mask), sum(expected) / 3)
    with pytest.raises(ValueError, match="needs a token_mask"):
        normed(layers)


@pytest.mark.numerics
def test_scalar_mix_l2_penalty_and_config(tmp_path):
    mix = ScalarMix(3, l2_coefficient=0.1, initial_weights=[1.0, 0.0, -2.0])
    mix([np.ones([1, 2, 4], "float32")] * 3)
    assert_reordered(sum(float(to_numpy(x)) for x in mix.losses), 0.1 * 5.0)
    assert ScalarMix.from_config(mix.get_config()).get_config() == mix.get_config()
    with pytest.raises(ValueError, match="initial_weights has 2 values for 3 layers"):
        ScalarMix(3, initial_weights=[0.0, 1.0])
