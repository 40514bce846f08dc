"""The release artefacts: ``python -m build`` makes the sdist and, from it, the wheel; the wheel
installs into a fresh virtualenv (elmo-tf is not on PyPI yet: a release is this wheel and sdist
uploaded) and embeds with its bundled model, its console script answering, away from the
checkout."""

import os
import pathlib
import site
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import pytest
from support.paths import ROOT

SMOKE = """
import os, sys
import elmo_tf
assert elmo_tf.__file__.startswith(sys.prefix), elmo_tf.__file__  # the wheel's, not the tree's
out = elmo_tf.ELMo.from_preset("sotu").embed([["Hello", "world", "!"]])
print(out["elmo"].shape, elmo_tf.__version__)
"""


def _tracked_tree(target):
    """A copy of the checkout's tracked files (the build writes build/ and *.egg-info in the
    tree it builds: never in the checkout)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source, copy = ROOT / os.fsdecode(name), target / os.fsdecode(name)
        if source.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(source.read_bytes())
    return target


@pytest.mark.stress
def test_the_sdist_and_wheel_build_and_the_wheel_installs_and_embeds(tmp_path):
    tree, dist = _tracked_tree(tmp_path / "tree"), tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for bundled in ("options.json", "weights.hdf5", "vocab.txt", "MODEL_CARD.md"):
        assert f"elmo_tf/presets/sotu/{bundled}" in names, bundled
    assert any(n.startswith("elmo_tf/probes/") and n.endswith(".tsv") for n in names)
    assert not any(n.startswith("tests/") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "elmo-tf = elmo_tf.cli.main:console_main" in archive.read(entry_points).decode()
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {"setup.py", "pyproject.toml", "README.md", "elmo_tf/__init__.py"} <= members

    # A fresh virtualenv, the wheel installed into it alone; its dependencies are those of the
    # environment running the tests (no network), which a .pth file puts after its own
    # site-packages. (--system-site-packages would reach the interpreter under a virtualenv
    # running the tests, not the virtualenv.) Directories a .pth names are not site
    # directories: the running environment's own .pth files, its editable install of elmo-tf
    # among them, are not read.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    outer = dict.fromkeys([*site.getsitepackages(), *sysconfig.get_paths().values()])
    (pathlib.Path(purelib) / "running_environment.pth").write_text(
        "".join(f"{p}\n" for p in outer if os.path.isdir(p) and "site-packages" in p)
    )
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    smoke = subprocess.run(
        [python, "-c", SMOKE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    assert smoke.stdout.split() == ["(1,", "3,", "256)", wheel.name.split("-")[1]]
    script = subprocess.run(
        [venv / "bin" / "elmo-tf", "--help"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert script.returncode == 0 and script.stdout.startswith("usage: elmo-tf")
