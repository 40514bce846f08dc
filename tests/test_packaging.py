"""What ``pip install elmo-tf`` puts on sys.path, and that optional extras stay optional."""

import importlib.metadata
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import TINY

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTRA_MODULES = (
    "grpc",
    "tensorflow_serving",
    "ai_edge_litert",
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


def test_one_top_level_package():
    top_level = importlib.metadata.distribution("elmo-tf").read_text("top_level.txt")
    assert top_level.split() == ["elmo_tf"]


@pytest.mark.slow
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


@pytest.mark.slow
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
        ["-m", "pytest", "--collect-only", "-q", "-p", "block_extras", "-p", "no:cacheprovider",
         os.path.join(REPO, "tests")],
        cwd=REPO,
        pythonpath=[str(tmp_path)],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = done.stdout
    assert "test_serving.py" not in collected and "test_tflite.py" not in collected
    assert "test_serving_robustness.py" not in collected
    assert "test_beam.py" not in collected
    assert "tests/test_model.py" in collected

    # and the commands that need an extra say which one, in one line
    script = (
        "import sys, block_extras\n"
        "from elmo_tf.cli.main import main\n"
        "sys.exit(main(['client', '--server', '127.0.0.1:1', 'hello']))\n"
    )
    done = _run(["-c", script], cwd=REPO, pythonpath=[str(tmp_path)])
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "elmo-tf client: error: this command needs the [serving] extra (grpc, "
        'tensorflow_serving not installed): pip install -e ".[serving]"'
    )
    script = (
        "import sys, block_extras\n"
        "from elmo_tf.cli.main import main\n"
        "sys.exit(main(['beam', '--input', 'x.txt', '--output', 'y']))\n"
    )
    done = _run(["-c", script], cwd=REPO, pythonpath=[str(tmp_path)])
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "elmo-tf beam: error: this command needs the [beam] extra (apache_beam not "
        'installed): pip install -e ".[beam]"'
    )
