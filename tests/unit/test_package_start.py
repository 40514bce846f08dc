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


@pytest.mark.parametrize("old, new", sorted(MOVED_IN_0_2.items()))
def test_a_moved_module_path_imports_the_new_module_with_a_warning(old, new, monkeypatch):
    assert _moved.MOVED[old] == new
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"^{old} moved to {new}; the old path goes"):
        module = importlib.import_module(old)
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


def test_no_other_module_path_is_redirected():
    assert _moved.MOVED == MOVED_IN_0_2
