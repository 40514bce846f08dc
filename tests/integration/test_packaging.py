"""What ``pip install elmo-tf`` puts on sys.path, and that optional extras stay optional."""

import os
import shlex
import subprocess
import sys
import textwrap

from support.extras import TEST_FILES_NEEDING
from support.paths import ROOT, TINY

from elmo_tf.system import extras

REPO = str(ROOT)


EXTRA_MODULES = (
    "grpc",
    "tensorflow_serving",
    "aiohttp",
    "ai_edge_litert",
    "onnxruntime",
    "onnx",
    "tf2onnx",
    "tensorflow_hub",
    "tf_keras",
    "apache_beam",
)


def _run(argv, cwd, pythonpath=(), timeout=300):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, REPO])
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_unrelated_serving_and_export_packages_change_nothing(tmp_path):
    """Packages named ``serving``/``export`` ahead on sys.path (and in the working directory)
    are never imported by elmo-tf."""
    for name in ("serving", "export"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ImportError('the unrelated {name} package was imported')\n"
        )
    options, weights = str(TINY / "options.json"), str(TINY / "weights.hdf5")
    out = tmp_path / "models"
    done = _run(
        ["-m", "elmo_tf", "export", "saved-model", str(out), "--options", options,
         "--weights", weights],
        cwd=tmp_path,
        pythonpath=[str(tmp_path)],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.listdir(out) == ["1"]
    done = _run(
        ["-m", "elmo_tf", "serve", "--model-base-path", str(tmp_path / "none")],
        cwd=tmp_path,
        pythonpath=[str(tmp_path)],
    )
    assert done.returncode == 1
    assert done.stderr.strip().endswith("is not a directory"), done.stderr


def test_suite_collects_without_the_optional_extras(tmp_path):
    """Without [serving], [tflite], [hub] and [beam] the suite skips their tests; nothing
    errors."""
    (tmp_path / "block_extras.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            for name in {EXTRA_MODULES!r}:
                sys.modules[name] = None  # as if not installed
            """
        )
    )
    done = _run(
        ["-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "block_extras",
         "-p", "no:cacheprovider",
         os.path.join(REPO, "tests")],
        cwd=REPO,
        pythonpath=[str(tmp_path)],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = done.stdout
    for path in TEST_FILES_NEEDING:
        assert f"tests/{path}::" not in collected, path
    assert "tests/model/test_model.py::" in collected

    # and every command that needs an extra says which one, in one line, before any work
    # (the command line itself, without TensorFlow: the extras blocked from sitecustomize)
    (tmp_path / "sitecustomize.py").write_text((tmp_path / "block_extras.py").read_text())
    for argv, extra, modules in [
        (
            ["client", "--server", "127.0.0.1:1", "hello"],
            "serving",
            "grpc, tensorflow_serving, aiohttp",
        ),
        (["serve", "--model-base-path", "."], "serving", "grpc, tensorflow_serving, aiohttp"),
        (["export", "tflite", "x.tflite"], "tflite", "ai_edge_litert"),
        (["export", "onnx", "x.onnx"], "onnx", "onnxruntime, onnx, tf2onnx"),
        (["embed", "x.txt", "y.hdf5", "--onnx", "m.onnx"], "onnx", "onnxruntime"),
        (["beam", "--input", "x.txt", "--output", "y"], "beam", "apache_beam"),
    ]:
        done = _run(["-m", "elmo_tf", *argv], cwd=tmp_path, pythonpath=[str(tmp_path)], timeout=60)
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"elmo-tf {argv[0]}: error: this command needs the [{extra}] extra ({modules} not "
            f"installed): pip install -e {shlex.quote(REPO + f'[{extra}]')}"
        ]


def test_install_hint_works_from_anywhere(tmp_path):
    """The missing-extra hint names the source tree by its absolute path (pip, run elsewhere,
    resolves it), and an installed package by its name."""
    command = extras.install_command("serving")
    assert command == f"pip install -e {shlex.quote(REPO + '[serving]')}"
    dry_run = ["--dry-run", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    argv = [*shlex.split(command)[1:], *dry_run]
    done = _run(["-m", "pip", *argv], cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_the_backend_keras_names(tmp_path):
    """Where Keras's backend is not installed (TensorFlow here, blocked as if absent), import
    elmo_tf still works for what needs no model, the model's names say what to install in one
    line, and so does the command."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['tensorflow'] = None\n")
    script = textwrap.dedent(
        """
        import sys
        import elmo_tf
        print(elmo_tf.batch_to_ids([["Hello"]]).shape, sys.modules["tensorflow"] is None)
        try:
            elmo_tf.ELMo
        except elmo_tf.system.extras.MissingExtraError as e:
            print(e)
        """
    )
    env_backend = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env={**env_backend, "PYTHONPATH": os.pathsep.join([str(tmp_path), REPO])},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "(1, 1, 50) True"  # and still blocked: never imported
    assert lines[1].startswith("elmo_tf.ELMo: Keras runs on tensorflow here")
    assert f"pip install -e {shlex.quote(REPO + '[tensorflow]')}" in lines[1]
    sentences = tmp_path / "in.txt"
    sentences.write_text("Hello world\n")
    done = subprocess.run(
        [sys.executable, "-m", "elmo_tf", "embed", str(sentences), str(tmp_path / "out.hdf5")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**env_backend, "PYTHONPATH": os.pathsep.join([str(tmp_path), REPO])},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "elmo-tf embed: error: " + lines[1].removeprefix("elmo_tf.ELMo: ")
    ]
