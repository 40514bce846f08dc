"""The unigram baseline: hand-computed perplexities, and the biLM's predictions exactly."""

import math

import numpy as np
import pytest

from elmo_tf.training.corpus import read_corpus
from elmo_tf.training.unigram import prediction_counts, unigram_perplexity
from elmo_tf.training.vocabulary import Vocabulary

VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b"])


def corpus(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return read_corpus([path])


def test_maximum_likelihood_perplexity_by_hand(tmp_path):
    # Forward predictions of the training text: a a b </S> <UNK> </S>, so p(a) = 2/6,
    # p(b) = 1/6, p(<UNK>) = 1/6, p(</S>) = 2/6. The held-out text predicts a, <UNK> (for
    # "d") and </S>: loss (ln 3 + ln 6 + ln 3) / 3, perplexity 54 ** (1/3).
    train = corpus(tmp_path, "train.txt", "a a b\nc\n")
    heldout = corpus(tmp_path, "heldout.txt", "a d\n")
    result = unigram_perplexity(train, heldout, VOCAB)
    assert result["forward_perplexity"] == pytest.approx(54 ** (1 / 3), rel=1e-12)
    # The backward LM predicts <S> where the forward one predicts </S>: the same numbers.
    assert result["backward_perplexity"] == pytest.approx(54 ** (1 / 3), rel=1e-12)
    assert result["perplexity"] == pytest.approx(54 ** (1 / 3), rel=1e-12)
    assert result["forward_loss"] == pytest.approx(math.log(54) / 3, rel=1e-12)
    assert (result["predictions"], result["training_predictions"]) == (3, 6)


def test_add_one_smoothing_by_hand(tmp_path):
    # Add 1 to each of the V = 5 counts: p(a) = 3/11, p(<UNK>) = 2/11, p(</S>) = 3/11.
    train = corpus(tmp_path, "train.txt", "a a b\nc\n")
    heldout = corpus(tmp_path, "heldout.txt", "a d\n")
    result = unigram_perplexity(train, heldout, VOCAB, smoothing=1.0)
    assert result["perplexity"] == pytest.approx((11**3 / 18) ** (1 / 3), rel=1e-12)


def test_literal_boundary_tokens_are_predicted_as_boundaries(tmp_path):
    # A literal </S> is the boundary type, as in training. Forward training predictions:
    # a </S> </S> -> p(a) = 1/3, p(</S>) = 2/3; backward: </S> a <S> -> 1/3 each.
    train = corpus(tmp_path, "train.txt", "a </S>\n")
    heldout = corpus(tmp_path, "heldout.txt", "a\n")
    forward, backward = prediction_counts(train, VOCAB)
    np.testing.assert_array_equal(forward, [0, 2, 0, 1, 0])
    np.testing.assert_array_equal(backward, [1, 1, 0, 1, 0])
    result = unigram_perplexity(train, heldout, VOCAB)
    assert result["forward_perplexity"] == pytest.approx(math.sqrt(9 / 2), rel=1e-12)
    assert result["backward_perplexity"] == pytest.approx(3.0, rel=1e-12)


def test_zero_probability_names_the_token(tmp_path):
    train = corpus(tmp_path, "train.txt", "a a\n")  # never predicts <UNK> or b
    heldout = corpus(tmp_path, "heldout.txt", "a b\n")
    with pytest.raises(ValueError, match="predicts 'b'.*probability is 0"):
        unigram_perplexity(train, heldout, VOCAB)
    with pytest.raises(ValueError, match="non-negative"):
        unigram_perplexity(train, heldout, VOCAB, smoothing=-1.0)
    assert unigram_perplexity(train, heldout, VOCAB, smoothing=0.5)["perplexity"] > 1
