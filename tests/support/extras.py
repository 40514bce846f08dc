"""Whether an optional extra's modules are installed, without importing them, and which test
files need which extra (tests/conftest.py leaves them out where it is missing)."""

import importlib.util

SERVING = ("grpc", "tensorflow_serving", "aiohttp")
TFLITE = ("ai_edge_litert",)
ONNX = ("onnxruntime", "onnx", "tf2onnx")
BEAM = ("apache_beam", "pyarrow")
# test file (under tests/) -> the modules it needs
TEST_FILES_NEEDING = {
    "integration/test_serving.py": SERVING,
    "integration/test_serving_robustness.py": SERVING,
    "integration/test_serving_versions.py": SERVING,
    "integration/test_serving_warmup.py": SERVING,
    "integration/test_efml_surfaces.py": SERVING,
    "unit/test_warmup_records.py": SERVING,
    "unit/test_model_versions.py": SERVING,
    "model/test_serving_requests.py": SERVING,
    "unit/test_serving_bounds.py": SERVING,
    "unit/test_serving_settings.py": SERVING,
    "unit/test_grpc_messages.py": SERVING,
    "unit/test_serving_signatures.py": SERVING,
    "unit/test_serving_tensors.py": SERVING,
    "integration/test_tflite.py": TFLITE,
    "model/test_tflite_checks.py": TFLITE,
    "integration/test_onnx.py": ONNX,
    "unit/test_onnx_checks.py": ONNX,
    "integration/test_serving_onnx.py": SERVING + ONNX,
    "integration/test_beam.py": BEAM,
    "unit/test_beam_inputs.py": BEAM,
}


def installed(*modules):
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):  # a parent package missing, or sys.modules[m] = None
        return False
