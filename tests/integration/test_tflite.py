"""The TFLite export: built-in ops only, and the LiteRT interpreter reproduces the model."""

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter
from support.numerics import assert_reordered

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.export.litert import weight_types
from elmo_tf.export.tflite import export_tflite, non_builtin_ops, operator_names, run_tflite
from elmo_tf.models import output_keys

OUTPUT_KEYS = output_keys(2)  # the tiny model has two LSTM layers


BATCH_SIZE = 4  # below the golden "mixed" batch's 6 sentences, so run_tflite must chunk


def _export(tmp_path_factory, tiny_files, *flags):
    options, weights = tiny_files
    path = tmp_path_factory.mktemp("tflite") / "elmo.tflite"
    argv = ["export", "tflite", str(path), "--options", str(options), "--weights", str(weights)]
    assert main(argv + ["--batch-size", str(BATCH_SIZE), *flags]) == 0
    return path


@pytest.fixture(scope="module")
def float_model(tmp_path_factory, tiny_files):
    return _export(tmp_path_factory, tiny_files)


@pytest.fixture(scope="module")
def quantized_model(tmp_path_factory, tiny_files):
    return _export(tmp_path_factory, tiny_files, "--precision", "int8")


def _golden_batches(golden):
    meta, _ = golden
    for name, keys in meta["batches"].items():
        yield name, elmo_tf.batch_to_ids([meta["sentences"][k] for k in keys])


def test_cli_writes_builtin_only_flatbuffer(float_model):
    assert [p.name for p in float_model.parent.iterdir()] == ["elmo.tflite"]  # no temp left
    ops = operator_names(float_model)
    assert "WHILE" in ops and "CONV_2D" in ops  # the op list is really read
    assert non_builtin_ops(float_model) == []
    runner = Interpreter(model_path=str(float_model)).get_signature_runner("serving_default")
    (char_ids,) = runner.get_input_details().values()
    assert char_ids["dtype"] == np.int32
    assert char_ids["shape_signature"].tolist() == [BATCH_SIZE, -1, 50]
    assert sorted(runner.get_output_details()) == sorted(OUTPUT_KEYS)


@pytest.mark.numerics
def test_outputs_equal_model_on_golden_batches(float_model, tiny_model, golden):
    # One interpreter for every batch: lengths 1..35 resize the dynamic time axis each call.
    interpreter = Interpreter(model_path=str(float_model))
    for name, char_ids in _golden_batches(golden):
        expected = tiny_model(char_ids)
        outputs = run_tflite(interpreter, char_ids)
        assert sorted(outputs) == sorted(OUTPUT_KEYS), name
        for key in OUTPUT_KEYS:
            want = expected[key].numpy()
            assert outputs[key].shape == want.shape, (name, key)
            assert outputs[key].dtype == want.dtype, (name, key)
            assert_reordered(outputs[key], want, err_msg=f"{name} {key}")


@pytest.mark.numerics
def test_fixed_max_length_through_the_api(tmp_path, tiny_model, golden):
    assert tiny_model.dedupe_tokens  # exported through a copy without UniqueV2
    path = tmp_path / "fixed.tflite"
    export_tflite(tiny_model, path, batch_size=2, max_length=12)
    assert tiny_model.dedupe_tokens
    assert non_builtin_ops(path) == []
    interpreter = Interpreter(model_path=str(path))
    details = interpreter.get_signature_runner().get_input_details()["char_ids"]
    assert details["shape_signature"].tolist() == [2, 12, 50]
    batches = dict(_golden_batches(golden))
    char_ids = batches["with_empty"]  # 3 sentences x 10 tokens: two 2 x 12 calls, then cut
    outputs = run_tflite(interpreter, char_ids)
    for key in OUTPUT_KEYS:
        assert_reordered(outputs[key], tiny_model(char_ids)[key])
    with pytest.raises(ValueError, match="--max-length 12"):
        run_tflite(interpreter, batches["mixed"])  # 35 tokens


@pytest.mark.numerics
def test_dynamic_range_quantization(float_model, quantized_model, golden):
    assert non_builtin_ops(quantized_model) == []
    ratio = quantized_model.stat().st_size / float_model.stat().st_size
    float_interpreter = Interpreter(model_path=str(float_model))
    quantized_interpreter = Interpreter(model_path=str(quantized_model))
    error = 0.0
    for _, char_ids in _golden_batches(golden):
        exact = run_tflite(float_interpreter, char_ids)
        approx = run_tflite(quantized_interpreter, char_ids)
        np.testing.assert_array_equal(approx["sequence_len"], exact["sequence_len"])
        for key in set(OUTPUT_KEYS) - {"sequence_len"}:
            error = max(error, float(np.abs(approx[key] - exact[key]).max()))
    print(f"quantized/float size ratio {ratio:.3f}, max abs error vs float {error:.4f}")
    # Measured on the tiny model: ratio 0.659 (its weights are a small part of the file, the
    # graph the rest) and error 0.205 with outputs up to |5.3|: int8 weights err by up to 1/254
    # of each channel's range and that compounds through the CNN, highway and 35 steps of two
    # LSTM layers. 0.5 leaves room for kernel differences while still catching a broken
    # (e.g. unscaled) quantisation, whose error would be of the order of the outputs.
    assert ratio < 0.8
    assert np.isfinite(error) and 0.0 < error < 0.5


def test_running_prints_no_native_line(float_model, capfd):
    """LiteRT's "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." at an interpreter's
    first run stays off stderr; what else reaches fd 2 passes."""
    run_tflite(str(float_model), elmo_tf.batch_to_ids([["Hello"]]))
    run_tflite(Interpreter(model_path=str(float_model)), elmo_tf.batch_to_ids([["Hi"]]))
    assert capfd.readouterr().err == ""


def test_int8_weights_inside_the_loop_bodies(
    float_model, quantized_model, tmp_path_factory, tiny_files
):
    """--precision int8 stores the LSTM step's recurrent kernel as int8 inside the WHILE bodies
    (the converter sinks the frozen kernels into them as constants), the input halves in the
    block loop's bodies too; it quantises weights of 1,024 elements or more, so the tiny
    model's projection (32 x 16) stays float32 (the published shapes' are 65,536 and up)."""
    exact, approx = weight_types(float_model), weight_types(quantized_model)
    assert sorted(exact) == sorted(approx)
    # The step loops (nested in the block loops: ".../while_1/while_body") and the block loops.
    bodies = [name for name in approx if name.endswith("_body")]
    steps = [name for name in bodies if name.split("/")[-2].startswith("while")]
    blocks = [name for name in bodies if name not in steps]
    assert len(steps) == 2 and len(blocks) == 2  # one of each per LSTM layer
    for name in steps:
        assert exact[name] == {("FULLY_CONNECTED", "FLOAT32"): 4}, name
        # per direction: the recurrent (16, 128) in int8, the projection (32, 16) in float
        assert approx[name] == {("FULLY_CONNECTED", "INT8"): 2, ("FULLY_CONNECTED", "FLOAT32"): 2}
    for name in blocks:
        assert approx[name] == {("FULLY_CONNECTED", "INT8"): 2}, name  # the input halves

    # --quantize dynamic, the flag that came first, writes the same file.
    legacy = _export(tmp_path_factory, tiny_files, "--quantize", "dynamic")
    assert legacy.read_bytes() == quantized_model.read_bytes()
