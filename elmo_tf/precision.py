"""The precision a model computes in: one option, ``float32`` (the default), ``bfloat16`` or
``int8``, for every runtime that can honour it, and one line where it cannot.

=============  =========================================  ====================================
runtime        ``bfloat16``                                ``int8``
=============  =========================================  ====================================
TensorFlow,    Keras's ``bfloat16`` policy: bfloat16      through an export (below)
PyTorch, JAX   weights, matmuls and convolutions; on a
               CPU, only one with native bfloat16
               (AVX-512 BF16 or AMX)
ONNX Runtime   no (no bfloat16 matmul on x86 CPUs)         ``export onnx --precision int8``:
                                                           int8 weights, activations quantised
                                                           per call (``onnx_quantize``)
TFLite         no                                          ``export tflite --precision int8``
                                                           (``--quantize dynamic``)
=============  =========================================  ====================================

``check(precision, runtime)`` raises ``PrecisionError`` in one line naming what the precision
needs; ``dtype_policy(precision)`` is the Keras policy of the in-process runtimes. For
inference, ``bfloat16`` gives the numbers of ``mixed_bfloat16`` bit for bit (that policy casts
every float32 weight to bfloat16 before using it), without casting every weight at every call,
and with half the weights' memory. A CPU
without native bfloat16 emulates it, slower than float32 (oneDNN on AVX-512 without BF16,
Eigen or PyTorch's own kernels on AVX2: tens of times slower), so it is refused there rather
than run slowly. ``ELMo(..., dtype="mixed_bfloat16")`` (or ``"bfloat16"``) is Keras's own
switch and is not checked. How far each precision moves the numbers, and how fast it runs, is
measured in docs/performance.md ("Reduced precision"; ``benchmarks/precision.py``).
"""

import os

from elmo_tf import checks
from elmo_tf.errors import ElmoError

PRECISIONS = ("float32", "bfloat16", "int8")
DEFAULT_PRECISION = "float32"
RUNTIMES = ("tensorflow", "torch", "jax", "onnx", "tflite")
# The runtimes in this process (Keras's backends), against the exported files' runtimes.
IN_PROCESS = ("tensorflow", "torch", "jax")
# /proc/cpuinfo flags of native bfloat16 arithmetic: AVX-512 BF16 (Cooper Lake, Zen 4 on),
# AMX (Sapphire Rapids on), and Arm's BF16 extension (its "Features" line: Neoverse V1 on).
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# oneDNN's CPU ISA caps below AVX512_CORE_BF16: TensorFlow's bfloat16 kernels then fail to
# build (a graph error at the first call), whatever the CPU has
ONEDNN_ISAS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")
CPUINFO = "/proc/cpuinfo"

_INT8_THROUGH_EXPORT = (
    "int8 runs through an export: elmo-tf export onnx OUTPUT --precision int8 (ONNX Runtime) "
    "or elmo-tf export tflite OUTPUT --precision int8"
)


class PrecisionError(ElmoError, ValueError):
    """A precision that this runtime or this CPU cannot honour (the message says what it needs)."""


def check_name(precision, name="precision"):
    """``precision`` if it is one of ``PRECISIONS``, else ``PrecisionError`` naming ``name``."""
    if precision not in PRECISIONS:
        raise PrecisionError(
            f"{name} must be one of {', '.join(PRECISIONS)}, got {checks.shown(precision)}"
            + (checks.did_you_mean(precision, PRECISIONS) if isinstance(precision, str) else "")
        )
    return precision


