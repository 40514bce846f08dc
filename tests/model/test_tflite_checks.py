"""The TFLite export's checks without a conversion: Flex ops detected and refused, user errors,
outputs of the wrong kind and missing directories refused before the model loads."""

import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from elmo_tf.cli.main import main
from elmo_tf.export.tflite import non_builtin_ops


def test_flex_ops_are_detected_and_refused():
    # The negative control for the check above: a string op converted with SELECT_TF_OPS.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def count_tokens(sentences):
        return {"n": tf.strings.split(sentences).row_lengths()}

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [count_tokens.get_concrete_function()], count_tokens
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    flatbuffer = converter.convert()
    assert "FlexStringSplitV2" in non_builtin_ops(flatbuffer)
    with pytest.raises(RuntimeError, match="Flex delegate"):
        Interpreter(model_content=flatbuffer).allocate_tensors()


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--batch-size", "0"], "batch_size must be from 1 to 4,096, got 0"),
        (["--batch-size", "1000000000"], "batch_size must be from 1 to 4,096, got 1,000,000,000"),
        (["--max-length", "-3"], "max_length must be from 1 to 10,000 (max_tokens_per_line)"),
        (["--max-length", "100000"], "max_length must be from 1 to 10,000"),
        (["--options", "x.json"], "--options was given without --weights; pass both"),
    ],
)
def test_user_errors_exit_1(flags, fragment, tmp_path, capsys):
    assert main(["export", "tflite", str(tmp_path / "m.tflite"), *flags]) == 1
    assert fragment in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_output_of_the_wrong_kind_is_refused_before_the_model_loads(
    tmp_path, tiny_files, capsys, monkeypatch
):
    """A .tflite output naming a directory, a SavedModel base directory naming a file: one
    line each before the model loads (they failed late, the TFLite one naming a temp file)."""
    options, weights = tiny_files
    monkeypatch.setattr(
        "elmo_tf.cli.export.load_model", lambda *a, **k: pytest.fail("the model was loaded")
    )
    model = ["--options", str(options), "--weights", str(weights)]
    assert main(["export", "tflite", str(tmp_path), *model]) == 1
    assert f"{tmp_path}: names a directory, expected a .tflite file name" in (
        capsys.readouterr().err
    )
    (tmp_path / "base").write_text("a file\n", encoding="utf-8")
    assert main(["export", "saved-model", str(tmp_path / "base"), *model]) == 1
    assert f"{tmp_path / 'base'}: is a file; OUTDIR is the model's base directory" in (
        capsys.readouterr().err
    )
    assert (tmp_path / "base").read_text(encoding="utf-8") == "a file\n"


def test_missing_output_directory_exits_1(tmp_path, tiny_files, capsys):
    options, weights = tiny_files
    outfile = tmp_path / "missing" / "m.tflite"
    argv = ["export", "tflite", str(outfile), "--options", str(options), "--weights", str(weights)]
    assert main(argv) == 1
    assert "does not exist" in capsys.readouterr().err
