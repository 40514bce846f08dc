"""The session's shared fixtures (a pytest plugin, loaded by tests/conftest.py): the reference
data in tests/fixtures, and what is expensive to make (the ``small``-shaped weight files, the
SavedModel export, the loopback model mirror), made once per test run and shared by every test
and every pytest-xdist worker (``made_once``).

A shared directory is read-only by convention: a test that changes what it holds copies it
first (``shutil.copytree``), which costs milliseconds where an export costs seconds.
"""

import contextlib
import fcntl
import io
import json
import os
import shutil

import numpy as np
import pytest

from support.paths import BILM, TINY


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


# Memory one worker may take: TensorFlow, a few models and exports, a server.
WORKER_BYTES = 3 << 30


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: a worker per core, at most as many as memory holds, at most 4 (each
    worker imports TensorFlow; past the cores, workers only share them)."""
    cores = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cores, memory // WORKER_BYTES, 4))


def pytest_configure(config):
    """A pytest-xdist worker's TensorFlow runs one op at a time on one thread: the workers
    share the cores, and the suite's models are too small to gain from several."""
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("KERAS_BACKEND", "tensorflow") in (
        "tensorflow",
        "",
    ):
        import elmo_tf

        elmo_tf.configure_threads(1, 1, warn=False)


def made_once(tmp_path_factory, name, make):
    """The directory ``make(directory)`` fills, made once per test run.

    Under pytest-xdist every worker gets the same directory: the first to ask makes it under
    a file lock while the others wait (the workers' base temporary directories share their
    parent, which is this run's alone).
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    directory = base / f"shared-{name}"
    with open(base / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / ".complete").exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            make(directory)
            (directory / ".complete").touch()
    return directory


@pytest.fixture(scope="session")
def small_official_files(tmp_path_factory):
    """``(options.json, weights.hdf5)`` in the published ``small`` shape (random weights,
    54 MB), made once per test run."""

    def make(directory):
        from elmo_tf.testing import random_weights

        options = random_weights.options_for("small")
        (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
        random_weights.write_weights(
            options, str(directory / "weights.hdf5"), random_weights.SEEDS["small"]
        )

    directory = made_once(tmp_path_factory, "small_official", make)
    return directory / "options.json", directory / "weights.hdf5"


def export_quietly(model, directory, **kwargs):
    """``export_saved_model`` with TensorFlow's export chatter kept off the test's stderr."""
    from elmo_tf.export.saved_model import export_saved_model

    with contextlib.redirect_stderr(None):
        export_saved_model(model, str(directory), **kwargs)


@pytest.fixture(scope="session")
def tiny_export(tiny_files, tmp_path_factory):
    """A model base path (``.../elmo``) holding version 1 of the tiny model, exported as
    ``elmo-tf export saved-model`` exports it. Shared: copy it to change it."""

    def make(directory):
        import elmo_tf

        export_quietly(elmo_tf.load_pretrained(*tiny_files), directory / "elmo")

    return made_once(tmp_path_factory, "tiny_export", make) / "elmo"


@pytest.fixture(scope="session")
def tiny_int8_onnx(tmp_path_factory, tiny_files):
    """The tiny model as ``elmo-tf export onnx OUTPUT --precision int8`` writes it."""
    options, weights = tiny_files

    def make(directory):
        from elmo_tf.cli.main import main

        argv = ["export", "onnx", str(directory / "elmo.onnx"), "--precision", "int8"]
        assert main(argv + ["--options", str(options), "--weights", str(weights)]) == 0

    return made_once(tmp_path_factory, "tiny_int8_onnx", make) / "elmo.onnx"


@pytest.fixture
def dataset_reads(monkeypatch):
    """The names of the HDF5 datasets whose data is read (``h5py.Dataset.__getitem__``), in
    the order they are read."""
    import h5py  # lazy: only the weight-file tests need it

    names = []
    original = h5py.Dataset.__getitem__

    def recording(self, *args, **kwargs):
        names.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", recording)
    return names


@pytest.fixture(scope="session")
def model_mirror(small_official_files):
    """A loopback HTTP server holding the published layout of ``small`` (random weights) and
    of the tiny row (``tiny_published_row``, a test registers it in ``published.MODELS``):
    ``mirror.base_url`` for ``ELMO_TF_MODEL_BASE_URL``; ``mirror.faults`` and
    ``mirror.requests`` let a test break it and count what it served."""
    from elmo_tf.presets import published
    from support.mirror import ModelMirror

    model = published.MODELS["small"]
    options, weights = small_official_files
    tiny = tiny_published_row()
    files = {
        f"/{model.folder}/{model.options_file}": options.read_bytes(),
        f"/{model.folder}/{model.weights_file}": weights.read_bytes(),
        f"/{tiny.folder}/{tiny.options_file}": (TINY / "options.json").read_bytes(),
        f"/{tiny.folder}/{tiny.weights_file}": (TINY / "weights.hdf5").read_bytes(),
    }
    with ModelMirror(files) as mirror:
        yield mirror


@pytest.fixture
def corpus_file(tmp_path):
    """A small training corpus (``support.training.make_corpus``)."""
    from support.training import make_corpus

    return make_corpus(tmp_path / "train.txt")


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """A run directory of the tiny architecture (``support.training``) trained by ``elmo-tf
    train`` to step 6 with checkpoints at steps 2, 4 and 6, its corpus ``train.txt`` beside
    it, made once per test run. Shared: copy it to change it."""

    def make(directory):
        from elmo_tf.cli.main import main
        from support.training import ARCH, FAST, make_corpus

        corpus = make_corpus(directory / "train.txt")
        argv = ["train", corpus, "--checkpoint-dir", directory / "run", *ARCH, *FAST]
        argv += ["--max-steps", "6", "--checkpoint-every", "2"]
        with contextlib.redirect_stderr(io.StringIO()) as err:
            assert main([str(a) for a in argv]) == 0, err.getvalue()

    return made_once(tmp_path_factory, "trained_run", make) / "run"


@pytest.fixture(scope="module")
def docs_sessions(tmp_path_factory, model_mirror, small_official_files):
    """The sessions a docs test file runs its documents' blocks in (``support.docs``)."""
    from support.docs import open_sessions

    yield from open_sessions(tmp_path_factory, model_mirror, small_official_files)


