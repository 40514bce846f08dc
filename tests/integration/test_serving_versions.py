"""Version directories as TF Serving reads them, and its version semantics.

One parser (``elmo_tf.export.versions``) reads the version directories in polling, status and
REST URLs: ``0007/`` is version 7, read from ``0007/``; a name beyond int64 is ignored. A
removed version is unloaded, falling back to the next highest; with none left, the model is
unavailable (NOT_FOUND, as in TF Serving) until a version is exported. Versions are immutable.

Polls are driven by calling ``manager.poll()`` (servers have ``poll_seconds=0``); servers
listen on 127.0.0.1 with ephemeral ports and are stopped by finalizers.
"""

import json
import logging
import os
import shutil
import socket
import time

import grpc
import pytest
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)

from elmo_tf.serving.client import make_request
from elmo_tf.serving.model_manager import ModelManager, State
from elmo_tf.serving.server import ModelServer, ServerOptions

TIMEOUT = 30  # seconds, for every call
BEYOND_INT64 = "99999999999999999999"


@pytest.fixture(scope="module")
def exported(tiny_export):
    """Version 1 of the tiny model, to copy under other names."""
    return str(tiny_export / "1")


def _manager(request, base):
    manager = ModelManager("elmo", str(base), poll_seconds=0)
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


@pytest.mark.slow
def test_leading_zeros_are_read_from_their_directory(request, exported, tmp_path):
    shutil.copytree(exported, tmp_path / "0007")
    manager = _manager(request, tmp_path)
    assert manager.version_directories() == {7: "0007"}
    manager.poll()
    assert manager.status() == [(7, State.AVAILABLE, "")]
    servable = _serving(manager)
    assert servable.version == 7 and servable.path == str(tmp_path / "0007")


@pytest.mark.slow
def test_version_beyond_int64_is_ignored_with_one_log_line(request, exported, tmp_path, caplog):
    shutil.copytree(exported, tmp_path / "1")
    shutil.copytree(exported, tmp_path / BEYOND_INT64)
    manager = _manager(request, tmp_path)
    with caplog.at_level(logging.WARNING, logger="serving"):
        manager.poll()
        manager.poll()
    assert manager.versions_on_disk() == [1]
    assert _serving(manager).version == 1
    assert manager.status() == [(1, State.AVAILABLE, "")]
    (line,) = [r.getMessage() for r in caplog.records if BEYOND_INT64 in r.getMessage()]
    assert "not a version" in line and "2**63 - 1" in line


@pytest.fixture
def server(request, exported, tmp_path):
    """A server of a base path holding a copy of version 1; it polls only when told."""
    shutil.copytree(exported, tmp_path / "elmo" / "1")
    options = ServerOptions(str(tmp_path / "elmo"), port=0, rest_port=0, poll_seconds=0)
    server = ModelServer(options)
    request.addfinalizer(lambda: server.stop(grace=5))
    return server.start()


