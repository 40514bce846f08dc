"""How ``import elmo_tf`` starts: whether the interpreter is the ``elmo-tf`` command (which
imports its public names on first use, so that ``--help`` needs no TensorFlow), and the module
paths of release 0.1 that still import, with a warning, for one more release."""

import importlib
import sys

import pytest

import elmo_tf
from elmo_tf import _moved


# sys.orig_argv: the interpreter, then its options and what it runs (a console script is a
# Python script the interpreter runs).
@pytest.mark.parametrize(
    "argv, command",
    [
        (["python3", "/venv/bin/elmo-tf", "embed"], True),
        (["python3", "-m", "elmo_tf", "embed"], True),
        (["python3", "-melmo_tf", "--help"], True),
        (["python3", "-m", "elmo_tf.beam", "--input", "x"], True),
        (["python3", "-W", "ignore", "-m", "elmo_tf"], True),  # an option taking a value
        (["python3", "-X", "dev", "-u", "/venv/bin/elmo-tf"], True),
        (["C:\\Python\\python.exe", "elmo-tf-script.py"], True),
        (["python3", "-m", "elmo_tf.cli.main"], False),  # a module of the package
        (["python3", "-m", "pytest", "-m", "elmo_tf"], False),  # -m of pytest, not Python's
        (["python3", "-c", "import elmo_tf", "elmo-tf"], False),
        (["python3", "train.py", "-m", "elmo_tf"], False),
        (["python3", "-"], False),
        (["python3"], False),
        ([], False),
    ],
)
def test_the_command_is_recognised_from_the_interpreters_arguments(argv, command):
    assert elmo_tf._started_as_command(argv) is command


# Release 0.1's module paths and where 0.2 moved them (CHANGELOG.md): the table must not drift.
MOVED_IN_0_2 = {
    "elmo_tf.batching": "elmo_tf.models.length_batches",
    "elmo_tf.embedder": "elmo_tf.models.embedder",
    "elmo_tf.token_cache": "elmo_tf.models.token_cache",
    "elmo_tf.saved_model_module": "elmo_tf.export.saved_model_module",
    "elmo_tf.elmo_layer": "elmo_tf.export.elmo_layer",
    "elmo_tf.pretrained": "elmo_tf.presets.bundled",
    "elmo_tf.word_senses": "elmo_tf.probes.word_senses",
    "elmo_tf.serving.batching": "elmo_tf.serving.request_batching",
}
# The top level's modules, grouped by what they are after 0.2.0 (CHANGELOG.md).
MOVED_SINCE_0_2 = {
    "elmo_tf.characters": "elmo_tf.tokens.characters",
    "elmo_tf.codepoints": "elmo_tf.tokens.codepoints",
    "elmo_tf.token_mappers": "elmo_tf.tokens.token_mappers",
    "elmo_tf.text_lines": "elmo_tf.tokens.text_lines",
    "elmo_tf.options_file": "elmo_tf.formats.options_file",
    "elmo_tf.weight_file": "elmo_tf.formats.weight_file",
    "elmo_tf.embedding_file": "elmo_tf.formats.embedding_file",
    "elmo_tf.torch_state_dict": "elmo_tf.foreign.torch_state_dict",
    "elmo_tf.zip_archives": "elmo_tf.foreign.zip_archives",
    "elmo_tf.efml": "elmo_tf.foreign",
    "elmo_tf.efml.dictionaries": "elmo_tf.foreign.efml_dictionaries",
    "elmo_tf.efml.model_folder": "elmo_tf.foreign.efml_folder",
    "elmo_tf.efml.conversion": "elmo_tf.kinds.efml_conversion",
    "elmo_tf.environment": "elmo_tf.system.environment",
    "elmo_tf.extras": "elmo_tf.system.extras",
    "elmo_tf.files": "elmo_tf.system.files",
    "elmo_tf.untrusted_files": "elmo_tf.system.untrusted_files",
    "elmo_tf.native_logs": "elmo_tf.system.native_logs",
    "elmo_tf.urls": "elmo_tf.system.urls",
    "elmo_tf.cpu_threads": "elmo_tf.system.cpu_threads",
}
MOVED = {**MOVED_IN_0_2, **MOVED_SINCE_0_2}


@pytest.mark.parametrize(
    "old, new", sorted((o, n) for o, n in MOVED.items() if o != "elmo_tf.efml")
)
def test_a_moved_module_path_imports_the_new_module_with_a_warning(old, new, monkeypatch):
    assert _moved.MOVED[old] == new
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning) as record:  # a moved package's path warns too
        module = importlib.import_module(old)
    assert f"{old} moved to {new}; the old path goes in the next release" in [
        str(w.message) for w in record
    ]
    assert module is importlib.import_module(new)  # one module: patching one patches both
    assert importlib.import_module(old) is module  # imported once, warned once


def test_a_moved_module_is_also_reached_as_an_attribute_import(monkeypatch):
    monkeypatch.delitem(sys.modules, "elmo_tf.batching", raising=False)
    monkeypatch.delattr(elmo_tf, "batching", raising=False)
    with pytest.warns(DeprecationWarning, match="elmo_tf.batching moved to"):
        from elmo_tf import batching
    assert batching is importlib.import_module("elmo_tf.models.length_batches")


def test_the_finder_is_installed_once():
    _moved.install()
    _moved.install()
    assert sum(isinstance(f, _moved._MovedModuleFinder) for f in sys.meta_path) == 1


def test_a_module_of_a_moved_package_is_reached_through_it(monkeypatch):
    """``from elmo_tf.efml import model_folder``: the package's path, then its module's."""
    for name in ("elmo_tf.efml", "elmo_tf.efml.model_folder"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.warns(DeprecationWarning) as record:
        from elmo_tf.efml import model_folder
    assert model_folder is importlib.import_module("elmo_tf.foreign.efml_folder")
    assert sorted(str(w.message).split(" moved")[0] for w in record) == [
        "elmo_tf.efml", "elmo_tf.efml.model_folder"
    ]  # fmt: skip


def test_no_other_module_path_is_redirected():
    assert _moved.MOVED == MOVED
