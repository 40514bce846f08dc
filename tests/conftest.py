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
        "test_serving_versions.py": ("grpc", "tensorflow_serving"),  # [serving]
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


@pytest.fixture(scope="session", autouse=True)
def no_real_downloads(tmp_path_factory):
    """No test touches the internet or the user's model cache: published models come from a
    closed loopback port unless a test serves them (``model_mirror``), into a session cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/closed")
        mp.setenv("ELMO_TF_CACHE_DIR", str(tmp_path_factory.mktemp("model_cache")))
        mp.delenv("ELMO_TF_OFFLINE", raising=False)
        yield


@pytest.fixture(scope="session")
def small_official_files(tmp_path_factory):
    """``(options.json, weights.hdf5)`` in the published ``small`` shape (random weights,
    54 MB), made once per test session."""
    import subprocess
    import sys

    directory = tmp_path_factory.mktemp("small_official")
    subprocess.run(
        [sys.executable, str(FIXTURES / "make_weights.py"), "small", str(directory)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return directory / "small" / "options.json", directory / "small" / "weights.hdf5"


@pytest.fixture(scope="session")
def model_mirror(small_official_files):
    """A loopback HTTP server holding the published layout of ``small`` (random weights):
    ``mirror.base_url`` for ``ELMO_TF_MODEL_BASE_URL``; ``mirror.faults`` and
    ``mirror.requests`` let a test break it and count what it served."""
    from model_mirror import ModelMirror

    from elmo_tf.presets import published

    model = published.MODELS["small"]
    options, weights = small_official_files
    files = {
        f"/{model.folder}/{model.options_file}": options.read_bytes(),
        f"/{model.folder}/{model.weights_file}": weights.read_bytes(),
    }
    with ModelMirror(files) as mirror:
        yield mirror
