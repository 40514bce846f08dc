"""The precision option: which runtime and CPU honour which precision, the one line each refusal
says, the CPU's flags read from its cpuinfo, the commands' --precision refused before any model
loads, and the fidelity figures (cosine, largest difference) on arrays whose answer is known."""

import numpy as np
import pytest

from elmo_tf import precision
from elmo_tf.cli.main import main
from elmo_tf.precision import PrecisionError
from elmo_tf.probes import fidelity

ZEN4 = {"avx512f", "avx512_bf16", "avx512_vnni"}
SAPPHIRE_RAPIDS = {"avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile"}
ZEN3 = {"avx2", "fma"}
SKYLAKE = {"avx512f", "avx512bw", "avx512vl"}  # AVX-512 without BF16: oneDNN emulates it


@pytest.fixture(autouse=True)
def onednn_as_it_starts(monkeypatch):
    """oneDNN on, uncapped (CI reruns the suite with ONEDNN_MAX_CPU_ISA set): each test sets
    what it is about."""
    for variable in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.parametrize("runtime", ["tensorflow", "torch", "jax"])
@pytest.mark.parametrize("flags", [ZEN4, SAPPHIRE_RAPIDS])
def test_bfloat16_runs_in_process_on_a_cpu_with_native_bfloat16(runtime, flags, monkeypatch):
    assert precision.check("bfloat16", runtime, "cpu", flags) == "bfloat16"
    assert precision.dtype_policy("bfloat16") == "bfloat16"


@pytest.mark.parametrize("runtime", ["tensorflow", "jax"])
@pytest.mark.parametrize("flags", [ZEN3, SKYLAKE, set()])
def test_bfloat16_is_refused_on_a_cpu_without_it_and_allowed_on_a_gpu(runtime, flags):
    with pytest.raises(PrecisionError) as caught:
        precision.check("bfloat16", runtime, "cpu", flags)
    assert str(caught.value) == (
        "bfloat16 needs a CPU with AVX-512 BF16 or AMX (this one has neither): use float32, or "
        "int8 through elmo-tf export onnx OUTPUT --precision int8"
    )
    assert precision.check("bfloat16", runtime, "gpu", flags) == "bfloat16"


@pytest.mark.parametrize("value", ["0", "false", "False", "FALSE", " fAlSe "])
def test_tensorflow_bfloat16_needs_onednn(monkeypatch, value):
    """TensorFlow lowercases the variable: every spelling of false turns oneDNN off."""
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", value)
    with pytest.raises(PrecisionError, match="which TF_ENABLE_ONEDNN_OPTS=0 turns off"):
        precision.check("bfloat16", "tensorflow", "cpu", ZEN4)
    assert precision.check("bfloat16", "torch", "cpu", ZEN4) == "bfloat16"


