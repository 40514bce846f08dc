"""The thread pools' settings: the recommended counts, the user's environment first, bad counts
named."""

import warnings

import pytest

import elmo_tf
from elmo_tf.system import cpu_threads


@pytest.mark.parametrize(("cpus", "expected"), [(1, (1, 1)), (2, (1, 2)), (16, (8, 2))])
def test_recommended_threads_run_two_directions_side_by_side(cpus, expected):
    assert cpu_threads.recommended_threads(cpus) == expected


def test_user_environment_wins(monkeypatch):
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not the "too late" path: the variable alone decides
        assert elmo_tf.configure_threads(1, 1) is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_named(monkeypatch, bad):
    for name in cpu_threads.ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="intra_op must be a positive integer"):
        elmo_tf.configure_threads(bad, 2)
