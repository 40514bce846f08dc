"""Keeps TensorFlow's C++ start-up chatter off the command line's stderr.

TensorFlow's native libraries write through absl logging before anything initialises it, so
``TF_CPP_MIN_LOG_LEVEL`` does not silence them: every CPU-only run prints the oneDNN notice,
"Could not find cuda drivers", the CPU-feature advice and an ``E ... failed call to cuInit``
error that is no error on a machine without a GPU (on a machine with one, the CUDA lines pass:
they may tell of a real fault). Those lines come from C++ and go straight to
file descriptor 2, so the only place to drop them is there: ``filtered_stderr`` points fd 2 at
a pipe and a thread copies every line to the real stderr except the known, harmless ones.
Everything else (the command's own messages, Python warnings, any other native warning or
error) passes unchanged and in order.

``--verbose`` or ``TF_CPP_MIN_LOG_LEVEL=0`` turns the filter off.

``start_tensorflow_quietly`` (what ``import elmo_tf`` does) imports TensorFlow and lets it find
its devices inside the filter: the CUDA probing lines come at the first device query, not at
import, and would otherwise reach a Python user's stderr at the first op.
"""

import contextlib
import glob
import os
import re
import sys
import threading

# An absl/glog line: severity letter, MMDD, time, thread id, source file:line].
_NATIVE_PREFIX = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ ([\w./+-]+):\d+\] ")
# Native sources of the CUDA probe: their warnings and errors are noise on a machine without a
# GPU ("failed call to cuInit"), and can be the only sign of a real fault on one that has a GPU
# (a driver or cuDNN version mismatch): they pass there (``gpu_present``).
_CUDA_SOURCES = (
    b"cuda_platform.cc",
    b"cuda_executor.cc",
    b"cudart_stub.cc",
    b"cuda_dnn.cc",
    b"cuda_fft.cc",
    b"cuda_blas.cc",
    b"cuda_diagnostics.cc",
)
# Native sources whose warnings and errors are noise on any machine.
_HARMLESS_SOURCES = (
    b"cpu_feature_guard.cc",
    b"port.cc",
    b"tf_tfl_flatbuffer_helpers.cc",  # the TFLite converter's "Ignored output_format"
    b"add_port.cc",  # gRPC's bind failure, which the command reports in its own line
)
# Native messages that look alarming but only say which kernel runs (oneDNN names a dtype it
# leaves to Eigen: DT_BOOL, DT_INT64, ..., printed at error level even on AVX-512 CPUs).
_HARMLESS_MESSAGE = re.compile(rb"oneDNN supports DT_[A-Z0-9]+ only on platforms with AVX-512")
_HARMLESS_LINES = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"To enable the following instructions:",  # cpu_feature_guard's second line
    b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",  # LiteRT, at each interpreter
)


# More noise a running command declares (``also_drop``): compiled bytes patterns.
_extra_noise = []


@contextlib.contextmanager
def also_drop(pattern):
    """While the block runs, the filter also drops lines matching ``pattern`` (bytes regex):
    the log lines of a library's child processes, which write to the same stderr."""
    compiled = re.compile(pattern)
    _extra_noise.append(compiled)
    try:
        yield
    finally:
        _extra_noise.remove(compiled)


def is_noise(line):
    """Whether one line (bytes, without its newline) is harmless native log output."""
    if line.startswith(_HARMLESS_LINES):
        return True
    if any(pattern.match(line) for pattern in _extra_noise):
        return True
    match = _NATIVE_PREFIX.match(line)
    if match is None:
        return False
    severity, source = match.group(1), os.path.basename(match.group(2))
    if severity == b"F":  # a fatal error always shows
        return False
    message = line[match.end() :]
    # Info lines never concern a user; warnings and errors only from the known sources.
    if severity == b"I" or source in _HARMLESS_SOURCES or _HARMLESS_MESSAGE.match(message):
        return True
    return source in _CUDA_SOURCES and not gpu_present()


# Where a GPU's driver shows itself without asking CUDA: NVIDIA's device nodes and driver
# directory, AMD's compute device (ROCm).
_GPU_DEVICE_PATTERNS = ("/dev/nvidia[0-9]*", "/dev/kfd")
_GPU_DRIVER_DIRECTORY = "/proc/driver/nvidia/gpus"
_gpu_present = None


def gpu_present():
    """Whether this machine has a GPU driver (read once, from the file system)."""
    global _gpu_present
    if _gpu_present is None:
        found = any(glob.glob(pattern) for pattern in _GPU_DEVICE_PATTERNS)
        try:
            found = found or bool(os.listdir(_GPU_DRIVER_DIRECTORY))
        except OSError:
            pass
        _gpu_present = found
    return _gpu_present


def wanted(verbose=False):
    """Whether to filter: not with ``--verbose`` or ``TF_CPP_MIN_LOG_LEVEL=0``."""
    return not verbose and os.environ.get("TF_CPP_MIN_LOG_LEVEL") != "0"


def quiet():
    """``filtered_stderr()`` unless the user asked for the native lines (``wanted``)."""
    return filtered_stderr() if wanted() else contextlib.nullcontext()


def hide_info_lines():
    """Sets ``TF_CPP_MIN_LOG_LEVEL=1`` where the user set no level: TensorFlow's INFO lines
    (a dataset's default buffer size, ...) concern no user; its warnings and errors still
    show. Read at TensorFlow's first log line, so set before TensorFlow starts."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def start_tensorflow_quietly():
    """Imports TensorFlow and initialises its devices, dropping the harmless native lines."""
    if "tensorflow" in sys.modules and getattr(sys.modules["tensorflow"], "config", None):
        return
    hide_info_lines()
    with quiet():
        import tensorflow as tf  # lazy: only when the public API is first needed

        tf.config.list_physical_devices()  # the CUDA probe writes its lines here


def start_keras_quietly():
    """Imports Keras, and TensorFlow where it is Keras's backend (``start_tensorflow_quietly``),
    dropping the harmless native lines; another backend imports no TensorFlow."""
    hide_info_lines()
    with quiet():
        import keras  # lazy: only when the public API is first needed

        if keras.config.backend() == "tensorflow":
            import tensorflow as tf  # lazy: Keras imported it; its devices start here

            tf.config.list_physical_devices()  # the CUDA probe writes its lines here


_unfiltered = None  # a text stream on the real stderr while a filter runs


def unfiltered_stderr():
    """The process's real stderr as a text stream, also while ``filtered_stderr`` runs.

    A progress bar writes here: it must see whether stderr is a terminal, and its
    carriage-return redraws must not wait for a newline in the filter's pipe.
    """
    return sys.stderr if _unfiltered is None else _unfiltered


@contextlib.contextmanager
def filtered_stderr():
    """Drops ``is_noise`` lines written to file descriptor 2 while the block runs (inside a
    running filter, the block just runs)."""
    global _unfiltered
    if _unfiltered is not None:
        yield
        return
    sys.stderr.flush()
    real = os.dup(2)
    _unfiltered = os.fdopen(
        os.dup(real), "w", buffering=1, encoding="utf-8", errors="backslashreplace"
    )
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def copy():
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not is_noise(line.rstrip(b"\r\n")):
                    os.write(real, line)

    thread = threading.Thread(target=copy, name="stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        _unfiltered.close()
        _unfiltered = None
        sys.stderr.flush()
        os.dup2(real, 2)  # closes the pipe's last write end in this process: the copier ends
        # A child process that outlives the command still holds the pipe: don't wait for it,
        # and leave the copier its descriptor.
        thread.join(timeout=2.0)
        if not thread.is_alive():
            os.close(real)
