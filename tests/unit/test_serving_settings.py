"""The server's and client's settings and assets, checked without a server: client flags and
inputs, the client library's checks, the batcher's isolation of a failing request, the
deployment assets, the batching parameters file, serve's user errors."""

import concurrent.futures
import os
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from support.paths import ROOT as REPOSITORY

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.serving.client import make_request
from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.options import BatchingOptions, OptionError, read_batching_parameters
from elmo_tf.serving.request_batching import Batcher
from elmo_tf.serving.signature import SignatureSpec

ROOT = str(REPOSITORY)


SERVING = os.path.join(ROOT, "serving")


TIMEOUT = 30  # seconds, for every call


@pytest.mark.parametrize(
    "argv, status, fragment",
    [
        (["--timeout", "0", "s"], 2, "argument --timeout: must be a number of seconds above 0"),
        (["--timeout", "-1", "s"], 2, "argument --timeout: must be a number of seconds above 0"),
        (["--timeout", "nan", "s"], 2, "up to 86400, got nan"),
        (["--timeout", "1e9", "s"], 2, "up to 86400, got 1000000000.0"),
        (["--version", "9" * 20, "s"], 2, "argument --version: must be a version number from 0"),
        (["--version", "-1", "s"], 2, "argument --version: must be a version number from 0"),
        (["{dir}"], 1, "{dir}: input is a directory, expected a text file; to send it as a"),
        (["{dir}/broken"], 1, "{dir}/broken: input file not found; to send it as a sentence"),
    ],
)
def test_client_refuses_bad_flags_and_inputs_before_connecting(
    argv, status, fragment, tmp_path, capsys
):
    """Checked before anything is sent (the server address is a closed port): a number out of
    range is a flag error; a name that exists but is no text file is never a sentence."""
    (tmp_path / "broken").symlink_to(tmp_path / "nothing")
    argv = [a.replace("{dir}", str(tmp_path)) for a in argv]
    assert main(["client", "--server", "127.0.0.1:1", *argv]) == status
    err = capsys.readouterr().err
    assert fragment.replace("{dir}", str(tmp_path)) in err.strip().splitlines()[-1], err
    assert "UNAVAILABLE" not in err


def test_client_library_checks_version_and_timeout():
    with pytest.raises(ValueError, match="version must be an integer from 0 to 92233720368547"):
        make_request(["a"], version=2**63)
    with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
        elmo_tf.serving.client.Client("127.0.0.1:1", timeout=0)


def test_batcher_isolates_a_failing_request():
    """A batch that fails INVALID_ARGUMENT is rerun request by request: only the bad one fails."""
    from tensorflow.core.protobuf import meta_graph_pb2

    signature_def = meta_graph_pb2.SignatureDef()
    signature_def.inputs["x"].dtype = tf.int32.as_datatype_enum
    signature_def.inputs["x"].tensor_shape.dim.add(size=-1)
    signature_def.outputs["y"].dtype = tf.int32.as_datatype_enum
    signature_def.outputs["y"].tensor_shape.dim.add(size=-1)
    calls = []

    def run(inputs):
        calls.append(len(inputs["x"]))
        if (inputs["x"] < 0).any():
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "input 'x' must be positive")
        return {"y": inputs["x"] * 2}

    # The batch closes when its 4 rows are queued (2 + 1 + 1), not when a timer runs out.
    options = BatchingOptions(
        max_batch_size=4, batch_timeout_micros=int(TIMEOUT * 1e6), num_batch_threads=1
    )
    batcher = Batcher(run, SignatureSpec("double", signature_def), options)
    try:
        values = [np.array([1, 2], np.int32), np.array([-1], np.int32), np.array([3], np.int32)]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(batcher.submit, {"x": v}, len(v)) for v in values]
            np.testing.assert_array_equal(futures[0].result(TIMEOUT)["y"], [2, 4])
            with pytest.raises(ServingError, match="must be positive"):
                futures[1].result(TIMEOUT)
            np.testing.assert_array_equal(futures[2].result(TIMEOUT)["y"], [6])
        assert calls[0] == 4 and sorted(calls[1:]) == [1, 1, 2]  # one batch, then one by one
    finally:
        batcher.close()


