"""The training biLM: its sampled-softmax objective, its directions against ELMo's biLM, and the
LSTM state carried between windows or reset per sentence."""

import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_reordered
from support.training import (
    tiny_config,
)

import elmo_tf
from elmo_tf.training.bidirectional_language_model import BidirectionalLanguageModel

TINY_CONFIG = tiny_config()


def _window(model_vocab_size=12, rows=2, steps=6, seed=0):
    rng = np.random.default_rng(seed)
    words = [[f"w{rng.integers(20)}" for _ in range(steps)] for _ in range(rows)]
    return {
        "forward_char_ids": elmo_tf.batch_to_ids(words),
        "backward_char_ids": elmo_tf.batch_to_ids([w[::-1] for w in words]),
        "forward_targets": rng.integers(model_vocab_size, size=[rows, steps]).astype(np.int32),
        "backward_targets": rng.integers(model_vocab_size, size=[rows, steps]).astype(np.int32),
    }


@pytest.mark.numerics
def test_sampled_loss_with_every_candidate_equals_full_softmax():
    model = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12, num_sampled=50)
    batch = _window()
    out = model(batch)
    mask = tf.ones_like(batch["forward_targets"], tf.bool)
    sampled = model.sampled_loss(out["forward"], batch["forward_targets"], mask, [4, 5])
    total, count = model.full_loss(out["forward"], batch["forward_targets"], mask)
    assert_reordered(sampled, total / count)


@pytest.mark.numerics
def test_language_model_directions_match_elmo_bilm(bilm_model):
    """The forward stream of a sentence (<S> w1..wn) and its backward stream (</S> wn..w1)
    give exactly the activations of ELMo.bilm, whose backward layer reads right to left."""
    model = BidirectionalLanguageModel(bilm_model.config, vocab_size=5)
    model.elmo.set_weights(bilm_model.get_weights())
    tokens = ["The", "cat", "sat", "on", "the", "mat", "."]
    n, p = len(tokens), bilm_model.config.projection_dim
    out = model(
        {
            "forward_char_ids": elmo_tf.batch_to_ids([["<S>", *tokens]]),
            "backward_char_ids": elmo_tf.batch_to_ids([["</S>", *tokens[::-1]]]),
        }
    )
    top = bilm_model.bilm(elmo_tf.batch_to_ids([tokens]))["activations"][-1][0]  # (n + 2, 2P)
    assert_reordered(out["forward"][0], top[: n + 1, :p])
    assert_reordered(out["backward"][0], top[1:, p:][::-1])


@pytest.mark.numerics
def test_carried_state_equals_one_long_window():
    model = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12)
    batch = _window(steps=8)
    whole = model(batch)
    first = model({k: v[:, :3] for k, v in batch.items()})
    second = model({k: v[:, 3:] for k, v in batch.items()}, initial_state=first["state"])
    for key in ("forward", "backward"):
        joined = np.concatenate([first[key], second[key]], axis=1)
        assert_reordered(joined, whole[key])
    for a, b in zip(second["state"], whole["state"]):
        assert_reordered(a, b)


@pytest.mark.numerics
def test_reset_state_per_sentence_runs_each_sentence_from_zero():
    """With ``reset_state_per_sentence`` a window holding two sentences gives what each
    sentence gives alone from the zero state, whatever state the window starts from; without
    it the second sentence sees the first."""
    first, second = ["a", "cat", "sat"], ["the", "dog"]

    def streams(*sentences):
        forward = [t for s in sentences for t in ["<S>", *s]]
        backward = [t for s in sentences for t in ["</S>", *s[::-1]]]
        return {
            "forward_char_ids": elmo_tf.batch_to_ids([forward]),
            "backward_char_ids": elmo_tf.batch_to_ids([backward]),
        }

    rng = np.random.default_rng(0)
    carried = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12)
    model = BidirectionalLanguageModel(TINY_CONFIG, vocab_size=12, reset_state_per_sentence=True)
    model.set_weights(carried.get_weights())
    start = [rng.normal(size=s.shape).astype(np.float32) for s in model.zero_state(1)]
    both = model(streams(first, second), initial_state=start)
    alone = [model(streams(s)) for s in (first, second)]
    for key in ("forward", "backward"):
        joined = np.concatenate([alone[0][key], alone[1][key]], axis=1)
        assert_reordered(both[key], joined)
    for a, b in zip(both["state"], alone[1]["state"]):
        assert_reordered(a, b)
    flowing = carried(streams(first, second))
    assert not np.allclose(flowing["forward"][:, 4:], alone[1]["forward"], atol=1e-3)
    assert model.get_config()["reset_state_per_sentence"] is True
