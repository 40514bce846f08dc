"""ONNX versions (``BASE/N/model.onnx``) in ``elmo-tf serve``: answers over gRPC and REST equal
``elmo-tf embed --onnx`` on the same file, the SavedModel's signatures listed, the same limits,
warm-up, and a damaged, hostile or mixed version refused in one log line while another serves.

Servers listen on 127.0.0.1 with ephemeral ports and are stopped by finalizers; every call has
a timeout.
"""

import json
import logging
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import grpc
import h5py
import numpy as np
import onnx
import pytest
import tensorflow as tf
from support.foreign_models import EFML_TINY
from support.paths import ROOT
from support.serving_requests import SENTENCES
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)

from elmo_tf.cli.main import main
from elmo_tf.export.saved_model_warmup import write_warmup_requests
from elmo_tf.formats.embedding_file import layer_stack
from elmo_tf.serving.client import embed, make_request
from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.model_manager import ModelManager, Servable, State, read_signature_defs
from elmo_tf.serving.onnx_servable import OnnxServable
from elmo_tf.serving.options import BatchingOptions
from elmo_tf.serving.request_limits import DEFAULT_MAX_REQUEST_ROWS, RequestLimits
from elmo_tf.serving.server import ModelServer, ServerOptions

TIMEOUT = 30  # seconds, for every call
ATOL = 1e-6  # the server runs the file on the rows embed --onnx runs
BATCHING = BatchingOptions(
    max_batch_size=8, batch_timeout_micros=20_000, max_enqueued_batches=4, num_batch_threads=1
)


def onnx_version(base, version, source):
    """``base/version/model.onnx``, a copy of ``source`` (Triton's layout)."""
    directory = base / str(version)
    directory.mkdir(parents=True)
    shutil.copy(source, directory / "model.onnx")
    return directory


def embed_onnx(path, sentences, directory):
    """What ``elmo-tf embed --onnx path --all`` writes for ``sentences``: ``{line: array}``."""
    text, output = directory / "in.txt", directory / "out.hdf5"
    text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    assert main(["embed", str(text), str(output), "--onnx", str(path), "--all"]) == 0
    with h5py.File(output, "r") as f:
        return {i: f[str(i)][...] for i in range(len(sentences))}


def assert_rows_equal(outputs, expected, sentences):
    """Each row of a served batch's outputs, as ``embed --all`` stacks them, against embed's."""
    stack = layer_stack(outputs, 2)
    for i, sentence in enumerate(sentences):
        n = len(sentence.split())
        np.testing.assert_allclose(stack[:, i, :n], expected[i], rtol=0, atol=ATOL, err_msg=i)


def start(request, base, **options):
    server = ModelServer(ServerOptions(str(base), port=0, rest_port=0, poll_seconds=0, **options))
    request.addfinalizer(lambda: server.stop(grace=5))
    return server.start()


def http(port, path, body=None):
    data = None if body is None else json.dumps(body).encode("utf-8")
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data), timeout=TIMEOUT) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def int8_base(tmp_path_factory, tiny_int8_onnx):
    base = tmp_path_factory.mktemp("int8") / "elmo"
    onnx_version(base, 1, tiny_int8_onnx)
    return base


@pytest.fixture(scope="module")
def expected(tiny_int8_onnx, tmp_path_factory):
    return embed_onnx(tiny_int8_onnx, SENTENCES, tmp_path_factory.mktemp("embed"))


@pytest.fixture(scope="module")
def server(request, int8_base):
    return start(request, int8_base, batching=BATCHING)