@pytest.mark.parametrize("variable", ["ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"])
@pytest.mark.parametrize("value", ["AVX2", "avx512_core", " SSE41 ", "AVX512_CORE_VNNI"])
def test_tensorflow_bfloat16_needs_onednns_bfloat16_instructions(monkeypatch, variable, value):
    """A cap below AVX512_CORE_BF16 keeps oneDNN from the CPU's bfloat16 (its kernels would fail
    at the first call): refused in one line naming the cap, as oneDNN reads it."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(PrecisionError) as caught:
        precision.check("bfloat16", "tensorflow", "cpu", ZEN4)
    assert str(caught.value) == (
        f"bfloat16 on TensorFlow runs through oneDNN, which ONEDNN_MAX_CPU_ISA="
        f"{value.strip().upper()} keeps from this CPU's bfloat16 instructions: unset it, or use "
        "float32"
    )
    assert precision.check("bfloat16", "torch", "cpu", ZEN4) == "bfloat16"


@pytest.mark.parametrize("value", ["AVX512_CORE_BF16", "avx512_core_amx", "ALL", ""])
def test_a_cap_that_keeps_bfloat16_lets_it_run(monkeypatch, value):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", value)
    assert precision.check("bfloat16", "tensorflow", "cpu", ZEN4) == "bfloat16"


@pytest.mark.parametrize("value", ["1", "true", "TRUE", ""])
def test_onednn_left_on_lets_bfloat16_run(monkeypatch, value):
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", value)
    assert precision.check("bfloat16", "tensorflow", "cpu", ZEN4) == "bfloat16"


@pytest.mark.parametrize(
    ("name", "runtime", "message"),
    [
        ("int8", "tensorflow", "int8 runs through an export: elmo-tf export onnx OUTPUT"),
        ("int8", "torch", "int8 runs through an export"),
        ("int8", "jax", "int8 runs through an export"),
        ("bfloat16", "onnx", "ONNX Runtime has no bfloat16 matmul on x86 CPUs"),
        ("bfloat16", "tflite", "the TFLite export is float32 or int8"),
        ("fp16", "onnx", "precision must be one of float32, bfloat16, int8, got 'fp16'"),
        ("bfloat61", "torch", "did you mean 'bfloat16'?"),
    ],
)
def test_what_a_runtime_cannot_honour_is_one_line(name, runtime, message):
    with pytest.raises(PrecisionError, match=message) as caught:
        precision.check(name, runtime, "cpu", ZEN4)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("runtime", precision.RUNTIMES)
def test_float32_runs_everywhere(runtime):
    assert precision.check("float32", runtime, "cpu", set()) == "float32"


@pytest.mark.parametrize("runtime", ["onnx", "tflite"])
def test_int8_runs_on_the_exports_whatever_the_cpu(runtime):
    assert precision.check("int8", runtime, "cpu", ZEN3) == "int8"


def test_int8_has_no_keras_policy():
    assert precision.dtype_policy("float32") == "float32"
    with pytest.raises(PrecisionError, match="int8 runs through an export"):
        precision.dtype_policy("int8")


def test_the_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\n"
        "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    flags = precision.cpu_flags(cpuinfo)
    assert flags == {"fpu", "avx2", "avx512f", "avx512_bf16", "avx512_vnni"}
    assert precision.native_bf16(flags=flags)
    assert not precision.native_bf16(flags={"avx2"})
    assert precision.cpu_flags(tmp_path / "missing") == set()  # no /proc: no flags


def test_an_arm_cpu_with_bf16_in_its_features_line_computes_bfloat16(tmp_path):
    """Arm's /proc/cpuinfo names its extensions on a "Features" line (Neoverse V1: bf16)."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve bf16 i8mm\n"
        "CPU implementer\t: 0x41\n\nprocessor\t: 1\nFeatures\t: fp\n"
    )
    flags = precision.cpu_flags(cpuinfo)
    assert flags == {"fp", "asimd", "sve", "bf16", "i8mm"} and precision.native_bf16(flags=flags)
    assert precision.check("bfloat16", "tensorflow", "cpu", flags) == "bfloat16"
    graviton2 = {"fp", "asimd", "atomics"}  # Neoverse N1: no bf16
    with pytest.raises(precision.PrecisionError, match="bfloat16 needs a CPU with"):
        precision.check("bfloat16", "tensorflow", "cpu", graviton2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["embed", "IN", "OUT.hdf5", "--precision", "int8"],
            "--precision int8: int8 runs through an export: elmo-tf export onnx OUTPUT "
            "--precision int8 (ONNX Runtime) or elmo-tf export tflite OUTPUT --precision int8",
        ),
        (
            ["embed", "IN", "OUT.hdf5", "--onnx", "m.onnx", "--precision", "bfloat16"],
            "--precision bfloat16 with --onnx: the ONNX file holds its own precision",
        ),
        (
            ["export", "onnx", "OUT.onnx", "--precision", "bfloat16"],
            "--precision bfloat16: bfloat16: ONNX Runtime has no bfloat16 matmul",
        ),
        (
            ["export", "tflite", "OUT.tflite", "--precision", "bfloat16"],
            "the TFLite export is float32 or int8",
        ),
        (
            ["export", "tflite", "OUT.tflite", "--precision", "float32", "--quantize", "dynamic"],
            "--precision float32 and --quantize dynamic: pass one",
        ),
        (["senses", "--precision", "int8"], "invalid choice: 'int8'"),
        (["export", "saved-model", "OUT", "--precision", "int8"], "invalid choice: 'int8'"),
    ],
)
def test_a_precision_a_command_cannot_run_is_refused_before_the_model_loads(
    argv, message, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "IN").write_text("Hello world .\n")
    (tmp_path / "m.onnx").write_bytes(b"")
    for module in ("embed", "export", "senses"):
        monkeypatch.setattr(
            f"elmo_tf.cli.{module}.load_model", lambda *a, **k: pytest.fail("the model loaded")
        )
    assert main(argv) in (1, 2)
    err = capsys.readouterr().err
    assert message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["IN", "m.onnx"]


def test_fidelity_of_known_arrays():
    rng = np.random.default_rng(0)
    reference = rng.standard_normal((3, 4, 8)).astype(np.float32)
    lengths = np.array([4, 2, 0])
    test = reference.copy()
    test[0, 0] *= 2.0  # the same direction: cosine 1, difference |x|
    test[1, 1] = -test[1, 1]  # the opposite direction: cosine -1
    test[1, 3] = 99.0  # padding: not compared
    result = fidelity.token_fidelity(reference, test, lengths)
    assert result.tokens == 6
    assert result.cos_min == pytest.approx(-1.0)
    assert result.cos_mean == pytest.approx(4 / 6)
    assert result.max_abs == pytest.approx(
        max(np.abs(reference[0, 0]).max(), 2 * np.abs(reference[1, 1]).max())
    )
    assert result.scale == pytest.approx(np.abs(reference[lengths[:, None] > np.arange(4)]).max())
    same = fidelity.token_fidelity(reference, reference, lengths)
    assert (same.cos_mean, same.cos_p1, same.max_abs) == (pytest.approx(1.0), pytest.approx(1.0), 0)


def test_fidelity_compares_every_per_token_key_of_two_results():
    rng = np.random.default_rng(1)
    shapes = {"word_emb": 4, "lstm_outputs1": 8, "lstm_outputs2": 8, "elmo": 8}
    result = {key: rng.standard_normal((2, 3, d)).astype(np.float32) for key, d in shapes.items()}
    result.update(default=np.zeros((2, 8), np.float32), sequence_len=np.array([3, 1], np.int32))
    table = fidelity.compare(result, result)
    assert sorted(table) == sorted(shapes)
    assert all(row.tokens == 4 and row.max_abs == 0 for row in table.values())
    with pytest.raises(ValueError, match="different lengths"):
        fidelity.compare(result, {**result, "sequence_len": np.array([3, 2], np.int32)})


def test_a_bfloat16_saved_model_is_refused_where_this_cpu_cannot_check_it(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(precision, "cpu_flags", lambda path=None: {"avx2", "avx512f"})
    monkeypatch.setattr(
        "elmo_tf.cli.export.load_model", lambda *a, **k: pytest.fail("the model loaded")
    )
    assert main(["export", "saved-model", "OUT", "--precision", "bfloat16"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(
        "--precision bfloat16: bfloat16 needs a CPU with AVX-512 BF16 or AMX (this one has "
        "neither): use float32, or int8 through elmo-tf export onnx OUTPUT --precision int8"
    )
    assert list(tmp_path.iterdir()) == []
