"""The package's metadata: one top-level package, TensorFlow an extra, the install hints of
installed packages."""

import importlib.metadata
import os
import re

from support.paths import ROOT

from elmo_tf.system import extras

REPO = str(ROOT)


def test_one_top_level_package():
    top_level = importlib.metadata.distribution("elmo-tf").read_text("top_level.txt")
    assert top_level.split() == ["elmo_tf"]


def test_install_hint_of_an_installed_package(monkeypatch):
    monkeypatch.setattr(extras, "source_tree", lambda: None)
    assert extras.install_command("tflite") == "pip install 'elmo-tf[tflite]'"


def test_tensorflow_is_an_extra():
    """pip install elmo-tf[torch] or [jax] installs no TensorFlow: it is required only by the
    extras that need it (Keras's default backend, export, serving, Beam, training)."""
    from distutils.core import run_setup  # this tree's setup.py, as pip reads it (setuptools)

    setup = run_setup(os.path.join(REPO, "setup.py"), stop_after="init")

    def names(requirements):
        return {re.split(r"[<>=\[ ;]", r)[0] for r in requirements}

    assert not names(setup.install_requires) & {"tensorflow", "torch", "jax"}
    with_tensorflow = sorted(e for e, r in setup.extras_require.items() if "tensorflow" in names(r))
    assert with_tensorflow == ["beam", "dev", "hub", "serving", "tensorflow", "tflite"]
    assert "tensorflow" not in names(setup.extras_require["torch"] + setup.extras_require["jax"])
    # and an extra that brings TensorFlow brings all of [tensorflow], so that it runs every
    # command a [tensorflow] install runs (a [hub] install could not export a SavedModel: its
    # warm-up records need TF Serving's protos)
    stack = set(setup.extras_require["tensorflow"])
    for extra in with_tensorflow:
        assert stack <= set(setup.extras_require[extra]), extra
    # the modules elmo_tf checks for the [tensorflow] extra are what it installs
    assert extras.EXTRAS["tensorflow"] == ("tensorflow", "tensorflow_serving")
    assert names(stack) == {"tensorflow", "tensorflow-serving-api"}
