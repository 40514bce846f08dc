"""Thread settings in a process that has already started TensorFlow: too late changes nothing
and says so; the embed command configures before loading."""

import pytest

import elmo_tf
from elmo_tf.cli import embed
from elmo_tf.cli.main import main
from elmo_tf.system import cpu_threads


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


def test_embed_command_configures_before_loading(monkeypatch, tmp_path, tiny_files):
    calls = []
    monkeypatch.setattr(embed, "configure_threads", lambda **kw: calls.append(("threads", kw)))
    real_load = embed.load_model

    def load(args, **kwargs):
        calls.append("load")
        return real_load(args, **kwargs)

    monkeypatch.setattr(embed, "load_model", load)
    source = tmp_path / "in.txt"
    source.write_text("a b c\n", encoding="utf-8")
    options, weights = tiny_files
    argv = ["embed", str(source), str(tmp_path / "out.hdf5")]
    assert main(argv + ["--options", str(options), "--weights", str(weights)]) == 0
    assert calls == [("threads", {"warn": False}), "load"]
