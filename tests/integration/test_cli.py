"""The ``elmo-tf`` command as a user meets it: plain help, quiet start-up, one-line errors."""

import os
import re
import subprocess
import sys
import textwrap

import pytest
from support.console import KEPT, NATIVE_NOISE, blocker, run_python
from support.paths import TINY

ELMO_TF = os.path.join(os.path.dirname(sys.executable), "elmo-tf")


def test_filter_drops_noise_written_to_file_descriptor_2(tmp_path):
    """What C++ writes to fd 2 passes through the filter line by line, in order (a process
    of its own, without TensorFlow: the filter is ours alone)."""
    script = textwrap.dedent(
        f"""
        import os, sys
        from elmo_tf.system import native_logs
        lines = {NATIVE_NOISE + KEPT!r}
        with native_logs.filtered_stderr():
            for line in lines:
                os.write(2, (line + "\\n").encode())  # as native code writes
            print("python's own stderr", file=sys.stderr)
        print("after", file=sys.stderr)
        assert "tensorflow" not in sys.modules or sys.modules["tensorflow"] is None
        """
    )
    done = run_python(script, tmp_path, block_tensorflow=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == KEPT + ["python's own stderr", "after"]


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    """`elmo-tf client ... | head`: once the reader has gone, the command stops without a word,
    with SIGPIPE's status; a broken pipe that is not standard output is still reported."""
    script = textwrap.dedent(
        """
        import sys
        from elmo_tf.cli import download, main

        def run(args):
            if args.names == ["socket"]:
                raise BrokenPipeError(32, "Broken pipe")  # a connection, stdout still open
            if args.names == ["buffered"]:
                print("a line kept in the buffer until the command ends")
                return 0
            while True:
                print("x" * 1000)

        download.run = run
        main.console_main(["download", sys.argv[1]])
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a user's
    # the command's exit needs no TensorFlow: without it, three processes start in a second
    env["PYTHONPATH"] = os.pathsep.join(
        [str(blocker(tmp_path / "blocker", ("tensorflow",))), env.get("PYTHONPATH", "")]
    )
    cases = [("stdout", 141, ""), ("buffered", 141, ""), ("socket", 1, "error: Broken pipe")]
    for name, status, err in cases:
        process = subprocess.Popen(
            [sys.executable, "-c", script, name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        if name == "stdout":
            process.stdout.read(5000)  # the reader takes what it wants, then goes
            process.stdout.close()
        elif name == "buffered":  # gone before the command's last write (it used to end in
            process.stdout.close()  # "Exception ignored ... BrokenPipeError", status 120)
        else:
            assert process.stdout.read() == ""
        stderr = process.stderr.read()
        assert process.wait(timeout=120) == status, stderr
        assert err in stderr and "Traceback" not in stderr, stderr
        if not err:
            assert stderr == ""


def _cli(*argv, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(env_extra or {})
    return subprocess.run(
        [ELMO_TF, *argv],  # the console script, as users run it
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_cli_prints_only_its_own_messages(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("The cat sat .\n\nHello !\n", encoding="utf-8")
    files = ["--options", str(TINY / "options.json"), "--weights", str(TINY / "weights.hdf5")]
    done = _cli("embed", str(source), str(tmp_path / "out.hdf5"), *files)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("3/3 sentences, "), lines
    # a user error is one line of ours, nothing else
    done = _cli("embed", str(tmp_path / "nope.txt"), str(tmp_path / "o.hdf5"), *files)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"elmo-tf embed: error: {tmp_path / 'nope.txt'}: input file not found"
    ]


def _python(script, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_python_api_is_quiet_on_a_cpu():
    """No CUDA probing, no oneDNN notice: a user's script prints what it prints."""
    done = _python(
        "import elmo_tf\n"
        "model = elmo_tf.ELMo.from_preset('sotu')\n"
        "print(model.embed([['The', 'bank', 'closed', '.']])['elmo'].shape)\n"
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("(1, 4, 256)\n", "")
    # TF_CPP_MIN_LOG_LEVEL=0 asks for TensorFlow's native lines: they come. Which ones depends
    # on the CPU (oneDNN's port.cc notice is printed on some machines only; CUDA probing, the
    # CPU feature guard on others), so any native log line counts.
    loud = _python("import elmo_tf", env_extra={"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert loud.returncode == 0 and re.search(r"^[IWE]0000 ", loud.stderr, re.M), loud.stderr


def test_the_tflite_export_is_quiet(tmp_path):
    pytest.importorskip("ai_edge_litert")
    done = _python(
        "import elmo_tf\n"
        "from elmo_tf.export.tflite import export_tflite\n"
        f"model = elmo_tf.load_pretrained({str(TINY / 'options.json')!r}, "
        f"{str(TINY / 'weights.hdf5')!r})\n"
        f"export_tflite(model, {str(tmp_path / 'x.tflite')!r})\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    done = _cli(
        "export", "tflite", str(tmp_path / "y.tflite"),
        "--options", str(TINY / "options.json"), "--weights", str(TINY / "weights.hdf5"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [line.split(" ", 1)[0] for line in done.stderr.splitlines()] == [
        "[1/2]",
        "[2/2]",
        "wrote",
    ]


def test_a_beam_job_prints_only_its_own_lines(tmp_path):
    pytest.importorskip("apache_beam")
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("The cat sat .\n" * 20, encoding="utf-8")
    argv = [
        "beam", "--input", str(tmp_path / "*.txt"), "--output", str(tmp_path / "out" / "elmo"),
        "--options", str(TINY / "options.json"), "--weights", str(TINY / "weights.hdf5"),
        "--direct_num_workers=1",
    ]  # fmt: skip
    done = _cli(*argv)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        f"elmo_tf.beam: embedded 40 lines (160 tokens) to {tmp_path / 'out' / 'elmo'}-*.parquet; "
        f"0 dead letters in {tmp_path / 'out' / 'elmo'}-dead-letters-*.jsonl"
    ]
    # --verbose lets the workers log (their lines pass the filter, which only hides them
    # without it)
    from elmo_tf.cli import beam as beam_command

    def level(verbose):
        options = beam_command.pipeline_options([], verbose=verbose).get_all_options()
        return options["default_sdk_harness_log_level"]

    assert (level(False), level(True)) == ("ERROR", "INFO")