@pytest.fixture(scope="module")
def channel(request, server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    request.addfinalizer(channel.close)
    return channel


@pytest.mark.parametrize("signature", ["default", "tokens", "char_ids"])
def test_grpc_answers_equal_embed_onnx(signature, server, expected):
    outputs = embed(f"127.0.0.1:{server.port}", SENTENCES, signature, timeout=TIMEOUT)
    assert_rows_equal(outputs, expected, SENTENCES)
    np.testing.assert_array_equal(outputs["sequence_len"], [10, 2, 0, 7, 6])


def test_rest_answers_equal_embed_onnx(server, expected):
    status, answer = http(server.rest_port, "/v1/models/elmo:predict", {"instances": SENTENCES})
    assert status == 200
    rows = answer["predictions"]
    outputs = {key: np.array([row[key] for row in rows]) for key in rows[0]}
    assert_rows_equal(outputs, expected, SENTENCES)
    request = make_request(SENTENCES, "tokens")
    sent = {alias: tf.make_ndarray(proto) for alias, proto in request.inputs.items()}
    columnar = {
        "signature_name": "tokens",
        "inputs": {
            "tokens": [[t.decode() for t in row] for row in sent["tokens"]],
            "sequence_len": sent["sequence_len"].tolist(),
        },
    }
    status, answer = http(server.rest_port, "/v1/models/elmo/versions/1:predict", columnar)
    assert status == 200
    assert_rows_equal({k: np.array(v) for k, v in answer["outputs"].items()}, expected, SENTENCES)
    assert http(server.rest_port, "/v1/models/elmo")[1]["model_version_status"][0]["state"] == (
        "AVAILABLE"
    )


def _described(signature_defs):
    """What a client reads of ``SignatureDef``s: per signature, its method and its inputs' and
    outputs' aliases, dtypes and shapes (not the graph's tensor names)."""
    return {
        key: (
            signature.method_name,
            *(
                {
                    alias: (info.dtype, [d.size for d in info.tensor_shape.dim])
                    for alias, info in tensors.items()
                }
                for tensors in (signature.inputs, signature.outputs)
            ),
        )
        for key, signature in signature_defs.items()
        if key != "__saved_model_init_op"
    }


def test_metadata_lists_the_saved_models_signatures(channel, tiny_export):
    """A client written for the SavedModel reads the same signatures from the ONNX version."""
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "elmo"
    predictions = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    response = predictions.GetModelMetadata(request, timeout=TIMEOUT)
    served = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(served)
    saved_model = read_signature_defs(str(tiny_export / "1"))
    assert _described(served.signature_def) == _described(saved_model)
    status = get_model_status_pb2.GetModelStatusRequest()
    status.model_spec.name = "elmo"
    stub = model_service_pb2_grpc.ModelServiceStub(channel)
    (version,) = stub.GetModelStatus(status, timeout=TIMEOUT).model_version_status
    assert (version.version, version.state) == (
        1,
        get_model_status_pb2.ModelVersionStatus.AVAILABLE,
    )


def test_an_int8_version_is_checked_with_a_float32_versions_limits(
    tiny_int8_onnx, tiny_export, tmp_path
):
    """The same request, the same limits: the same refusal from either version, in one line
    (the rows of a request are counted from its declared shape, before either version sees
    it: ``test_a_request_over_the_row_limit_is_refused``)."""
    limits = RequestLimits(max_tokens_per_row=4)
    onnx_servable = OnnxServable("elmo", 1, str(onnx_version(tmp_path, 1, tiny_int8_onnx)))
    saved_model = Servable("elmo", 1, str(tiny_export / "1"))
    try:
        cases = [
            ("default", {"sentences": np.array([b"a b c d e"], dtype=object)}),
            ("char_ids", {"char_ids": np.zeros((1, 1, 50), np.int32) + 300}),
            ("tokens", {"tokens": np.array([[b"a"]], object), "sequence_len": np.array([2])}),
        ]
        for key, inputs in cases:
            errors = []
            for servable in (onnx_servable, saved_model):
                with pytest.raises(ServingError) as error:
                    servable.predict(key, inputs, limits=limits)
                errors.append((error.value.code, str(error.value)))
            assert errors[0] == errors[1] and "\n" not in errors[0][1], errors
    finally:
        onnx_servable.unload()
        saved_model.unload()


def test_a_request_over_the_row_limit_is_refused(channel):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(make_request([""] * (DEFAULT_MAX_REQUEST_ROWS + 1)), timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "max_request_rows" in error.value.details()


def test_warm_up_replays_the_versions_records(tiny_int8_onnx, tmp_path):
    """An ONNX version replays ``assets.extra/tf_serving_warmup_requests`` as a SavedModel
    does; without it, each signature once on a one-row input."""
    directory = onnx_version(tmp_path, 1, tiny_int8_onnx)
    servable = OnnxServable("elmo", 1, str(directory))
    try:
        assert servable.warm_up() == 0
        write_warmup_requests(str(directory))
        assert servable.warm_up() > 0
    finally:
        servable.unload()


@pytest.mark.numerics
def test_an_elmoformanylangs_file_maps_tokens_with_its_own_tables(request, tmp_path):
    """A code-point model's file: the host maps tokens with the tables in its metadata, as
    ``embed --onnx`` does; text that is not UTF-8 is INVALID_ARGUMENT (the model decodes it)."""
    path = tmp_path / "efml.onnx"
    assert main(["export", "onnx", str(path), "--model", str(EFML_TINY)]) == 0
    sentences = ["the cat sat", "a dog", "Zürich ."]
    expected = embed_onnx(path, sentences, tmp_path)
    onnx_version(tmp_path / "elmo", 1, path)
    server = start(request, tmp_path / "elmo")
    for signature in ("default", "tokens"):
        outputs = embed(f"127.0.0.1:{server.port}", sentences, signature, timeout=TIMEOUT)
        assert_rows_equal(outputs, expected, sentences)
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        bad = make_request(["ok"])
        bad.inputs["sentences"].string_val[0] = b"caf\xe9"
        with pytest.raises(grpc.RpcError) as error:
            stub.Predict(bad, timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "UTF-8" in error.value.details() and "\n" not in error.value.details()


# ------------------------------------------------------------------ versions refused


def serving(manager):
    with manager.servable() as servable:
        return servable


def _mismatched(source, target):
    """The file with its ``elmo_tf.options`` metadata disagreeing with its graph."""
    proto = onnx.load(str(source))
    (entry,) = [p for p in proto.metadata_props if p.key == "elmo_tf.options"]
    options = json.loads(entry.value)
    options["lstm"]["projection_dim"] *= 2
    entry.value = json.dumps(options)
    onnx.save(proto, str(target))


def _truncated(source, target):
    target.write_bytes(source.read_bytes()[: source.stat().st_size // 2])


def _both_formats(source, target, tiny_export):
    shutil.copy(source, target)
    shutil.copy(tiny_export / "1" / "saved_model.pb", target.parent / "saved_model.pb")


BAD_VERSIONS = {
    "truncated": ("ONNX Runtime cannot load it", _truncated),
    "metadata disagreeing with the graph": ("projection", _mismatched),
    "both formats": ("holds both a SavedModel (saved_model.pb) and an ONNX export", _both_formats),
}


@pytest.mark.parametrize("case", list(BAD_VERSIONS))
def test_a_bad_onnx_version_is_refused_in_one_line_and_the_served_one_stays(
    case, tiny_int8_onnx, tiny_export, tmp_path, caplog
):
    fragment, damage = BAD_VERSIONS[case]
    base = tmp_path / "elmo"
    onnx_version(base, 1, tiny_int8_onnx)
    manager = ModelManager("elmo", str(base), poll_seconds=0)
    try:
        manager.poll()
        (base / "2").mkdir()
        arguments = (tiny_int8_onnx, base / "2" / "model.onnx")
        damage(*arguments, tiny_export) if case == "both formats" else damage(*arguments)
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            manager.poll()  # 2 fails; 1 keeps serving
        (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
        line = record.getMessage()
        assert "version 2 failed to load" in line and fragment in line, line
        assert "\n" not in line
        states = {v: (s, m) for v, s, m in manager.status()}
        assert states[1] == (State.AVAILABLE, "") and states[2][0] == State.END
        assert serving(manager).version == 1
    finally:
        manager.stop(5)


def test_a_new_onnx_version_replaces_a_saved_model(tiny_export, tiny_int8_onnx, tmp_path):
    base = tmp_path / "elmo"
    shutil.copytree(tiny_export / "1", base / "1")
    manager = ModelManager("elmo", str(base), poll_seconds=0)
    try:
        manager.poll()
        assert isinstance(serving(manager), Servable)
        onnx_version(base, 2, tiny_int8_onnx)
        manager.poll()
        served = serving(manager)
        assert isinstance(served, OnnxServable) and served.precision == "int8"
        assert served.version == 2
    finally:
        manager.stop(5)


def test_loadtest_compares_a_saved_model_and_an_onnx_file_side_by_side(
    tiny_export, int8_base, tmp_path
):
    """``serving/loadtest.py`` with two models and two concurrencies: a row per model and
    concurrency, the first model's ratios 1, peak RSS and the version's bytes, and the int8
    file's fidelity against the SavedModel's answers."""
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(s for s in SENTENCES if s) + "\n", encoding="utf-8")
    script = [sys.executable, str(ROOT / "serving" / "loadtest.py")]
    argv = ["--model-base-path", f"float32={tiny_export}", "--model-base-path", f"int8={int8_base}"]
    argv += ["--threads", "1", "--threads", "2", "--seconds", "0.5", "--sentences", str(sentences)]
    done = subprocess.run(
        [*script, *argv, "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[:2] == ["round 1/1: float32", "round 1/1: int8"]
    rows = json.loads(done.stdout)["rows"]
    assert [(r["model"], r["threads"]) for r in rows] == [
        ("float32", 1), ("float32", 2), ("int8", 1), ("int8", 2)
    ]  # fmt: skip
    for row in rows:
        assert row["errors"] == 0 and row["requests_per_s"] > 0 and row["peak_rss_mib"] > 100
        assert row["fidelity_tokens"] == sum(len(s.split()) for s in SENTENCES)
    assert rows[0]["requests_ratio"] == rows[1]["requests_ratio"] == 1.0
    assert rows[0]["cos_p1"] == pytest.approx(1.0, abs=1e-12)  # the reference against itself
    assert 0.99 < rows[2]["cos_p1"] <= rows[2]["cos_mean"] < 1.0
    assert rows[2]["requests_ratio"] == rows[2]["requests_per_s"] / rows[0]["requests_per_s"]
    assert rows[2]["file_mb"] * 1e6 == (int8_base / "1" / "model.onnx").stat().st_size
