"""What every command writes, checked before any work: never over or into what it reads
(the model's files, the corpus, a run's files, through links and hard links too), never to an
empty name or to ``-``, never where it cannot write; ``-`` as an input is standard input for
``embed`` and refused elsewhere.

Every model file a test names is a copy under ``tmp_path``: a regressed check replaces the
copy, never the package's bundled model or a shared fixture.
"""

import io
import json
import os
import pathlib
import shutil
import subprocess
import sys

import h5py
import pytest
from support.console import SCRIPT, run_script
from support.files import fake_run
from support.paths import TINY

from elmo_tf.cli.main import main


@pytest.fixture
def model(tmp_path):
    """``(options, weights)``: a copy of the tiny model in ``tmp_path/model``."""
    directory = tmp_path / "model"
    directory.mkdir()
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(TINY / name, directory / name)
    return directory / "options.json", directory / "weights.hdf5"


@pytest.fixture
def no_loading(monkeypatch):
    """Fails the test if a command gets as far as loading its model."""

    def fail(*args, **kwargs):
        pytest.fail("the model was loaded")

    for module in ("embed", "export"):
        monkeypatch.setattr(f"elmo_tf.cli.{module}.load_model", fail)


def contents(*paths):
    return [(os.lstat(p).st_ino, p.read_bytes()) for p in paths]


def refused(argv, capsys, fragment):
    """``main(argv)`` exits 1 with one line of stderr holding ``fragment``."""
    assert main([str(a) for a in argv]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"elmo-tf {argv[0]}: error: ") and fragment in line, line
    return line


@pytest.mark.parametrize("fmt", ["tflite", "saved-model"])
@pytest.mark.parametrize(
    "target",
    ["weights", "options", "link to the weights", "link to the options", "hard link to weights"],
)
def test_an_export_never_writes_over_the_model_it_reads(
    fmt, target, model, tmp_path, capsys, no_loading
):
    """Its OUTFILE (or OUTDIR) is one of the files the model is read from, named by
    --options/--weights or through a link: refused, the file untouched (it was replaced)."""
    options, weights = model
    source = weights if "weights" in target else options
    output = source
    if target.startswith("link"):
        output = tmp_path / "link"
        output.symlink_to(source)
    elif target.startswith("hard link"):
        output = tmp_path / "hard"
        os.link(source, output)
    before = contents(options, weights)
    argv = ["export", fmt, output, "--options", options, "--weights", weights]
    refused(argv, capsys, f"{output}: is an input file; choose another output name")
    assert contents(options, weights) == before


def test_an_export_never_writes_over_a_model_directory_it_reads(model, capsys, no_loading):
    """--model DIR (the bundled model's layout): its weight file is the model's input too."""
    options, weights = model
    before = contents(options, weights)
    argv = ["export", "tflite", weights, "--model", weights.parent]
    refused(argv, capsys, f"{weights}: is an input file")
    assert contents(options, weights) == before


def test_an_export_onto_its_model_is_refused_before_tensorflow(model, tmp_path):
    options, weights = model
    (tmp_path / "cwd").mkdir()
    argv = ["export", "tflite", str(weights), "--options", str(options), "--weights", str(weights)]
    done = run_script(argv, tmp_path / "cwd", block_tensorflow=True)
    assert done.returncode == 1, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    assert line.endswith(f"{weights}: is an input file; choose another output name")


def test_embed_reads_standard_input_from_dash(tmp_path, monkeypatch, capsys, model):
    """``embed - OUT`` reads standard input (as ``client -`` does), not a file named ``-``."""
    options, weights = model
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("not this file\n", encoding="utf-8")
    stdin = io.TextIOWrapper(io.BytesIO(b"a  b\nc\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    argv = ["embed", "-", "out.hdf5", "--options", str(options), "--weights", str(weights)]
    assert main(argv) == 0, capsys.readouterr().err
    with h5py.File(tmp_path / "out.hdf5") as f:
        assert json.loads(f["sentence_to_index"].asstr()[0]) == {"a  b": "0", "c": "1"}
        assert f["0"].shape[1] == 2 and f["1"].shape[1] == 1


def _read_only(directory, argv):
    """``elmo-tf ARGV`` in a mount namespace where ``directory`` is a read-only bind mount,
    TensorFlow blocked (the check must come first); skipped where namespaces are refused."""
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("mount namespaces are not available here")
    blocker = directory.parent / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(
        "import sys\nfor name in ('tensorflow', 'keras'):\n    sys.modules[name] = None\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env.get("PYTHONPATH", "")])
    script = (
        f'mount --bind "{directory}" "{directory}" && '
        f'mount -o remount,ro,bind "{directory}" && exec "$@"'
    )
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", SCRIPT, *map(str, argv)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "saved-model", "{ro}/exported"],
        ["export", "tflite", "{ro}/elmo.tflite"],
        ["dump-weights", "{run}", "{ro}/dump"],
        ["train", "{text}", "--checkpoint-dir", "{ro}/run"],
        ["embed", "{text}", "{ro}/out.hdf5"],
    ],
)
def test_an_output_on_a_read_only_filesystem_is_refused_before_tensorflow(argv, tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "in.txt").write_text("a b c\n" * 8, encoding="utf-8")
    run = fake_run(tmp_path / "run")
    values = {"ro": tmp_path / "ro", "run": run, "text": tmp_path / "in.txt"}
    done = _read_only(tmp_path / "ro", [a.format(**values) for a in argv])
    assert done.returncode == 1, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    assert f"cannot write to {tmp_path / 'ro'} (Read-only file system)" in line, line


@pytest.mark.parametrize("fmt", ["tflite", "saved-model"])
def test_an_export_never_writes_over_a_cached_model(
    model_mirror, monkeypatch, tmp_path, capsys, fmt
):
    """The files of a published model in the cache are the model's inputs too."""
    from elmo_tf.presets import local_paths

    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", model_mirror.base_url)
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["download", "small"]) == 0
    capsys.readouterr()
    for cached in local_paths("small"):
        before = pathlib.Path(cached).read_bytes()
        refused(["export", fmt, cached, "--model", "small"], capsys, f"{cached}: is an input")
        assert pathlib.Path(cached).read_bytes() == before
