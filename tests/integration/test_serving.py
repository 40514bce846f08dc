"""The TF Serving-protocol server and client: stock stubs against the local SavedModel, REST,
errors, version swaps, graceful shutdown and dynamic batching.

Servers listen on 127.0.0.1 with ephemeral ports and are always stopped by finalizers; every
gRPC and HTTP call has a timeout.
"""

import concurrent.futures
import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from support.console import blocker
from support.numerics import assert_reordered
from support.paths import ROOT as REPOSITORY
from support.serving_gate import gate_servable_run
from support.serving_requests import SENTENCES, proto_request
from tensorflow.python.tools import saved_model_utils
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.models import output_keys
from elmo_tf.serving.client import embed, make_request
from elmo_tf.serving.options import BatchingOptions
from elmo_tf.serving.server import ModelServer, ServerOptions

OUTPUT_KEYS = output_keys(2)  # the tiny model has two LSTM layers


ROOT = str(REPOSITORY)


TIMEOUT = 30  # seconds, for every call


MAX_REQUEST_BYTES = 256 * 1024


BATCHING = BatchingOptions(
    max_batch_size=8, batch_timeout_micros=50_000, max_enqueued_batches=4, num_batch_threads=1
)


OK = 200


@pytest.fixture(scope="module")
def base_path(tiny_export):
    """A model base path holding version 1 of the tiny model (shared: never changed)."""
    return tiny_export


@pytest.fixture(scope="module")
def local(base_path):
    """The exported signatures, loaded here: what every answer must equal."""
    return tf.saved_model.load(str(base_path / "1")).signatures


def _start(request, options):
    server = ModelServer(options)
    request.addfinalizer(lambda: server.stop(grace=5))
    return server.start()


@pytest.fixture(scope="module")
def batched(request, base_path):
    options = ServerOptions(
        str(base_path),
        port=0,
        rest_port=0,
        batching=BATCHING,
        poll_seconds=0,
        max_request_bytes=MAX_REQUEST_BYTES,
    )
    return _start(request, options)


@pytest.fixture(scope="module")
def unbatched(request, base_path):
    options = ServerOptions(
        str(base_path),
        port=0,
        rest_port=None,
        batching=None,
        poll_seconds=0,
        max_request_bytes=MAX_REQUEST_BYTES,
    )
    return _start(request, options)


def _channel(request, port):
    channel = grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", -1)]
    )
    request.addfinalizer(channel.close)
    return channel


@pytest.fixture(scope="module")
def stub(request, batched):
    return prediction_service_pb2_grpc.PredictionServiceStub(_channel(request, batched.port))


@pytest.fixture(scope="module")
def model_stub(request, batched):
    return model_service_pb2_grpc.ModelServiceStub(_channel(request, batched.port))


@pytest.fixture(scope="module")
def unbatched_stub(request, unbatched):
    return prediction_service_pb2_grpc.PredictionServiceStub(_channel(request, unbatched.port))


def _local_outputs(local, signature, sentences):
    """The loaded SavedModel's outputs for what ``make_request`` sends on ``signature``."""
    sent = make_request(sentences, signature).inputs
    return {
        key: value.numpy()
        for key, value in local[signature](
            **{alias: tf.constant(tf.make_ndarray(proto)) for alias, proto in sent.items()}
        ).items()
    }


def _outputs(response):
    return {key: tf.make_ndarray(value) for key, value in response.outputs.items()}


def _assert_equal(outputs, expected, keys=OUTPUT_KEYS):
    assert sorted(outputs) == sorted(keys)
    for key in keys:
        assert outputs[key].shape == expected[key].shape, key
        assert_reordered(outputs[key], expected[key], err_msg=key)


def _predict(stub, sentences, signature="default", **kwargs):
    return stub.Predict(make_request(sentences, signature, **kwargs), timeout=TIMEOUT)


@pytest.mark.numerics
@pytest.mark.parametrize("which", ["batched", "unbatched"])
@pytest.mark.parametrize("signature", ["default", "serving_default", "", "tokens", "char_ids"])
def test_predict_equals_the_saved_model(which, signature, request, local):
    stub = request.getfixturevalue("stub" if which == "batched" else "unbatched_stub")
    sent_as = "default" if signature in ("serving_default", "") else signature
    predict_request = make_request(SENTENCES, sent_as)
    predict_request.model_spec.signature_name = signature
    response = stub.Predict(predict_request, timeout=TIMEOUT)
    expected = _local_outputs(local, sent_as, SENTENCES)
    _assert_equal(_outputs(response), expected)
    assert response.model_spec.name == "elmo"
    assert response.model_spec.version.value == 1
    assert response.model_spec.signature_name == (signature or "serving_default")