@pytest.fixture
def stubs(request, server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    request.addfinalizer(channel.close)
    return (
        prediction_service_pb2_grpc.PredictionServiceStub(channel),
        model_service_pb2_grpc.ModelServiceStub(channel),
    )


def _get(port, path):
    """``(status, JSON body)`` of ``GET path`` on the REST port."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _post(port, path, body):
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _states(model_stub):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "elmo"
    response = model_stub.GetModelStatus(request, timeout=TIMEOUT)
    return {s.version: State.Name(s.state) for s in response.model_version_status}


def _predicted_version(stub):
    return stub.Predict(make_request(["a b"]), timeout=TIMEOUT).model_spec.version.value


@pytest.mark.slow
def test_rest_version_beyond_int64_is_a_400(server):
    for path in (f"/v1/models/elmo/versions/{BEYOND_INT64}", f"/v1/models/elmo/versions/{2**63}"):
        status, answer = _get(server.rest_port, path)
        assert status == 400 and "is not a version: at most 2**63 - 1" in answer["error"]
    status, answer = _post(
        server.rest_port, f"/v1/models/elmo/versions/{BEYOND_INT64}:predict", {"instances": ["a"]}
    )
    assert status == 400 and f"version '{BEYOND_INT64}'" in answer["error"]
    status, answer = _get(server.rest_port, f"/v1/models/elmo/versions/{2**63 - 1}")
    assert status == 404 and f"version {2**63 - 1}" in answer["error"]  # a version, not served


@pytest.mark.slow
def test_removing_the_only_version_makes_the_model_unavailable(server, stubs, exported):
    stub, model_stub = stubs
    base = server.manager.base_path
    assert _predicted_version(stub) == 1
    shutil.rmtree(f"{base}/1")
    server.manager.poll()
    _wait_for_state(server.manager, 1, State.END)
    assert _states(model_stub) == {1: "END"}
    with pytest.raises(grpc.RpcError) as e:
        _predicted_version(stub)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no version of it is loaded" in e.value.details()
    metadata = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    metadata.model_spec.name = "elmo"
    with pytest.raises(grpc.RpcError) as e:
        stub.GetModelMetadata(metadata, timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    status, answer = _post(server.rest_port, "/v1/models/elmo:predict", {"instances": ["a"]})
    assert status == 404 and "no version of it is loaded" in answer["error"]
    status, answer = _get(server.rest_port, "/v1/models/elmo")
    assert status == 200 and answer["model_version_status"][0]["state"] == "END"

    shutil.copytree(exported, f"{base}/2")  # a new export serves again
    server.manager.poll()
    assert _states(model_stub) == {2: "AVAILABLE", 1: "END"}
    assert _predicted_version(stub) == 2
    status, answer = _post(server.rest_port, "/v1/models/elmo:predict", {"instances": ["a"]})
    assert status == 200 and len(answer["predictions"]) == 1


@pytest.mark.slow
def test_a_base_path_replaced_by_a_file_is_a_model_without_versions(server, stubs, caplog):
    # Polled as a base path moved away (no version: unavailable), with no traceback at every
    # poll; the directory put back serves again.
    _, model_stub = stubs
    base = server.manager.base_path
    shutil.move(base, f"{base}.moved")
    with open(base, "w") as f:
        f.write("junk")
    with caplog.at_level(logging.WARNING):
        server.manager.poll()
    _wait_for_state(server.manager, 1, State.END)
    assert "Traceback" not in caplog.text and "NotADirectoryError" not in caplog.text
    os.remove(base)
    shutil.move(f"{base}.moved", base)
    shutil.copytree(f"{base}/1", f"{base}/2")
    server.manager.poll()
    assert _states(model_stub)[2] == "AVAILABLE"


@pytest.mark.slow
def test_removed_version_falls_back_to_the_next_highest(server, stubs, exported):
    stub, model_stub = stubs
    base = server.manager.base_path
    shutil.copytree(exported, f"{base}/3")
    server.manager.poll()
    _wait_for_state(server.manager, 1, State.END)
    assert _predicted_version(stub) == 3
    shutil.rmtree(f"{base}/3")
    server.manager.poll()  # 1 is still on disk: loaded again, in 3's place
    _wait_for_state(server.manager, 3, State.END)
    assert _states(model_stub) == {3: "END", 1: "AVAILABLE"}
    assert _predicted_version(stub) == 1


@pytest.mark.slow
def test_removed_version_is_unloaded_when_the_next_fails_to_load(server, stubs, exported):
    stub, model_stub = stubs
    base = server.manager.base_path
    shutil.copytree(exported, f"{base}/2")
    shutil.rmtree(f"{base}/2/variables")  # version 2 cannot load
    server.manager.poll()
    assert _predicted_version(stub) == 1  # the old version serves while 2 fails
    shutil.rmtree(f"{base}/1")
    server.manager.poll()
    _wait_for_state(server.manager, 1, State.END)
    states = server.manager.status()
    assert [(v, s) for v, s, _ in states] == [(2, State.END), (1, State.END)]
    assert states[0][2].startswith("failed to load")
    with pytest.raises(grpc.RpcError) as e:
        _predicted_version(stub)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.slow
def test_versions_are_immutable(server, exported):
    """Another model copied in under the number served is not loaded in its place."""
    base = server.manager.base_path
    served = _serving(server.manager)
    shutil.rmtree(f"{base}/1")
    shutil.copytree(exported, f"{base}/1")  # a new directory under the same number
    server.manager.poll()
    assert _serving(server.manager) is served
    assert server.manager.status() == [(1, State.AVAILABLE, "")]
