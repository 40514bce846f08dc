"""Shared fixtures: the reference data copied from ../shared/reference into tests/fixtures."""

import importlib.util
import json
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _installed(*modules):
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):  # a parent package missing, or sys.modules[m] = None
        return False


# Optional extras stay optional: without them their test modules are not collected.
collect_ignore = [
    module
    for module, needs in {
        "test_serving.py": ("grpc", "tensorflow_serving"),  # [serving]
        "test_serving_robustness.py": ("grpc", "tensorflow_serving"),  # [serving]
        "test_tflite.py": ("ai_edge_litert",),  # [tflite]
        "test_beam.py": ("apache_beam", "pyarrow"),  # [beam]
    }.items()
    if not _installed(*needs)
]
TINY = FIXTURES / "tiny"
BILM = FIXTURES / "bilm_fixture"


@pytest.fixture(scope="session")
def tiny_files():
    """(options.json, weights.hdf5) of the tiny random model with AllenNLP golden outputs."""
    return TINY / "options.json", TINY / "weights.hdf5"


@pytest.fixture(scope="session")
def tiny_model(tiny_files):
    import elmo_tf

    return elmo_tf.load_pretrained(*tiny_files)


@pytest.fixture(scope="session")
def golden():
    """(golden.json as a dict, golden.npz arrays)."""
    with open(TINY / "golden.json", encoding="utf-8") as f:
        meta = json.load(f)
    return meta, dict(np.load(TINY / "golden.npz"))


@pytest.fixture(scope="session")
def bilm_model():
    import elmo_tf

    return elmo_tf.load_pretrained(BILM / "options.json", BILM / "lm_weights.hdf5")
