"""Checking a training run's settings before anything is built: elmo_tf.training.plan."""

import dataclasses

import pytest

from elmo_tf import presets
from elmo_tf.errors import ElmoError, TrainingPlanError
from elmo_tf.training.plan import plan_training
from elmo_tf.training.training_options import TrainingOptions


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("the cat sat\nthe dog ran\na cat ran\nthe end\n", encoding="utf-8")
    return path


def test_plan_of_a_new_run(tmp_path, text):
    plan = plan_training(
        tmp_path / "run",
        [text],
        architecture={"n_layers": 3, "projection_dim": 16},
        vocab_min_count=2,
        training={"batch_size": 2, "max_steps": 7},
    )
    expected = dataclasses.replace(presets.TRAINING_DEFAULT, n_lstm_layers=3, projection_dim=16)
    assert plan.config == expected
    assert plan.vocabulary.tokens == ("<S>", "</S>", "<UNK>", "the", "cat", "ran")
    assert (plan.corpus.n_sentences, plan.options.batch_size, plan.total_steps) == (4, 2, 7)
    assert plan.init_from is None and not plan.resume
    assert not (tmp_path / "run").exists()  # planning writes nothing


@pytest.mark.parametrize(
    "settings, message",
    [
        ({}, "no training files given"),
        ({"resume": True}, "no checkpoint to resume from"),
        ({"preset": "huge"}, "preset: unknown preset 'huge'"),
        ({"preset": "small", "options": "o.json"}, "options and preset both set"),
        (
            {"init_from": ("o.json", "w.hdf5"), "architecture": {"lstm_dim": 8}},
            "lstm_dim cannot be combined with init_from",
        ),
        ({"architecture": {"depth": 3}}, "unknown architecture setting(s) depth"),
        ({"architecture": {"lstm_dim": 0}}, "'lstm.dim' must be a positive integer, got 0"),
        ({"vocab": "v.txt", "vocab_max_size": 5}, "vocab_min_count and vocab_max_size"),
        ({"training": {"batch_size": 5}}, "4 sentences, fewer than batch_size 5"),
        ({"training": {"dropout": 1.5}}, "dropout must be in [0, 1), got 1.5"),
        ({"training": {"speed": 2}}, "unknown training option(s) speed"),
        # a key holding a line break is shown escaped, on one line (found by fuzzing)
        ({"training": {"\nroll_steps": 5}}, "unknown training option(s) \\nroll_steps"),
    ],
)
def test_contradictions_raise_training_plan_error(tmp_path, text, settings, message):
    files = [] if settings in ({}, {"resume": True}) else [text]
    with pytest.raises(TrainingPlanError) as info:
        plan_training(tmp_path / "run", files, **settings)
    assert message in str(info.value)
    assert isinstance(info.value, ElmoError) and isinstance(info.value, ValueError)


def test_training_options_name_the_field():
    for field, value in [("batch_size", 0), ("keep_checkpoints", 0), ("log_every", -1)]:
        with pytest.raises(TrainingPlanError, match=f"^{field} must be "):
            TrainingOptions(**{field: value})
    with pytest.raises(ValueError, match="initial_accumulator_value must be non-negative"):
        TrainingOptions(initial_accumulator_value=-1.0)
    with pytest.raises(
        TrainingPlanError, match="^optimizer must be 'adagrad' or 'adam', got 'sgd'"
    ):
        TrainingOptions(optimizer="sgd")


def test_learning_rate_defaults_to_the_optimizers():
    assert TrainingOptions().learning_rate == 0.2  # bilm-tf's Adagrad
    assert TrainingOptions(optimizer="adam").learning_rate == 0.001
    assert TrainingOptions(optimizer="adam", learning_rate=0.002).learning_rate == 0.002
    # a run's saved options (written before the optimizer setting existed) still load
    old = TrainingOptions().to_dict()
    del old["optimizer"]
    assert TrainingOptions.from_dict(old) == TrainingOptions()
    assert (
        TrainingOptions.from_dict(TrainingOptions(optimizer="adam").to_dict()).optimizer == "adam"
    )
