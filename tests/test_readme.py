"""The README's runnable blocks (those after ``<!-- runs-as-test -->``) run as written."""

import contextlib
import io
import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
from numerics import assert_reordered

from elmo_tf.cli.main import main

README = pathlib.Path(__file__).parent.parent / "README.md"
MARKED_BLOCK = re.compile(r"<!-- runs-as-test -->\n```python\n(.*?)\n```", re.S)


def _marked_blocks():
    return MARKED_BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_has_runnable_blocks():
    assert len(_marked_blocks()) >= 1


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory holding ``exported/1``: the bundled model, exported as the README says."""
    path = tmp_path_factory.mktemp("readme")
    assert main(["export", "saved-model", str(path / "exported")]) == 0
    return path


@pytest.mark.slow
def test_fine_tuning_block_runs_and_reloads_in_a_fresh_process(workdir, monkeypatch):
    (block,) = [b for b in _marked_blocks() if "ElmoLayer" in b]
    monkeypatch.chdir(workdir)
    printed = io.StringIO()
    namespace = {}
    with contextlib.redirect_stdout(printed):
        exec(compile(block, str(README), "exec"), namespace)
    assert printed.getvalue().strip() == "(4, 2)"
    expected = namespace["classifier"].predict(namespace["texts"], verbose=0)

    # A new process that imports nothing of ours but ``elmo_tf`` loads the saved classifier.
    script = (
        "import json, keras, numpy as np\n"
        "import elmo_tf\n"
        "model = keras.models.load_model('classifier.keras')\n"
        f"texts = np.array({namespace['texts'].tolist()!r}, dtype=object)\n"
        "print(json.dumps(model.predict(texts, verbose=0).tolist()))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reloaded = np.array(json.loads(done.stdout.strip().splitlines()[-1]), "float32")
    assert_reordered(reloaded, expected)
    assert keras.saving.get_registered_object("elmo_tf>ElmoLayer") is not None
