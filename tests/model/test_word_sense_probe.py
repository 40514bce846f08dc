"""The word-sense probe on a real model: the bundled model tells senses apart better than a
random twin of it."""

import json

import pytest

from elmo_tf.cli.main import main


def test_bundled_model_knows_senses_better_than_its_random_twin(capsys):
    """The README's claim: every contextual layer of the trained default model separates the
    senses better than the same architecture with random weights (mean of 3 seeds), and the
    context-free layer scores chance (5 of the 11 other sentences share the sense)."""
    assert main(["senses", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["examples"] == 72
    assert report["model"]["word_emb"] == pytest.approx(5 / 11)
    for key in ("lstm_outputs1", "lstm_outputs2"):
        assert report["model"][key] > report["random_twin"][key] + 0.05, (key, report)


def test_an_elmoformanylangs_model_is_probed_beside_its_twin_with_its_own_tables(capsys):
    """The random twin maps tokens with the model's own code-point and word tables."""
    from support.foreign_models import EFML_TINY

    argv = ["senses", "--model", str(EFML_TINY), "--random-seeds", "1", "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert report["examples"] == 72
    assert set(report["random_twin"]) == set(report["model"])
