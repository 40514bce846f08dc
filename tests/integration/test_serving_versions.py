"""The version rules as clients see them, through a real server: a version beyond int64 is
a 400 over REST, and a model whose only version is removed answers NOT_FOUND over gRPC and REST
(as TF Serving does) until a version is exported again. The rules themselves, on stand-in
servables: tests/unit/test_model_versions.py.

Polls are driven by calling ``manager.poll()`` (servers have ``poll_seconds=0``); servers
listen on 127.0.0.1 with ephemeral ports and are stopped by finalizers.
"""

import json
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
from elmo_tf.serving.model_manager import State
from elmo_tf.serving.server import ModelServer, ServerOptions

TIMEOUT = 30  # seconds, for every call
BEYOND_INT64 = "99999999999999999999"


@pytest.fixture(scope="module")
def exported(tiny_export):
    """Version 1 of the tiny model, to copy under other names."""
    return str(tiny_export / "1")


def _wait_for_state(manager, version, state):
    """Waits (bounded) for ``version``'s state: unloading runs on its own thread."""
    deadline = time.monotonic() + TIMEOUT
    while (states := {v: s for v, s, _ in manager.status()}).get(version) != state:
        assert time.monotonic() < deadline, states
        time.sleep(0.01)


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
