"""Every command, run the way users run it: the installed ``elmo-tf`` console script, in a
process of its own.

The rest of the suite calls ``elmo_tf.cli.main.main`` in the test process (a TensorFlow start
per command would cost seconds); these tests cover what only a real process shows: the exit
status of the console script, the stderr filter (one line of ours, no traceback, no native log
line) and the arguments it reads. Signals are tested on ``serve`` (test_serving.py) and
``train`` (test_training.py); ``--help`` without TensorFlow in test_package_layout.py.
"""

import os
import shutil
import subprocess

import pytest
from support.console import SCRIPT, run_script

# command -> (arguments, exit status, what its one line of stderr holds)
COMMANDS = {
    "embed": (["embed", "nosuch.txt", "out.hdf5"], 1, "nosuch.txt: input file not found"),
    "export": (
        ["export", "saved-model", "out", "--options", "nosuch.json", "--weights", "w.hdf5"],
        1,
        "nosuch.json: options file not found",
    ),
    "serve": (["serve", "--model-base-path", "nosuch"], 1, "nosuch is not a directory"),
    "client": (["client", "--server", "127.0.0.1:1", "hello"], 1, "127.0.0.1:1: UNAVAILABLE"),
    "train": (
        ["train", "nosuch.txt", "--checkpoint-dir", "ck"],
        1,
        "nosuch.txt: training file or directory not found",
    ),
    "evaluate": (
        ["evaluate", "nosuch", "nosuch.txt"],
        1,
        "nosuch.txt: held-out file or directory not found",
    ),
    "senses": (
        ["senses", "--options", "nosuch.json", "--weights", "w.hdf5"],
        1,
        "nosuch.json: options file not found",
    ),
    "dump-weights": (
        ["dump-weights", "nosuch", "out"],
        1,
        "nosuch: neither a checkpoint directory nor a checkpoint prefix",
    ),
    "build-vocab": (
        ["build-vocab", "nosuch.txt", "-o", "v.txt"],
        1,
        "nosuch.txt: training file or directory not found",
    ),
    "beam": (["beam", "--input", "nosuch.txt", "--output", "out/x"], 1, "no input file matches"),
    "download": (["download", "nosuch"], 1, "unknown model 'nosuch'; published models:"),
    "convert": (["convert", "nosuch", "out"], 1, "'nosuch' is neither the bundled model"),
    "cache": (["cache", "list"], 0, None),
}


def test_every_command_is_listed():
    from elmo_tf.cli.main import COMMANDS as MODULES

    names = {"vocab": "build-vocab", "dump_weights": "dump-weights"}
    assert sorted(COMMANDS) == sorted(names.get(m, m) for m in MODULES)


# The commands whose every argument or file error answers before TensorFlow starts (in well
# under 2 s): the check runs where TensorFlow cannot be imported. The client imports it to
# build its request (TF Serving's protos are TensorFlow's).
NEEDS_TENSORFLOW_FIRST = ("client",)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_console_script_runs_each_command(command, tmp_path):
    assert SCRIPT, "the elmo-tf console script is not installed"
    argv, status, fragment = COMMANDS[command]
    (tmp_path / "cwd").mkdir()
    done = run_script(
        argv, tmp_path / "cwd", block_tensorflow=command not in NEEDS_TENSORFLOW_FIRST
    )
    assert done.returncode == status, done.stderr[-2000:]
    if fragment is None:
        assert done.stderr == "" and done.stdout.startswith("cache: "), done.stdout
        return
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"elmo-tf {argv[0]}: error: ") and fragment in lines[0], lines
    assert not os.listdir(tmp_path / "cwd")  # nothing written


@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("ELMO_TF_LSTM_LAYOUT", "per-gate", "ELMO_TF_LSTM_LAYOUT must be one of per_gate, fused"),
        ("ELMO_TF_OFFLINE", "maybe", "ELMO_TF_OFFLINE must be one of 1, true, yes, 0"),
        ("ELMO_TF_MAX_LAYERS", "lots", "ELMO_TF_MAX_LAYERS must be a positive integer"),
        ("ELMO_TF_OFLINE", "1", "did you mean 'ELMO_TF_OFFLINE'?"),
        # a URL is shown without its user and password, and an unusable one is named
        ("ELMO_TF_MODEL_BASE_URL", "ftp://al:S3CRET@h/x", "URL, got 'ftp://h/x'"),
        ("ELMO_TF_MODEL_BASE_URL", "http://al:S3CRET@h:99999", "(Port out of range 0-65535)"),
        ("ELMO_TF_MODEL_BASE_URL", "http://[::1", "is not a usable URL (Invalid IPv6 URL)"),
        ("ELMO_TF_MODEL_BASE_URL", "https://al:S3CRET#x@h/x", "'https://<hidden>@h/x'"),
    ],
)
def test_every_environment_variable_is_checked_at_start_up(variable, value, message, tmp_path):
    """One line naming the variable and its values, before any work, whatever the input
    (small or large: a misspelt layout is refused before anything is read)."""
    source = tmp_path / "in.txt"
    source.write_text("a b c\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env[variable] = value
    done = subprocess.run(
        [SCRIPT, "embed", str(source), str(tmp_path / "out.hdf5")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("elmo-tf embed: error: ") and message in line, line
    assert "\x1b" not in line and "S3CRET" not in line and not (tmp_path / "out.hdf5").exists()


def test_a_weight_file_unlike_its_options_is_named_before_tensorflow(tmp_path):
    """Its layout (links, datasets, shapes) is read from its metadata before TensorFlow
    starts: the refusal takes no TensorFlow start."""
    import h5py

    from elmo_tf.presets.bundled import default_model_files

    options, weights = default_model_files()
    bad = tmp_path / "weights.hdf5"
    shutil.copy(weights, bad)
    with h5py.File(bad, "a") as f:
        narrow = f["char_embed"][:, :3]
        del f["char_embed"]
        f["char_embed"] = narrow
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    (tmp_path / "cwd").mkdir()
    argv = ["embed", str(tmp_path / "in.txt"), "out.hdf5", "--options", options, "--weights"]
    done = run_script([*argv, str(bad)], tmp_path / "cwd", block_tensorflow=True)
    assert done.returncode == 1, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    assert "dataset 'char_embed' has shape (261, 3), expected (261, 16)" in line, line
    assert not os.listdir(tmp_path / "cwd")
