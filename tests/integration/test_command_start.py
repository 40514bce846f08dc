"""The command answers ``--help`` and argument errors before TensorFlow starts: every command's
help and a table of argument errors, run in one process started as the command is (one process
for the behaviour, not one per command), its modules read after each answer."""

import json
import subprocess
import sys
import textwrap

from support.paths import ROOT

HELP = [
    [],
    ["embed"],
    ["export", "saved-model"],
    ["export", "tflite"],
    ["export", "onnx"],
    ["serve"],
    ["client"],
    ["train"],
    ["evaluate"],
    ["senses"],
    ["dump-weights"],
    ["build-vocab"],
    ["beam"],
    ["download"],
    ["cache"],
]
# argv -> (exit status, what its one line says)
ERRORS = {
    ("embed",): (2, "the following arguments are required: INPUT"),
    ("embed", "in.txt", "out.hdf5", "--batch-size", "x"): (2, "--batch-size: invalid int value"),
    ("serve", "--model-base-path", "/nonexistent", "--port", "0"): (1, "is not a directory"),
    ("export", "tflite", "x.tflite", "--batch-size", "0"): (1, "batch_size must be from 1"),
    ("export", "onnx", "x.onnx", "--triton-max-batch-size", "0"): (
        1,
        "--triton-max-batch-size must be an integer from 1",
    ),
    ("beam", "--input", "x.txt"): (2, "the following arguments are required: --output"),
    ("beam", "--input", "tests/*", "--output", "o/x"): (
        1,
        "tests/*: matches what is not a readable text file: tests/fixtures (a directory)",
    ),
}
HEAVY = ("tensorflow", "keras", "apache_beam", "grpc")

# Started as ``python -m elmo_tf`` is (sys.orig_argv is what elmo_tf reads to know it is the
# command), then each argv through the command's own entry point, its output captured.
DRIVER = textwrap.dedent(
    """
    import contextlib, io, json, sys
    sys.orig_argv = [sys.executable, "-m", "elmo_tf"]
    from elmo_tf.cli.main import main
    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as e:
                status = e.code
        loaded = sorted({m.split(".")[0] for m in sys.modules if sys.modules[m] is not None})
        results.append([argv, status, out.getvalue(), err.getvalue(), loaded])
    print(json.dumps(results))
    """
)


def _run(argvs):
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_every_help_and_argument_error_answers_without_tensorflow():
    results = _run([[*argv, "--help"] for argv in HELP] + [list(argv) for argv in ERRORS])
    for argv, status, out, err, loaded in results:
        heavy = set(loaded) & set(HEAVY)
        assert heavy == set(), (argv, heavy)  # nothing heavy, after this answer or before it
        if argv[-1] == "--help":
            assert (status, err) == (0, ""), argv
            assert out.startswith("usage: elmo-tf"), argv
            continue
        expected_status, fragment = ERRORS[tuple(argv)]
        assert status == expected_status, (argv, err)
        (line,) = err.splitlines()[-1:]
        assert fragment in line and "Traceback" not in err, (argv, err)
    assert not (ROOT / "o").exists()
