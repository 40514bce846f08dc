"""The command line's own words: every command's help, the native-log filter's patterns, GPU
warnings, and the suggestion for a model name that is not one."""

import pytest
from support.console import KEPT, NATIVE_NOISE

from elmo_tf.cli.main import _all_parsers, build_parser
from elmo_tf.system import native_logs

# The first word of every command's description: an imperative, as in "Embed every line".
VERBS = {"Add", "Compute", "Count", "Download", "Embed", "Export", "Fetch", "List", "Remove", "Run",
         "Serve", "Train", "Write"}  # fmt: skip


def test_every_command_says_what_it_does():
    for parser in _all_parsers(build_parser()):
        if parser.prog != "elmo-tf":
            assert parser.description, parser.prog
            assert parser.description.split()[0] in VERBS, (parser.prog, parser.description)


def test_help_is_plain_text():
    for parser in _all_parsers(build_parser()):
        text = parser.format_help()
        assert "``" not in text and ":mod:" not in text, parser.prog
    assert (
        "--verbose" in build_parser()._subparsers._group_actions[0].choices["embed"].format_help()
    )


@pytest.fixture
def gpu(monkeypatch):
    """Sets whether the filter sees a GPU: ``gpu(False)``, ``gpu(True)``."""
    return lambda present: monkeypatch.setattr(native_logs, "_gpu_present", present)


@pytest.mark.parametrize("line", NATIVE_NOISE)
def test_native_noise_is_recognised(line, gpu):
    gpu(False)
    assert native_logs.is_noise(line.encode())


@pytest.mark.parametrize("line", KEPT)
def test_messages_that_matter_are_kept(line, gpu):
    for present in (False, True):
        gpu(present)
        assert not native_logs.is_noise(line.encode())


CUDA_FAULTS = [
    "E0000 00:00:1795431063.740748    2827 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "E0000 00:00:1795431063.740748    2827 cuda_dnn.cc:522] Loaded runtime CuDNN library: 9.1.0 "
    "but source was compiled with: 9.3.0.",
    "W0000 00:00:1795431063.740748    2827 cuda_blas.cc:193] failed to create cublas handle",
]


@pytest.mark.parametrize("line", CUDA_FAULTS)
def test_cuda_warnings_pass_where_a_gpu_is_present(line, gpu):
    """On a machine without a GPU they are noise; with one, they may be the only sign of a
    real fault (a driver or cuDNN mismatch)."""
    gpu(False)
    assert native_logs.is_noise(line.encode())
    gpu(True)
    assert not native_logs.is_noise(line.encode())


def test_a_gpu_is_seen_from_its_driver_files(tmp_path, monkeypatch):
    monkeypatch.setattr(native_logs, "_GPU_DEVICE_PATTERNS", (str(tmp_path / "nvidia[0-9]*"),))
    monkeypatch.setattr(native_logs, "_GPU_DRIVER_DIRECTORY", str(tmp_path / "gpus"))
    for made, expected in ((None, False), ("gpus/0000:01:00.0", True), ("nvidia0", True)):
        if made == "gpus/0000:01:00.0":
            (tmp_path / "gpus" / "0000:01:00.0").mkdir(parents=True)
        elif made == "nvidia0":
            (tmp_path / "gpus" / "0000:01:00.0").rmdir()
            (tmp_path / "nvidia0").touch()
        monkeypatch.setattr(native_logs, "_gpu_present", None)
        assert native_logs.gpu_present() is expected, made


def test_a_model_name_that_is_not_one_says_what_was_meant(tmp_path, capsys):
    """A misspelt name gets its "did you mean"; the bundled model is not downloaded."""
    from elmo_tf.cli.main import main

    source = tmp_path / "in.txt"
    source.write_text("a b\n", encoding="utf-8")
    for argv, fragment in [
        (["download", "smal"], "unknown model 'smal'; published models: full,"),
        (["download", "smal"], "; did you mean 'small'?"),
        (["download", "sotu"], "'sotu' is bundled with the package: nothing to download"),
        (["embed", source, tmp_path / "o.hdf5", "--model", "orignal"], "did you mean 'original'?"),
    ]:
        assert main([str(a) for a in argv]) == 1
        out, err = capsys.readouterr()
        assert out == "" and fragment in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o.hdf5").exists()


def test_a_value_the_library_refuses_ends_the_command_in_one_line(monkeypatch, capsys):
    """A ValueError raised by elmo_tf's own code is the user's to fix: one line, status 1; one
    raised inside another package is a bug and keeps its traceback."""
    from elmo_tf import checks
    from elmo_tf.cli import main as command_line

    def library_refusal(args):
        checks.integer("--x", 5, 0, 3)  # the library's ValueError, naming the value

    def foreign_failure(args):
        int("not a number")  # raised by Python itself, as any package's bug would be

    parser = command_line.build_parser()
    monkeypatch.setattr(command_line, "build_parser", lambda: parser)
    for run, expected in ((library_refusal, 1), (foreign_failure, None)):
        parser._subparsers._group_actions[0].choices["cache"].set_defaults(run=run)
        if expected is None:
            with pytest.raises(ValueError, match="invalid literal"):
                command_line.main(["cache", "list"])
            continue
        assert command_line.main(["cache", "list"]) == expected
        (line,) = capsys.readouterr().err.splitlines()
        assert line == "elmo-tf cache: error: --x must be an integer from 0 to 3, got 5"
