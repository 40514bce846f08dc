"""The embed command's arguments and messages, checked before a model loads."""

import argparse
import io
import os
import runpy
import stat
import sys

import pytest
from support.paths import TINY
from support.special_files import special_file

import elmo_tf
from elmo_tf.cli import embed, stop_signals
from elmo_tf.cli.main import main
from elmo_tf.cli.progress import Progress
from elmo_tf.presets import bundled

# A normal line with extra spaces, an empty line, a non-ASCII line.
LINES = ["The  cat sat on the mat .  ", "", "Zürich café 中文 😀"]


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "sentences.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def error_line(capsys):
    """The single stderr line of a failed run."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("elmo-tf embed: error: ")
    return err[0]


def test_invalid_utf8_names_file_and_line(tmp_path, tiny_files, capsys):
    source = tmp_path / "bad.txt"
    source.write_bytes("fine\n\nZürich\n".encode() + b"bad \xff byte\nlast\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    options, weights = tiny_files
    argv = ["embed", str(source), str(out_dir / "o.hdf5"), "--options", str(options)]
    assert main(argv + ["--weights", str(weights)]) == 1
    message = error_line(capsys)
    assert str(source) in message
    assert "line 4 " in message  # 1-based, as editors number lines
    assert os.listdir(out_dir) == []


@pytest.mark.parametrize(
    "case, fragment",
    [
        ("missing_weights", "missing.hdf5: weight file not found"),
        ("missing_options", "missing.json: options file not found"),
        ("missing_input", "nope.txt: input file not found"),
        ("missing_output_dir", "does not exist"),
        ("batch_size_zero", "error: --batch-size must be a positive integer, got 0"),
        (  # the flag's name, not the option's (a flag has no None)
            "max_batch_tokens_negative",
            "error: --max-batch-tokens (0: no budget) must be a non-negative integer, got -5",
        ),
        ("no_model", "model is missing (elmo-tf was installed without its package data"),
        ("options_only", "--options was given without --weights"),
    ],
)
def test_user_errors_exit_1_with_one_line(
    case, fragment, tmp_path, input_file, tiny_files, capsys, monkeypatch
):
    # An installation without the bundled model's files (a directory that does not exist).
    monkeypatch.setattr(bundled, "model_directory", lambda name=None: str(tmp_path / "none"))
    options, weights = (str(p) for p in tiny_files)
    source, output = str(input_file), str(tmp_path / "o.hdf5")
    model = ["--options", options, "--weights", weights]
    argv = {
        "missing_weights": [source, output, "--options", options, "--weights", "missing.hdf5"],
        "missing_options": [source, output, "--options", "missing.json", "--weights", weights],
        "missing_input": [str(tmp_path / "nope.txt"), output, *model],
        "missing_output_dir": [source, str(tmp_path / "no" / "o.hdf5"), *model],
        "batch_size_zero": [source, output, *model, "--batch-size", "0"],
        "max_batch_tokens_negative": [source, output, *model, "--max-batch-tokens=-5"],
        "no_model": [source, output],
        "options_only": [source, output, "--options", options],
    }[case]
    assert main(["embed", *argv]) == 1
    assert fragment in error_line(capsys)
    assert os.listdir(tmp_path) == []


def test_default_max_batch_tokens(input_file, tmp_path):
    parser = embed.add_parser(argparse.ArgumentParser().add_subparsers())
    args = parser.parse_args([str(input_file), str(tmp_path / "o.hdf5")])
    assert args.max_batch_tokens == elmo_tf.models.length_batches.DEFAULT_MAX_BATCH_TOKENS


def test_usage_errors_exit_2(input_file, tmp_path, capsys):
    argv = ["embed", str(input_file), str(tmp_path / "o.hdf5"), "--top", "--average"]
    assert main(argv) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["embed", str(input_file)]) == 2
    assert main([]) == 2


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"elmo-tf {elmo_tf.__version__}"


def test_python_dash_m(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["elmo_tf", "--version"])
    # The console entry point installs its stop-signal handlers: not in the test process.
    monkeypatch.setattr(stop_signals, "install", lambda: None)
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("elmo_tf", run_name="__main__")
    assert exit_info.value.code == 0
    assert elmo_tf.__version__ in capsys.readouterr().out


def test_summary_line_keeps_set_up_out_of_the_rate():
    stream = io.StringIO()
    progress = Progress(2, stream=stream, setup_seconds=4.25)
    progress.start -= 2.0  # two seconds of work, however fast this machine is
    progress.update(2, tokens=100)
    progress.close()
    line = stream.getvalue().strip()
    assert line.startswith("2/2 sentences, 50 tokens/s, 2.0s"), line
    assert line.endswith("(after 4.2s loading and compiling the model)"), line


MODEL = ["--options", str(TINY / "options.json"), "--weights", str(TINY / "weights.hdf5")]


def _corpus(path, lines, tokens_per_line=10):
    words = " ".join(f"w{i}" for i in range(tokens_per_line))
    path.write_text("".join(f"{words} {n}\n" for n in range(lines)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "output, message",
    [
        ("nodir/", "nodir/: names a directory, expected an HDF5 file name"),
        ("missing/out.hdf5", "output directory"),
        ("in.txt", "in.txt: is an input file; choose another output name"),
    ],
)
def test_a_bad_output_path_is_refused_before_any_work(
    tmp_path, monkeypatch, capsys, output, message
):
    source = _corpus(tmp_path / "in.txt", lines=2)
    monkeypatch.chdir(tmp_path)
    loads = []
    monkeypatch.setattr(
        "elmo_tf.cli.embed.load_model", lambda *a, **k: loads.append(1) or pytest.fail("loaded")
    )
    assert main(["embed", str(source), output, *MODEL]) == 1
    assert loads == [] and message in capsys.readouterr().err
    assert source.read_text(encoding="utf-8").count("\n") == 2


@pytest.mark.parametrize(
    "kind", ["fifo", "socket", "null device", "link to a null device", "link to a fifo"]
)
def test_an_output_that_is_not_a_file_is_refused_before_any_work(tmp_path, monkeypatch, kind):
    # The output is written as a new file renamed onto its name: a device, a pipe or
    # /dev/stdout (a link to /proc/self/fd/1, that is to a pipe or a terminal) would be
    # replaced, not written to. Every special file here is made under tmp_path.
    source = _corpus(tmp_path / "in.txt", lines=2)
    output = tmp_path / "out.hdf5"
    if kind.startswith("link to a "):
        target = special_file(tmp_path / "target", kind.removeprefix("link to a "))
        os.symlink(target, output)
    else:
        special_file(output, kind)
    before = os.lstat(output)
    monkeypatch.setattr("elmo_tf.cli.embed.load_model", lambda *a, **k: pytest.fail("loaded"))
    assert main(["embed", str(source), str(output), *MODEL]) == 1
    after = os.lstat(output)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (
        before.st_mode,
        before.st_ino,
        before.st_rdev,
    )
    assert not stat.S_ISREG(os.stat(output).st_mode)  # what it names was not replaced either
