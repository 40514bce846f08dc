"""A command names the extra it lacks in one line, before any work: what each extra installs
is what the commands paired with it need (a [hub] install exporting a SavedModel showed a
ModuleNotFoundError traceback and left an empty OUTDIR)."""

import sys

import pytest
from support.extras import TEST_FILES_NEEDING
from support.paths import ROOT

from elmo_tf.cli.main import main


@pytest.mark.parametrize("module", ["tensorflow_serving"])
def test_export_saved_model_without_tf_servings_protos_names_the_extra(
    module, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, module, None)  # as in an install that lacks it
    outdir = tmp_path / "exported"
    assert main(["export", "saved-model", str(outdir)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elmo-tf export: error: elmo-tf export saved-model needs the")
    assert f"[tensorflow] extra ({module} not installed): pip install" in line
    assert not outdir.exists()  # nothing made


def test_the_library_export_checks_it_too(tmp_path, monkeypatch):
    from elmo_tf.export.saved_model import export_saved_model
    from elmo_tf.system.extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "tensorflow_serving", None)
    with pytest.raises(MissingExtraError, match="a SavedModel's warm-up records needs the"):
        export_saved_model(object(), str(tmp_path / "exported"))  # checked before the model
    assert not (tmp_path / "exported").exists()


def test_every_test_file_gated_on_an_extra_exists():
    """A gate naming a file that is not there gates nothing: the file it meant is collected
    without its extra."""
    assert [p for p in TEST_FILES_NEEDING if not (ROOT / "tests" / p).is_file()] == []
