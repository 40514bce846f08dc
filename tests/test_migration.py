"""Every elmo-tf block of docs/migration.md runs as written (``<!-- runs-as-test -->``)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, _installed

from elmo_tf.cli.main import main

PAGE = pathlib.Path(__file__).parent.parent / "docs" / "migration.md"
BLOCK = re.compile(r"<!-- runs-as-test(?:: ([\w-]+))? -->\n```(python|bash)\n(.*?)\n```", re.S)
BLOCKS = [
    pytest.param(tag, language, code, id=f"block{i}-{language}{'-' + tag if tag else ''}")
    for i, (tag, language, code) in enumerate(BLOCK.findall(PAGE.read_text(encoding="utf-8")))
]

pytestmark = pytest.mark.slow


def test_the_page_has_blocks_for_every_route():
    text = PAGE.read_text(encoding="utf-8")
    assert len(BLOCKS) >= 6
    for heading in ("TF Hub", "AllenNLP", "bilm-tf", "simple_elmo"):
        assert f"## {heading}" in text or f"## {heading} " in text, heading


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Official-shape files (random weights, the published ``small`` shape), their export, a
    simple_elmo-style directory and a sentence file."""
    path = tmp_path_factory.mktemp("migration")
    subprocess.run(
        [sys.executable, str(FIXTURES / "make_weights.py"), "small", str(path / "made")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(path / "made" / "small" / name, path / name)
    (path / "model_dir").mkdir()
    shutil.copy(path / "options.json", path / "model_dir" / "options.json")
    shutil.copy(path / "weights.hdf5", path / "model_dir" / "model.hdf5")
    files = ["--options", str(path / "options.json"), "--weights", str(path / "weights.hdf5")]
    assert main(["export", "saved-model", str(path / "exported"), *files]) == 0
    (path / "sentences.txt").write_text("The cat sat .\n\nHello world !\n", encoding="utf-8")
    return path


def _run_in(workdir, argv, env, timeout):
    done = subprocess.run(
        argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("tag, language, code", BLOCKS)
def test_block_runs(tag, language, code, workdir, monkeypatch):
    if language == "bash":
        path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
        env = dict(os.environ, PATH=path)
        _run_in(workdir, ["bash", "-euo", "pipefail", "-c", code], env, timeout=300)
    elif tag == "legacy-keras":  # TF Hub code: Keras 2 as tf.keras, in a process of its own
        if not _installed("tensorflow_hub", "tf_keras"):
            pytest.skip("needs the [hub] extra")
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
        _run_in(workdir, [sys.executable, "-c", code], env, timeout=600)
    else:
        monkeypatch.chdir(workdir)
        exec(compile(code, str(PAGE), "exec"), {"__name__": "migration_block"})
