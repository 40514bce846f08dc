"""The installed ``elmo-tf`` console script and ``python -c`` run as a user runs them, and
samples of the native log lines the stderr filter drops and keeps."""

import os
import shutil
import subprocess
import sys

SCRIPT = shutil.which("elmo-tf", path=os.path.dirname(sys.executable)) or shutil.which("elmo-tf")


def blocker(directory, modules=("tensorflow", "keras")):
    """A ``sitecustomize`` in ``directory`` that makes ``modules`` unimportable in a process
    whose ``PYTHONPATH`` names it: TensorFlow and Keras, to show what the command does before
    they start; TensorFlow alone, as on a machine without it (Keras then names the extra)."""
    directory.mkdir(exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        f"import sys\nfor name in {tuple(modules)!r}:\n    sys.modules[name] = None\n"
    )
    return directory


def run_python(code, tmp_path, block_tensorflow=False, env=None, timeout=120, **kwargs):
    """``subprocess.run`` of ``python -c code`` with a user's environment (``env`` adds to it);
    ``block_tensorflow`` runs it as on a machine without TensorFlow. Other arguments go to
    ``subprocess.run``."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env or {})
    if block_tensorflow:
        path = str(blocker(tmp_path / "blocker", ("tensorflow",)))
        environment["PYTHONPATH"] = os.pathsep.join([path, environment.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def run_script(argv, cwd, block_tensorflow=False, env=None, timeout=120):
    """``subprocess.run`` of ``elmo-tf ARGV`` in ``cwd`` with a user's environment (no
    ``TF_CPP_MIN_LOG_LEVEL``; ``env`` adds to it); ``block_tensorflow`` makes TensorFlow and
    Keras unimportable in it (a ``sitecustomize`` beside ``cwd``), to show what answers
    before TensorFlow starts."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env or {})
    if block_tensorflow:
        path = str(blocker(cwd.parent / f"{cwd.name}-blocker"))
        environment["PYTHONPATH"] = os.pathsep.join([path, environment.get("PYTHONPATH", "")])
    return subprocess.run(
        [SCRIPT, *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# What TensorFlow's and LiteRT's native code writes on its own (the filter drops these lines),
# and lines that matter (it keeps them), for the filter's tests.
NATIVE_NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795431059.823246    2784 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1795431059.823593    2784 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795431059.871603    2784 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow "
    "with the appropriate compiler flags.",
    "E0000 00:00:1795431063.740748    2827 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "E0000 00:00:1795431501.418101    6295 util.cc:131] oneDNN supports DT_BOOL only on platforms "
    "with AVX-512. Falling back to the default Eigen-based implementation if present.",
    "E0000 00:00:1795431501.418101    6295 util.cc:131] oneDNN supports DT_INT64 only on platforms "
    "with AVX-512. Falling back to the default Eigen-based implementation if present.",
    "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
]


KEPT = [
    "elmo-tf embed: error: nope.txt: input file not found",
    "W0000 00:00:1795431501.418101    6295 op_kernel.cc:1857] OP_REQUIRES failed: OOM",
    "E0000 00:00:1795431501.418101    6295 dso_loader.cc:70] Could not load libcudnn.so.9",
    "F0000 00:00:1795431501.418101    6295 cuda_platform.cc:9] Check failed: fatal",
    "4/4 sentences [==============================] 45 tokens/s, 0.6s",
]