def test_deployment_assets():
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    with open(os.path.join(SERVING, "models.config"), encoding="utf-8") as f:
        config = text_format.Parse(f.read(), model_server_config_pb2.ModelServerConfig())
    (model,) = config.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == (
        "elmo",
        "/models/elmo",
        "tensorflow",
    )
    parameters = read_batching_parameters(os.path.join(SERVING, "batching_parameters.txt"))
    assert BatchingOptions(**parameters).max_batch_size == parameters["max_batch_size"] > 1
    with open(os.path.join(SERVING, "monitoring.config"), encoding="utf-8") as f:
        assert "prometheus_config" in f.read()
    with open(os.path.join(SERVING, "docker-compose.yml"), encoding="utf-8") as f:
        compose = f.read()
    # A pinned image (serving/README.md says why 2.21.0), the GPU batching set mounted where
    # the server reads its batching file, a GPU memory bound and a healthcheck.
    assert "image: tensorflow/serving:2.21.0-gpu" in compose
    assert "./batching_parameters_gpu.txt:/config/batching_parameters.txt:ro" in compose
    assert "--per_process_gpu_memory_fraction=0.5" in compose
    assert "healthcheck:" in compose and "grep -q AVAILABLE" in compose
    for name in ("models.config", "batching_parameters.txt", "monitoring.config"):
        assert f"/config/{name}" in compose
    gpu = read_batching_parameters(os.path.join(SERVING, "batching_parameters_gpu.txt"))
    assert BatchingOptions(**gpu).max_batch_size == 128 > parameters["max_batch_size"]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "max_batch_sise { value: 64 }",
            "line 1: 'max_batch_sise' is not a field of TF Serving's"
            " BatchingParameters; did you mean 'max_batch_size'?",
        ),
        ("this is not a protobuf text file", "line 1: expected a field such as"),
        (
            "num_batch_threads { value: 2 }\nbatch_timeout_micros { value: abc }",
            "line 2: 'batch_timeout_micros' must be an integer, got 'abc'",
        ),
        ("max_batch_size { value: -5 }", "max_batch_size must be a positive integer, got -5"),
        (
            "num_batch_threads { value: 3000 }",
            "num_batch_threads must be an integer from 1 to 64, got 3000",
        ),
        (
            "max_batch_size { value: 8 }\nmax_batch_size { value: 9 }",
            "line 2: 'max_batch_size' is given twice",
        ),
        (
            "max_batch_size { value: 8 } # eight\npad_variable_length_inputs: true\n"
            'allowed_batch_sizes: 4\nallowed_batch_sizes: 8\nthread_pool_name { value: "p" }',
            None,
        ),
    ],
)
def test_batching_parameters_file_is_read_strictly(tmp_path, text, message):
    """TF Serving's parser refuses what it cannot read; so does this one, naming the line
    (garbage, a typo or a bad value is refused, never taken as default batching)."""
    path = tmp_path / "batching_parameters.txt"
    path.write_text(text + "\n", encoding="utf-8")
    if message is None:  # fields the server does not use are ignored
        assert read_batching_parameters(path) == {"max_batch_size": 8}
        return
    with pytest.raises(OptionError) as error:
        read_batching_parameters(path)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)


def test_serve_cli_user_errors(tmp_path, capsys):
    assert main(["serve", "--model-base-path", str(tmp_path / "none"), "--port", "0"]) == 1
    assert "is not a directory" in capsys.readouterr().err
    argv = ["serve", "--model-base-path", str(tmp_path), "--port", "0", "--max-batch-size", "0"]
    assert main(argv) == 1
    assert "max_batch_size must be a positive integer" in capsys.readouterr().err
    # thread counts are bounded before a thread starts (3,000 started 12,016 threads; 100,000
    # spent 90 s starting them, then left the server half-started)
    # every number is bounded before the model loads (2**31 bytes used to load the model, then
    # die in gRPC's int32 channel arguments; 1e-9 s polling spun a core)
    for flag, value, message in [
        ("--num-batch-threads", "3000", "num_batch_threads must be an integer from 1 to 64"),
        ("--grpc-max-threads", "100000", "grpc_max_threads must be an integer from 1 to 1024"),
        (
            "--max-request-bytes",
            str(2**31),
            "max_request_bytes must be an integer from 1 to 2147483647, got 2147483648",
        ),
        ("--poll-seconds", "1e-9", "poll_seconds must be 0 (never) or a number of seconds from"),
        ("--poll-seconds", "1e300", "poll_seconds must be 0 (never) or a number of seconds from"),
        ("--rest-timeout-seconds", "nan", "rest_timeout_seconds must be a number of seconds above"),
        ("--shutdown-grace-seconds", "inf", "--shutdown-grace-seconds must be a number of seconds"),
        ("--batch-timeout-micros", str(10**17), "batch_timeout_micros must be an integer from 0"),
    ]:
        start = time.monotonic()
        argv = ["serve", "--model-base-path", str(tmp_path), "--port", "0", flag, value]
        assert main(argv) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert message in line and time.monotonic() - start < 5
