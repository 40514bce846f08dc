"""TF Serving's version rules in the model manager, on stand-in servables (``FakeServable``):
``0007/`` is version 7, read from ``0007/``; a name beyond int64 is ignored with one log line;
a removed version is unloaded, falling back to the next highest, or leaving the model
unavailable (NOT_FOUND) when none is left; a version that fails to load leaves the old one
serving and is retried; versions are immutable. The same rules through a real server, over
gRPC and REST: tests/integration/test_serving_versions.py."""

import logging
import os
import shutil
import time

import pytest
from support.fake_servable import FakeServable, make_version

from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.model_manager import ModelManager, State

TIMEOUT = 30  # seconds
BEYOND_INT64 = "99999999999999999999"


@pytest.fixture
def manager(request, tmp_path):
    """A manager of ``tmp_path/elmo`` on stand-in servables; it polls only when told."""
    base = tmp_path / "elmo"
    base.mkdir()
    manager = ModelManager("elmo", str(base), poll_seconds=0, load=FakeServable)
    request.addfinalizer(lambda: manager.stop(5))
    return manager


def _serving(manager):
    with manager.servable() as servable:
        return servable


def _wait_for_state(manager, version, state):
    """Waits (bounded) for ``version``'s state: unloading runs on its own thread."""
    deadline = time.monotonic() + TIMEOUT
    while (states := {v: s for v, s, _ in manager.status()}).get(version) != state:
        assert time.monotonic() < deadline, states
        time.sleep(0.01)


def test_leading_zeros_are_read_from_their_directory(manager):
    make_version(manager.base_path, "0007")
    assert manager.version_directories() == {7: "0007"}
    manager.poll()
    assert manager.status() == [(7, State.AVAILABLE, "")]
    servable = _serving(manager)
    assert servable.version == 7 and servable.path == os.path.join(manager.base_path, "0007")


def test_a_version_beyond_int64_is_ignored_with_one_log_line(manager, caplog):
    make_version(manager.base_path, "1")
    make_version(manager.base_path, BEYOND_INT64)
    make_version(manager.base_path, str(2**63 - 1))  # the largest version there is
    with caplog.at_level(logging.WARNING, logger="serving"):
        manager.poll()
        manager.poll()
    assert manager.versions_on_disk() == [1, 2**63 - 1]
    assert _serving(manager).version == 2**63 - 1
    (line,) = [r.getMessage() for r in caplog.records if BEYOND_INT64 in r.getMessage()]
    assert "not a version" in line and "2**63 - 1" in line


def test_directories_without_a_model_or_named_otherwise_are_no_versions(manager, caplog):
    """A number that is no version is said once, with why; other names are not numbers."""
    make_version(manager.base_path, "1")
    os.makedirs(os.path.join(manager.base_path, "2"))  # no saved_model.pb (yet)
    with open(os.path.join(manager.base_path, "3"), "w") as f:
        f.write("a file")
    make_version(manager.base_path, "v3")
    make_version(manager.base_path, "-4")
    make_version(manager.base_path, "٥")  # a digit, but not an ASCII one
    with caplog.at_level(logging.WARNING, logger="serving"):
        assert manager.version_directories() == {1: "1"}
        assert manager.version_directories() == {1: "1"}
    lines = sorted(r.getMessage() for r in caplog.records)
    base = manager.base_path
    assert lines == [
        f"ignoring {os.path.join(base, '2')}: holds no saved_model.pb or model.onnx (a version is "
        "a SavedModel or an ONNX export: elmo-tf export saved-model, elmo-tf export onnx)",
        f"ignoring {os.path.join(base, '3')}: a file, not a version directory",
    ]
    with open(os.path.join(manager.base_path, "2", "saved_model.pb"), "w") as f:
        f.write("fake")  # the export finished: a version
    assert manager.version_directories() == {1: "1", 2: "2"}


def test_removing_the_only_version_makes_the_model_unavailable(manager):
    make_version(manager.base_path, "1")
    manager.poll()
    first = _serving(manager)
    shutil.rmtree(os.path.join(manager.base_path, "1"))
    manager.poll()
    _wait_for_state(manager, 1, State.END)
    assert first.unloaded.is_set() and manager.status() == [(1, State.END, "")]
    with pytest.raises(ServingError, match="no version of it is loaded"):
        _serving(manager)
    make_version(manager.base_path, "2")  # a new export serves again
    manager.poll()
    assert [(v, s) for v, s, _ in manager.status()] == [(2, State.AVAILABLE), (1, State.END)]
    assert _serving(manager).version == 2


def test_a_newer_version_is_swapped_in_and_the_old_one_unloaded(manager):
    make_version(manager.base_path, "1")
    manager.poll()
    first = _serving(manager)
    make_version(manager.base_path, "2")
    manager.poll()
    _wait_for_state(manager, 1, State.END)
    assert _serving(manager).version == 2 and first.unloaded.is_set()


def test_a_removed_version_falls_back_to_the_next_highest(manager):
    make_version(manager.base_path, "1")
    make_version(manager.base_path, "3")
    manager.poll()
    assert _serving(manager).version == 3
    shutil.rmtree(os.path.join(manager.base_path, "3"))
    manager.poll()  # 1 is still on disk: loaded, in 3's place
    _wait_for_state(manager, 3, State.END)
    assert [(v, s) for v, s, _ in manager.status()] == [(3, State.END), (1, State.AVAILABLE)]
    assert _serving(manager).version == 1


def test_a_removed_version_is_unloaded_when_the_next_fails_to_load(manager):
    make_version(manager.base_path, "1")
    manager.poll()
    make_version(manager.base_path, "2", "broken")
    manager.poll()
    assert _serving(manager).version == 1  # the old version serves while 2 fails
    shutil.rmtree(os.path.join(manager.base_path, "1"))
    manager.poll()
    _wait_for_state(manager, 1, State.END)
    states = manager.status()
    assert [(v, s) for v, s, _ in states] == [(2, State.END), (1, State.END)]
    # the reason, without the server's paths: clients see version numbers only
    assert states[0][2] == "failed to load: <model base path>/2/variables: no variables to restore"
    with pytest.raises(ServingError, match="no version of it is loaded"):
        _serving(manager)


def test_versions_are_immutable(manager):
    """Another model copied in under the number served is not loaded in its place."""
    make_version(manager.base_path, "1")
    manager.poll()
    served = _serving(manager)
    shutil.rmtree(os.path.join(manager.base_path, "1"))
    make_version(manager.base_path, "1", "another model")
    manager.poll()
    assert _serving(manager) is served
    assert manager.status() == [(1, State.AVAILABLE, "")]


def test_a_base_path_replaced_by_a_file_is_a_model_without_versions(manager, caplog):
    """Polled as a base path moved away (no version: unavailable), with no traceback at every
    poll; the directory put back serves again."""
    base = manager.base_path
    make_version(base, "1")
    manager.poll()
    shutil.move(base, f"{base}.moved")
    with open(base, "w") as f:
        f.write("junk")
    with caplog.at_level(logging.WARNING):
        manager.poll()
        manager.poll()
    _wait_for_state(manager, 1, State.END)
    assert "Traceback" not in caplog.text and "NotADirectoryError" not in caplog.text
    os.remove(base)
    shutil.move(f"{base}.moved", base)
    make_version(base, "2")
    manager.poll()
    assert _serving(manager).version == 2