def tiny_published_row():
    """A published row in the layout of AllenNLP's (``published._model``'s naming) whose
    files are the tiny model's: the cache and download tests fetch 150 KB, not 54 MB."""
    from elmo_tf.config import ElmoConfig
    from elmo_tf.presets import published

    return published.PublishedModel(
        name="tiny",
        folder="tests/tiny",
        options_file="elmo_tiny_options.json",
        weights_file="elmo_tiny_weights.hdf5",
        config=ElmoConfig.from_file(TINY / "options.json"),
    )


@pytest.fixture(scope="module", params=[1, 3], ids=["1-layer", "3-layer"])
def model_of_n_layers(request, tiny_files, tmp_path_factory):
    """The tiny architecture with 1, then 3 LSTM layers (random weights, through its weight
    file), its mix weights unequal so that a test sees which layer gets which weight."""
    import keras
    import numpy as np

    import elmo_tf

    with open(tiny_files[0], encoding="utf-8") as f:
        options = json.load(f)
    options["lstm"]["n_layers"] = request.param
    directory = tmp_path_factory.mktemp(f"layers{request.param}")
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    keras.utils.set_random_seed(request.param)
    elmo_tf.save_weights(elmo_tf.ELMo(options), directory / "weights.hdf5")
    loaded = elmo_tf.load_pretrained(directory / "options.json", directory / "weights.hdf5")
    assert loaded.config.n_lstm_layers == request.param
    loaded.scalar_mixes[0].scalar_weights.assign(np.linspace(-1.0, 1.0, request.param + 1))
    loaded.scalar_mixes[0].gamma.assign(0.8)
    return loaded
