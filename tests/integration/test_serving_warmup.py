"""TF Serving's warm-up records: the export writes one request per signature, each answered by
the SavedModel, and ``elmo-tf serve`` replays them when it loads a version, before the version
is AVAILABLE; a record that fails fails the load, as in TF Serving."""

import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_reordered
from tensorflow_serving.apis import (
    model_pb2,
    predict_pb2,
    prediction_log_pb2,
)

from elmo_tf.cli.main import main
from elmo_tf.export.saved_model_warmup import (
    MAX_RECORDS,
    WARMUP_FILE,
)
from elmo_tf.serving.model_manager import ModelManager, State
from elmo_tf.serving.request_limits import RequestLimits


def _records(saved_model_dir):
    """The warm-up file's records, parsed with TF Serving's own protos."""
    logs = []
    for record in tf.data.TFRecordDataset(os.path.join(saved_model_dir, WARMUP_FILE)):
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record.numpy())
        logs.append(log)
    return logs


def test_one_request_per_signature_each_answered_by_the_export(tiny_export):
    version = str(tiny_export / "1")
    logs = _records(version)
    assert [log.WhichOneof("log_type") for log in logs] == ["predict_log"] * 3
    requests = [log.predict_log.request for log in logs]
    assert [r.model_spec.signature_name for r in requests] == ["default", "tokens", "char_ids"]
    loaded = tf.saved_model.load(version)
    answers = []
    for request in requests:
        function = loaded.signatures[request.model_spec.signature_name]
        _, wanted = function.structured_input_signature
        assert sorted(request.inputs) == sorted(wanted)  # exactly the signature's inputs
        tensors = {alias: tf.constant(tf.make_ndarray(t)) for alias, t in request.inputs.items()}
        answers.append({k: v.numpy() for k, v in function(**tensors).items()})
    # The same sentence, "The bank closed .", through each signature: the same vectors.
    for answer in answers:
        assert answer["sequence_len"].tolist() == [4]
        assert answer["elmo"].shape == (1, 4, 32)
        assert_reordered(answer["elmo"], answers[2]["elmo"])


def test_no_warmup_requests_flag_writes_none(tiny_files, tmp_path):
    options, weights = map(str, tiny_files)
    argv = ["export", "saved-model", str(tmp_path), "--options", options, "--weights", weights]
    assert main([*argv, "--no-warmup-requests"]) == 0
    assert os.path.isfile(tmp_path / "1" / "saved_model.pb")
    assert not os.path.exists(tmp_path / "1" / "assets.extra")


def _manager(request, base):
    manager = ModelManager("elmo", str(base), poll_seconds=0)
    request.addfinalizer(lambda: manager.stop(5))
    return manager


def test_serve_replays_the_records_before_the_version_is_available(
    request, tiny_export, tmp_path, caplog
):
    shutil.copytree(tiny_export / "1", tmp_path / "1")
    manager = _manager(request, tmp_path)
    with caplog.at_level(logging.INFO, logger="serving"):
        manager.poll()
    assert manager.status() == [(1, State.AVAILABLE, "")]
    lines = [r.getMessage() for r in caplog.records]
    warmed = lines.index(f"warmed up model 'elmo' version 1: 3 requests of {WARMUP_FILE}")
    assert warmed < lines.index("serving model 'elmo' version 1")


def _write_records(path, requests):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for signature, inputs in requests:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name="elmo", signature_name=signature)
            )
            for alias, value in inputs.items():
                request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())


SENTENCE = {"sentences": np.array([b"Hello !"], dtype=object)}


OUT_OF_RANGE = {"char_ids": np.full([1, 2, 50], 300, np.int32)}


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([("nonexistent", SENTENCE)], "signature 'nonexistent' not found"),
        ([("char_ids", OUT_OF_RANGE)], "input 'char_ids' must hold ids in [0, 261]"),
        ([("default", SENTENCE)] * (MAX_RECORDS + 1), f"more than {MAX_RECORDS} warm-up records"),
        # A record is held to the request limits: one of 5,000,000 tokens ran for minutes.
        (
            [("default", {"sentences": np.array([b"a " * 2000], dtype=object)})],
            "has a row of 2000 tokens, over the limit of 1024 (max_tokens_per_row)",
        ),
    ],
    ids=["unknown signature", "ids out of range", "too many records", "a row over the limit"],
)
def test_a_record_that_fails_fails_the_load(request, tiny_export, tmp_path, records, message):
    shutil.copytree(tiny_export / "1", tmp_path / "1")
    _write_records(str(tmp_path / "1" / WARMUP_FILE), records)
    manager = _manager(request, tmp_path)
    manager.poll()
    ((version, state, error),) = manager.status()
    assert (version, state) == (1, State.END)
    assert error.startswith("failed to load: ") and message in error, error
    with pytest.raises(Exception, match="no version of it is loaded"):
        with manager.servable():
            pass


@pytest.mark.parametrize("max_tokens_per_row, loads", [(3, False), (4, True)])
def test_records_are_replayed_under_the_servers_own_limits(
    request, tiny_export, tmp_path, max_tokens_per_row, loads
):
    """The export's records (a sentence of 4 tokens) against a server's limits other than the
    defaults: the replay checks them as that server checks a client's request."""
    shutil.copytree(tiny_export / "1", tmp_path / "1")
    limits = RequestLimits(max_tokens_per_row=max_tokens_per_row)
    manager = ModelManager("elmo", str(tmp_path), poll_seconds=0, limits=limits)
    request.addfinalizer(lambda: manager.stop(5))
    manager.poll()
    ((version, state, error),) = manager.status()
    if loads:
        assert (version, state, error) == (1, State.AVAILABLE, "")
    else:
        assert state == State.END
        assert "row of 4 tokens, over the limit of 3 (max_tokens_per_row)" in error, error


def test_a_record_declaring_ten_million_sentences_fails_the_load_before_any_array(
    request, tiny_export, tmp_path
):
    # One value under a declared shape [10**7]: tf.make_ndarray repeated it to fill the shape
    # (the server took 9 GB and stopped answering SIGTERM). Checked as a client's request now.
    shutil.copytree(tiny_export / "1", tmp_path / "1")
    sentences = tf.make_tensor_proto([b"Hello !"], dtype=tf.string)
    sentences.tensor_shape.dim[0].size = 10**7
    request_proto = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name="elmo", signature_name="default")
    )
    request_proto.inputs["sentences"].CopyFrom(sentences)
    log = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request_proto)
    )
    path = tmp_path / "1" / WARMUP_FILE
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(log.SerializeToString())
    manager = _manager(request, tmp_path)
    manager.poll()
    ((version, state, error),) = manager.status()
    assert (version, state) == (1, State.END)
    assert "input 'sentences' has 10000000 rows" in error and "max_request_rows" in error, error


def test_a_file_that_is_not_records_fails_the_load(request, tiny_export, tmp_path):
    shutil.copytree(tiny_export / "1", tmp_path / "1")
    with open(tmp_path / "1" / WARMUP_FILE, "wb") as f:
        f.write(b"\x05\x00\x00\x00\x00\x00\x00\x00garbage, not a TFRecord")
    manager = _manager(request, tmp_path)
    manager.poll()
    ((version, state, error),) = manager.status()
    assert (version, state) == (1, State.END) and error.startswith("failed to load: "), error
