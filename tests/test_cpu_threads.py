"""``elmo_tf.configure_threads``: TensorFlow's pools for inference, set before its first op."""

import os
import subprocess
import sys
import warnings

import pytest

import elmo_tf
from elmo_tf import cpu_threads
from elmo_tf.cli import embed
from elmo_tf.cli.main import main


@pytest.mark.parametrize(("cpus", "expected"), [(1, (1, 1)), (2, (1, 2)), (16, (8, 2))])
def test_recommended_threads_run_two_directions_side_by_side(cpus, expected):
    assert cpu_threads.recommended_threads(cpus) == expected


@pytest.mark.slow
def test_sets_the_pools_in_a_fresh_process():
    code = (
        "import elmo_tf, tensorflow as tf\n"
        "print(elmo_tf.configure_threads(), elmo_tf.configure_threads(1, 2))\n"
        "tf.constant(1.0) + 1.0\n"  # the pools start here, with the setting
        "t = tf.config.threading\n"
        "print(t.get_intra_op_parallelism_threads(), t.get_inter_op_parallelism_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in cpu_threads.ENV_VARS}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    intra, inter = cpu_threads.recommended_threads()
    assert out == [f"({intra}, {inter}) (1, 2)", "1 2"]


def test_user_environment_wins(monkeypatch):
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not the "too late" path: the variable alone decides
        assert elmo_tf.configure_threads(1, 1) is None


def test_too_late_warns_and_changes_nothing(monkeypatch, tiny_model):
    for name in cpu_threads.ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    import tensorflow as tf

    before = tf.config.threading.get_intra_op_parallelism_threads()
    wanted = before + 3  # differs from the current setting, so a change is attempted
    with pytest.warns(UserWarning, match="already started its thread pools"):
        assert elmo_tf.configure_threads(wanted, 2) is None
    assert elmo_tf.configure_threads(wanted, 2, warn=False) is None
    assert tf.config.threading.get_intra_op_parallelism_threads() == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_named(monkeypatch, bad):
    for name in cpu_threads.ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="intra_op must be a positive integer"):
        elmo_tf.configure_threads(bad, 2)


@pytest.mark.slow
def test_embed_command_configures_before_loading(monkeypatch, tmp_path, tiny_files):
    calls = []
    monkeypatch.setattr(embed, "configure_threads", lambda **kw: calls.append(("threads", kw)))
    real_load = embed.load_model
    monkeypatch.setattr(embed, "load_model", lambda args: calls.append("load") or real_load(args))
    source = tmp_path / "in.txt"
    source.write_text("a b c\n", encoding="utf-8")
    options, weights = tiny_files
    argv = ["embed", str(source), str(tmp_path / "out.hdf5")]
    assert main(argv + ["--options", str(options), "--weights", str(weights)]) == 0
    assert calls == [("threads", {"warn": False}), "load"]