def cpu_flags(path=CPUINFO):
    """The CPU's feature flags (``/proc/cpuinfo``'s first ``flags`` line on x86, ``Features``
    line on Arm), or an empty set where there is no such file (macOS, Windows)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def onednn_isa_cap():
    """The instruction set oneDNN is capped at (``ONEDNN_MAX_CPU_ISA``, else its older name
    ``DNNL_MAX_CPU_ISA``), upper-cased as oneDNN reads it; ``""`` when neither is set."""
    value = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    return value.strip().upper()


def native_bf16(runtime=None, flags=None):
    """Whether this CPU computes bfloat16 natively: PyTorch's own reading of the CPU
    (``torch.cpu.get_capabilities()``, PyTorch 2.13 on) for ``runtime="torch"``, else the
    flags (``flags``, default ``cpu_flags()``)."""
    if runtime == "torch" and flags is None:
        capabilities = _torch_capabilities()
        if capabilities is not None:
            return any(capabilities.get(flag) for flag in BF16_FLAGS)
    flags = cpu_flags() if flags is None else flags
    return any(flag in flags for flag in BF16_FLAGS)


def check(precision, runtime, device="cpu", flags=None):
    """Raises ``PrecisionError`` (one line: what ``precision`` needs, and what to use instead)
    unless ``runtime`` (one of ``RUNTIMES``) can compute in ``precision`` on ``device``
    (``"cpu"`` or ``"gpu"``) of this machine (``flags``: the CPU's, default ``cpu_flags()``).
    Returns ``precision``."""
    check_name(precision)
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {RUNTIMES}, got {runtime!r}")
    if precision == "float32":
        return precision
    if precision == "int8":
        if runtime in IN_PROCESS:
            raise PrecisionError(_INT8_THROUGH_EXPORT)
        return precision
    # bfloat16
    if runtime == "onnx":
        raise PrecisionError(
            "bfloat16: ONNX Runtime has no bfloat16 matmul on x86 CPUs; export with "
            "--precision int8, or run bfloat16 on the TensorFlow or PyTorch path"
        )
    if runtime == "tflite":
        raise PrecisionError(
            "bfloat16: the TFLite export is float32 or int8 (--precision int8); bfloat16 runs "
            "on the TensorFlow and PyTorch paths"
        )
    if device == "cpu":
        if not native_bf16(runtime, flags):
            raise PrecisionError(
                "bfloat16 needs a CPU with AVX-512 BF16 or AMX (this one has neither): use "
                "float32, or int8 through elmo-tf export onnx OUTPUT --precision int8"
            )
        # TensorFlow reads the variable lowercased: FALSE and False turn oneDNN off as 0 does
        onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower()
        if runtime == "tensorflow" and onednn in ("0", "false"):
            raise PrecisionError(
                "bfloat16 on TensorFlow runs through oneDNN, which TF_ENABLE_ONEDNN_OPTS=0 "
                "turns off: unset it, or use float32"
            )
        isa = onednn_isa_cap()
        if runtime == "tensorflow" and isa in ONEDNN_ISAS_WITHOUT_BF16:
            raise PrecisionError(
                f"bfloat16 on TensorFlow runs through oneDNN, which ONEDNN_MAX_CPU_ISA={isa} keeps "
                "from this CPU's bfloat16 instructions: unset it, or use float32"
            )
    return precision


def runs(precision, runtime, device="cpu"):
    """Whether ``precision`` runs on ``runtime`` here: :func:`check` passes (a test or a docs
    example skips on it)."""
    try:
        check(precision, runtime, device)
    except PrecisionError:
        return False
    return True


def dtype_policy(precision):
    """The Keras dtype policy that computes in ``precision`` on the in-process runtimes:
    ``"float32"`` or ``"bfloat16"``; ``PrecisionError`` for ``int8``."""
    check_name(precision)
    if precision == "int8":
        raise PrecisionError(_INT8_THROUGH_EXPORT)
    return precision


def default_device(runtime):
    """``"gpu"`` where Keras's ``runtime`` backend computes on a GPU by default, else
    ``"cpu"`` (the device whose bfloat16 ``check`` asks about)."""
    if runtime == "jax":
        import jax  # lazy: the JAX backend's

        return "cpu" if jax.default_backend() == "cpu" else "gpu"
    if runtime == "torch":
        import torch  # lazy: the PyTorch backend's

        return "gpu" if torch.cuda.is_available() else "cpu"
    if runtime == "tensorflow":
        import tensorflow as tf  # lazy: the TensorFlow backend's

        return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
    return "cpu"


def _torch_capabilities():
    """``torch.cpu.get_capabilities()`` where PyTorch has it (2.13 on), else ``None``."""
    try:
        import torch  # lazy: only asked on the PyTorch path
    except ImportError:
        return None
    reader = getattr(torch.cpu, "get_capabilities", None)
    return reader() if reader is not None else None
