"""The unigram baseline as a biLM: a model whose softmax is the unigram gives its perplexity,
and the evaluate command reports it."""

import json

import numpy as np
import pytest

from elmo_tf.cli.main import main
from elmo_tf.config import ElmoConfig
from elmo_tf.formats.weight_file import save_weights
from elmo_tf.training import run_directory, softmax_file
from elmo_tf.training.bidirectional_language_model import BidirectionalLanguageModel
from elmo_tf.training.corpus import read_corpus
from elmo_tf.training.evaluation import evaluate
from elmo_tf.training.unigram import prediction_counts, unigram_perplexity
from elmo_tf.training.vocabulary import Vocabulary

TINY = ElmoConfig.from_options(
    {
        "lstm": {"projection_dim": 4, "dim": 8, "n_layers": 1},
        "char_cnn": {
            "activation": "relu",
            "filters": [[1, 4]],
            "n_highway": 1,
            "embedding": {"dim": 4},
            "n_characters": 262,
        },
    }
)


SMOOTHING = 0.5  # every id gets a probability, so every softmax bias is finite


@pytest.fixture
def texts(tmp_path):
    """Training and held-out text with out-of-vocabulary tokens, and their vocabulary."""
    words = "the cat sat on mat zebra".split()
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(words, rng.integers(1, 7))) for _ in range(40)]
    train_file = tmp_path / "train.txt"
    train_file.write_text("\n".join(lines[:30]) + "\n", encoding="utf-8")
    heldout_file = tmp_path / "heldout.txt"
    heldout_file.write_text("\n".join(lines[30:]) + "\nunseen words\n", encoding="utf-8")
    train, heldout = read_corpus([train_file]), read_corpus([heldout_file])
    vocabulary = Vocabulary.from_counts(train.counts(), max_size=7)  # some words -> <UNK>
    assert heldout.oov_rate(vocabulary) > 0
    return train_file, heldout_file, train, heldout, vocabulary


def unigram_bilm(counts, vocabulary):
    """A biLM whose full softmax is the smoothed unigram distribution of ``counts``."""
    model = BidirectionalLanguageModel(TINY, len(vocabulary), dropout=0.0, num_sampled=1)
    model.softmax_weights.assign(np.zeros(model.softmax_weights.shape, np.float32))
    p = (counts + SMOOTHING) / (counts + SMOOTHING).sum()
    model.softmax_bias.assign(np.log(p).astype(np.float32))
    return model


def test_equals_a_bilm_whose_softmax_is_the_unigram(texts):
    # With zero softmax weights and bias log p, the biLM's full-softmax evaluation predicts
    # the unigram distribution at every position: its losses must be the baseline's, which
    # pins down the positions and targets the baseline counts (OOV tokens, boundaries).
    _, _, train, heldout, vocabulary = texts
    result = unigram_perplexity(train, heldout, vocabulary, SMOOTHING)
    for direction, counts in zip(("forward", "backward"), prediction_counts(train, vocabulary)):
        model = unigram_bilm(counts, vocabulary)
        got = evaluate(model, heldout, vocabulary, batch_size=3, unroll_steps=4)
        assert got["predictions"] == result["predictions"]
        assert got[f"{direction}_loss"] == pytest.approx(result[f"{direction}_loss"], rel=1e-5)


def test_evaluate_command_reports_the_baseline(texts, tmp_path, capsys):
    train_file, heldout_file, train, heldout, vocabulary = texts
    model = unigram_bilm(prediction_counts(train, vocabulary)[0], vocabulary)
    dump = tmp_path / "dump"
    dump.mkdir()
    model.config.save(dump / run_directory.OPTIONS_FILE)
    save_weights(model.elmo, dump / run_directory.WEIGHTS_FILE)
    vocabulary.save(dump / run_directory.VOCAB_FILE)
    softmax_file.save_softmax(model, dump / run_directory.SOFTMAX_FILE)
    argv = ["evaluate", str(dump), str(heldout_file), "--unigram-baseline", str(train_file)]
    assert main([*argv, "--unigram-smoothing", str(SMOOTHING)]) == 0
    result = json.loads(capsys.readouterr().out)
    baseline = result["unigram_baseline"]
    assert baseline == pytest.approx(unigram_perplexity(train, heldout, vocabulary, SMOOTHING))
    assert result["forward_loss"] == pytest.approx(baseline["forward_loss"], rel=1e-5)
    # Training text without out-of-vocabulary words never predicts <UNK>: unsmoothed, the
    # held-out <UNK> has probability 0, and the command stops before evaluating.
    known = tmp_path / "known.txt"
    known.write_text(f"{vocabulary.tokens[3]}\n", encoding="utf-8")
    assert main(["evaluate", str(dump), str(heldout_file), "--unigram-baseline", str(known)]) == 1
    err = capsys.readouterr().err
    assert "predicts '<UNK>'" in err and "probability is 0" in err
    assert "--unigram-smoothing" in err