def test_output_filter_and_version(stub, local):
    response = _predict(stub, SENTENCES, "tokens", outputs=["default", "sequence_len"], version=1)
    expected = _local_outputs(local, "tokens", SENTENCES)
    _assert_equal(_outputs(response), expected, keys=["default", "sequence_len"])
    np.testing.assert_array_equal(_outputs(response)["sequence_len"], [10, 2, 0, 7, 6])


def test_client_embed_and_cli(batched, local, capsys, tmp_path):
    server = f"127.0.0.1:{batched.port}"
    token_lists = [s.split() for s in SENTENCES]
    outputs = embed(server, token_lists, signature="char_ids", timeout=TIMEOUT)
    _assert_equal(outputs, _local_outputs(local, "char_ids", SENTENCES))

    text = tmp_path / "sentences.txt"
    text.write_text("\n".join(SENTENCES[:2]) + "\n", encoding="utf-8")
    assert main(["client", "--server", server, "--signature", "tokens", str(text)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "elmo (2, 10, 32) float32" in lines and "default (2, 32) float32" in lines
    assert main(["client", "--server", server, "--output", "default", "--json", "Hello !"]) == 0
    values = json.loads(capsys.readouterr().out)
    assert_reordered(values["default"], _local_outputs(local, "default", ["Hello !"])["default"])
    assert main(["client", "--server", server, "--signature", "tokens", "--version", "9", "x"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err


def test_client_reads_dash_as_standard_input(batched, monkeypatch, tmp_path, capsys):
    """``-`` is standard input (a file named ``-`` is ``./-``); empty input says so by name."""
    server = f"127.0.0.1:{batched.port}"
    (tmp_path / "-").write_text("a file named dash\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for stdin, rows in [(b"one\ntwo three\n", 2), (b"", None)]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        status = main(["client", "--server", server, "--output", "sequence_len", "--json", "-"])
        captured = capsys.readouterr()
        if rows is None:
            assert status == 1
            assert "elmo-tf client: error: standard input: no sentences" in captured.err
        else:
            assert status == 0 and json.loads(captured.out)["sequence_len"] == [1, 2]
    assert main(["client", "--server", server, "--output", "sequence_len", "--json", "./-"]) == 0
    assert json.loads(capsys.readouterr().out)["sequence_len"] == [4]


def test_metadata_and_status(stub, model_stub, base_path):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "elmo"
    response = stub.GetModelMetadata(request, timeout=TIMEOUT)
    assert response.model_spec.version.value == 1
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(signature_map)
    on_disk = saved_model_utils.get_meta_graph_def(str(base_path / "1"), "serve").signature_def
    assert dict(signature_map.signature_def) == dict(on_disk)
    tokens = signature_map.signature_def["tokens"]
    assert sorted(tokens.inputs) == ["sequence_len", "tokens"]
    assert tokens.inputs["sequence_len"].dtype == tf.int32.as_datatype_enum
    assert sorted(tokens.outputs) == sorted(OUTPUT_KEYS)

    status_request = get_model_status_pb2.GetModelStatusRequest()
    status_request.model_spec.name = "elmo"
    (status,) = model_stub.GetModelStatus(status_request, timeout=TIMEOUT).model_version_status
    assert (status.version, status.state, status.status.error_code) == (1, 30, 0)  # AVAILABLE
    status_request.model_spec.version.value = 3
    with pytest.raises(grpc.RpcError) as e:
        model_stub.GetModelStatus(status_request, timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def _http(port, path, body=None, data=None):
    """``(status, JSON answer)`` of a GET, or a POST of ``body`` (JSON) or ``data`` (bytes)."""
    if body is not None:
        data = json.dumps(body).encode("utf-8")
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data), timeout=TIMEOUT) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_rest_equals_grpc(batched, stub):
    port = batched.rest_port
    grpc_default = _outputs(_predict(stub, SENTENCES))
    status, answer = _http(port, "/v1/models/elmo:predict", {"instances": SENTENCES})
    assert status == OK
    for key in OUTPUT_KEYS:
        rows = np.array([row[key] for row in answer["predictions"]])
        assert_reordered(rows, grpc_default[key], err_msg=key)

    grpc_tokens = _outputs(_predict(stub, SENTENCES, "tokens"))
    sent = {a: tf.make_ndarray(p) for a, p in make_request(SENTENCES, "tokens").inputs.items()}
    tokens = [[t.decode() for t in row] for row in sent["tokens"]]
    columnar = {
        "signature_name": "tokens",
        "inputs": {"tokens": tokens, "sequence_len": sent["sequence_len"].tolist()},
    }
    status, answer = _http(port, "/v1/models/elmo/versions/1:predict", columnar)
    assert status == OK
    for key in OUTPUT_KEYS:
        assert_reordered(answer["outputs"][key], grpc_tokens[key])
    rows = [{"tokens": t, "sequence_len": n} for t, n in zip(tokens, sent["sequence_len"].tolist())]
    status, answer = _http(
        port, "/v1/models/elmo:predict", {"signature_name": "tokens", "instances": rows}
    )
    assert status == OK
    assert_reordered([r["elmo"] for r in answer["predictions"]], grpc_tokens["elmo"])

    assert _http(port, "/v1/models/elmo") == (
        OK,
        {
            "model_version_status": [
                {
                    "version": "1",
                    "state": "AVAILABLE",
                    "status": {"error_code": "OK", "error_message": ""},
                }
            ]
        },
    )
    status, metadata = _http(port, "/v1/models/elmo/versions/1/metadata")
    assert status == OK and metadata["model_spec"] == {
        "name": "elmo",
        "signature_name": "",
        "version": "1",
    }
    inputs = metadata["metadata"]["signature_def"]["signature_def"]["tokens"]["inputs"]
    assert inputs["sequence_len"]["dtype"] == "DT_INT32"


# The transport's limit and one case of the table end to end; the table itself, in process:
# tests/model/test_serving_requests.py.
BAD_GRPC = {
    "unknown signature": (
        lambda: proto_request("words", sentences=[b"a"]),
        grpc.StatusCode.NOT_FOUND,
        "signature 'words' not found",
    ),
    "over the size limit": (
        lambda: make_request(["word " * (MAX_REQUEST_BYTES // 5)]),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "",
    ),
}


@pytest.mark.parametrize("case", list(BAD_GRPC))
def test_bad_grpc_request(case, stub, local):
    build, code, message = BAD_GRPC[case]
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(build(), timeout=TIMEOUT)
    assert e.value.code() == code
    assert message in e.value.details()
    _assert_equal(
        _outputs(_predict(stub, ["still up ."])), _local_outputs(local, "default", ["still up ."])
    )


# The HTTP layer's size limit and one case of the table end to end; the table itself, in
# process: tests/model/test_serving_requests.py.
BAD_REST = {
    "not JSON": ("/v1/models/elmo:predict", b"{instances", 400, "not valid JSON"),
    "over the size limit": (
        "/v1/models/elmo:predict",
        {"instances": ["w " * MAX_REQUEST_BYTES]},
        413,
        "over the limit",
    ),
    "far over the size limit": (
        "/v1/models/elmo:predict",
        {"instances": ["w " * (16 * MAX_REQUEST_BYTES)]},
        413,
        "over the limit",
    ),
}


@pytest.mark.parametrize("case", list(BAD_REST))
def test_bad_rest_request(case, batched):
    path, body, status, message = BAD_REST[case]
    data = body if isinstance(body, bytes) else None
    got, answer = _http(batched.rest_port, path, None if data else body, data)
    assert got == status and message in answer["error"]
    got, answer = _http(batched.rest_port, "/v1/models/elmo:predict", {"inputs": ["still up"]})
    assert got == OK and np.array(answer["outputs"]["elmo"]).shape == (1, 2, 32)


def test_full_queue_is_resource_exhausted(batched, stub, monkeypatch, local):
    entered, release = gate_servable_run(monkeypatch, TIMEOUT)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        try:
            first = pool.submit(_predict, stub, ["runs first"])
            assert entered.wait(TIMEOUT)  # the only batch thread is busy
            # 32 rows queued = max_enqueued_batches (4) full batches of max_batch_size (8)
            queued = pool.submit(_predict, stub, ["waits"] * 32)
            deadline = time.monotonic() + TIMEOUT
            while batched.batch_stats()["queued_rows"] < 32:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            with pytest.raises(grpc.RpcError) as e:
                _predict(stub, ["one too many"])
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "queue of signature 'default' is full" in e.value.details()
            status, answer = _http(
                batched.rest_port,
                "/v1/models/elmo:predict",
                {"signature_name": "default", "instances": ["one too many"]},
            )
            assert status == 429 and "is full" in answer["error"]
        finally:
            release.set()
        assert first.result(TIMEOUT).outputs["elmo"].tensor_shape.dim[1].size == 2
        assert tf.make_ndarray(queued.result(TIMEOUT).outputs["default"]).shape == (32, 32)
    _assert_equal(
        _outputs(_predict(stub, ["still up ."])), _local_outputs(local, "default", ["still up ."])
    )


@pytest.mark.numerics
def test_concurrent_requests_batched_equal_unbatched(batched, stub, unbatched_stub):
    requests = [
        (SENTENCES[i % 5 : i % 5 + 1 + i % 3], ("default", "tokens", "char_ids")[i % 3])
        for i in range(18)
    ]
    before = batched.batch_stats()
    barrier = threading.Barrier(len(requests))

    def call(args):
        barrier.wait(TIMEOUT)
        return _outputs(_predict(stub, *args))

    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(call, requests))
    after = batched.batch_stats()
    assert after["requests"] - before["requests"] == len(requests)
    assert after["batches"] - before["batches"] < len(requests)  # some requests shared a batch
    for args, answer in zip(requests, answers):
        _assert_equal(answer, _outputs(_predict(unbatched_stub, *args)))


def test_new_version_is_served_without_restart(request, base_path, tiny_files, tmp_path):
    from elmo_tf.export.saved_model import export_saved_model

    base = tmp_path / "elmo"
    shutil.copytree(base_path / "1", base / "1")
    server = _start(
        request,
        ServerOptions(str(base), port=0, rest_port=None, poll_seconds=0.2, batching=BATCHING),
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(_channel(request, server.port))
    model_stub = model_service_pb2_grpc.ModelServiceStub(_channel(request, server.port))
    old = _outputs(_predict(stub, SENTENCES))

    model = elmo_tf.load_pretrained(*tiny_files)
    model.scalar_mixes[0].scalar_weights.assign([2.0, -1.0, 0.5])  # a visibly different mix
    export_saved_model(model, str(base))
    status_request = get_model_status_pb2.GetModelStatusRequest()
    status_request.model_spec.name = "elmo"
    deadline = time.monotonic() + TIMEOUT
    while True:
        states = {
            s.version: s.state
            for s in model_stub.GetModelStatus(status_request, timeout=TIMEOUT).model_version_status
        }
        if states == {2: 30, 1: 50}:  # 2 AVAILABLE, 1 END (unloaded)
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.1)
    response = _predict(stub, SENTENCES)
    assert response.model_spec.version.value == 2
    new = _outputs(response)
    assert_reordered(new["word_emb"], old["word_emb"])  # same weights
    assert np.abs(new["elmo"] - old["elmo"]).max() > 0.1  # another mix
    with pytest.raises(grpc.RpcError) as e:
        _predict(stub, SENTENCES, version=1)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def _lines(stream):
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in stream], daemon=True).start()
    return lines


@pytest.mark.parametrize("kind", ["saved_model", "onnx"])
def test_sigterm_finishes_the_request_in_flight(kind, base_path, request, tmp_path):
    """The request is slow because it waits 6 s for a batch to fill; SIGTERM comes before it
    is answered. Also for a version held as an int8 ONNX file (``model.onnx``)."""
    if kind == "onnx":
        pytest.importorskip("onnxruntime")  # the [onnx] extra
        base_path = tmp_path / "elmo"
        (base_path / "1").mkdir(parents=True)
        shutil.copy(request.getfixturevalue("tiny_int8_onnx"), base_path / "1" / "model.onnx")
    command = [
        os.path.join(os.path.dirname(sys.executable), "elmo-tf"),  # the console script
        "serve",
        "--model-base-path",
        str(base_path),
        "--port",
        "0",
        "--poll-seconds",
        "0",
        "--batch-timeout-micros",
        "6000000",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        line = _lines(process.stdout).get(timeout=60)
        port = int(re.search(r"gRPC 127\.0\.0\.1:(\d+)", line).group(1))
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            future = stub.Predict.future(make_request(SENTENCES), timeout=TIMEOUT)
            # A status call sent after it on the same connection: once it is answered, the
            # server has read the predict before it (its batch then waits 6 s to fill).
            status = get_model_status_pb2.GetModelStatusRequest()
            status.model_spec.name = "elmo"
            model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(status, timeout=TIMEOUT)
            assert not future.done()
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            response = future.result(timeout=TIMEOUT)
            answered = time.monotonic()
        assert tf.make_ndarray(response.outputs["sequence_len"]).tolist() == [10, 2, 0, 7, 6]
        assert answered > signalled + 0.5, "the request ended before SIGTERM"
        assert process.wait(timeout=TIMEOUT) == 0
        assert "stopping: finishing the requests in flight" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--model-base-path", "{tmp}", "--sentences", "{tmp}/sotu_1000.txt"], "--sentences"),
        (["--model-base-path", "{tmp}/models/elmo"], "--model-base-path"),
    ],
)
def test_loadtest_names_a_missing_input_in_one_line(tmp_path, flags, fragment):
    """Before any server starts (the script run where TensorFlow is not installed: its
    checks need none)."""
    script = os.path.join(ROOT, "serving", "loadtest.py")
    argv = [f.format(tmp=tmp_path) for f in flags]
    no_tensorflow = str(blocker(tmp_path / "blocker", ("tensorflow",)))
    done = subprocess.run(
        [sys.executable, script, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([no_tensorflow, ROOT])),
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"loadtest.py: error: {fragment} {tmp_path}"), line
    assert "make_corpus.py" in line or "elmo-tf export saved-model" in line, line
