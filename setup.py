"""Package metadata of elmo-tf."""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
TENSORFLOW = "tensorflow>=2.21,<2.22"
# What the [tensorflow] extra installs, and every extra that brings TensorFlow brings it all:
# export saved-model writes TF Serving's warm-up records (PredictionLog protos), so a [hub],
# [tflite] or [beam] install runs every command the [tensorflow] one does.
TENSORFLOW_STACK = [TENSORFLOW, "tensorflow-serving-api>=2.21,<2.22"]
PROTOBUF = "protobuf>=6.31.1,<8"  # TensorFlow 2.21's range
VERSION = re.search(
    r'^__version__ = "([^"]+)"', (HERE / "elmo_tf" / "__init__.py").read_text(), re.M
).group(1)

setup(
    name="elmo-tf",
    version=VERSION,
    description="ELMo contextual word representations for TensorFlow 2 and Keras 3",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["elmo_tf", "elmo_tf.*"]),
    include_package_data=True,
    package_data={"elmo_tf": ["presets/*/*", "probes/*.tsv"]},
    # Ranges are those the test suite runs on (CI installs the newest in each); every entry
    # is imported by the base library. Keras's backend is an extra: [tensorflow] (Keras's
    # default, and what export, serving, Beam and training need), [jax] or [torch], so that
    # a PyTorch or JAX user's environment gets no TensorFlow and none of its pins.
    install_requires=[
        "keras>=3.15,<4",
        "h5py>=3.14,<3.15",  # TensorFlow pins h5py < 3.15
        "numpy>=2.4,<3",
        "tqdm>=4.66,<5",
        # downloads of the published models (elmo_tf.presets.transfer): the HTTP transfer,
        # proxies and its progress bar, on requests (which TensorFlow installs)
        "pooch>=1.8,<2",
        "requests>=2.31,<3",  # the transfer itself (elmo_tf.presets.transfer), through pooch
        "filelock>=3.12,<4",  # one process at a time per cache entry
    ],
    extras_require={
        # export saved-model writes TF Serving's warm-up records (PredictionLog protos); its
        # other requirements are TensorFlow's own (grpcio, protobuf)
        "tensorflow": TENSORFLOW_STACK,
        # elmo-tf serve / client: TF Serving's gRPC protos and stubs; REST on aiohttp's server
        # and protobuf's JSON mapping of TensorProtos (elmo_tf.serving.rest_protocol)
        "serving": [*TENSORFLOW_STACK, "grpcio>=1.85,<2", "aiohttp>=3.10,<4", PROTOBUF],
        # hub.KerasLayer reuse needs Keras 2 (tf_keras) beside Keras 3
        # tensorflow_hub imports pkg_resources, which setuptools 81 removed
        "hub": [
            *TENSORFLOW_STACK,
            "tensorflow-hub>=0.16,<0.17",
            "tf-keras>=2.21,<2.22",
            "setuptools<81",
        ],
        "tflite": [*TENSORFLOW_STACK, "ai-edge-litert>=2.3,<3"],
        # elmo-tf export onnx (tf2onnx, onnx; the export runs TensorFlow: [tensorflow]) and
        # running its file (onnxruntime alone, no TensorFlow). 1.24.1: the first ONNX Runtime
        # that refuses a file whose weights name data outside its directory
        # (docs/robustness.md); the file itself runs on ONNX Runtime 1.6 and later.
        "onnx": ["onnxruntime>=1.24.1,<2", "onnx>=1.17,<2", "tf2onnx>=1.17,<1.18"],
        # The model on Keras's other backends (KERAS_BACKEND=jax / torch), without TensorFlow.
        # jax[cuda12] or a CUDA build of torch for a GPU, torch's CPU build from
        # https://download.pytorch.org/whl/cpu: see their own install pages.
        "jax": ["jax>=0.6,<1"],
        "torch": ["torch>=2.6,<3"],
        # python -m elmo_tf.beam and elmo_tf.beam's model handlers. google-crc32c: the
        # TFRecord checksums in C (Beam's WriteToTFRecord fails without a CRC32C library).
        "beam": [
            *TENSORFLOW_STACK,
            "apache-beam>=2.77,<2.78",
            "pyarrow>=14",
            "google-crc32c>=1.5,<2",
        ],
        "dev": [
            *TENSORFLOW_STACK,
            "pytest>=8,<10",
            "pytest-xdist>=3.6,<4",  # the suite runs on two workers (pyproject.toml)
            "hypothesis>=6.100,<7",  # the property tests of the foreign readers
            "mutmut>=3.8,<4",  # mutation testing of the parsers (pyproject.toml's [tool.mutmut])
            "ruff==0.17.6",  # lint and format; pinned so CI and developers agree
            "build>=1.2,<2",  # the release artefacts (tests/integration/test_distribution.py)
            "grpcio>=1.85,<2",
            "aiohttp>=3.10,<4",
            PROTOBUF,
            "tensorflow-hub>=0.16,<0.17",
            "tf-keras>=2.21,<2.22",
            "setuptools<81",
            "ai-edge-litert>=2.3,<3",
            "onnxruntime>=1.24.1,<2",
            "onnx>=1.17,<2",
            "tf2onnx>=1.17,<1.18",
            "apache-beam>=2.77,<2.78",
            "pyarrow>=14",
            "google-crc32c>=1.5,<2",
            "jax>=0.6,<1",  # the backend tests (PyTorch's: where its CPU build is at hand)
            # fuzz/run.py (coverage-guided fuzzing); wheels for Linux x86-64 only (elsewhere it
            # builds with clang's libFuzzer): the seed corpus test needs none
            "atheris>=2.3,<4; platform_system == 'Linux' and platform_machine == 'x86_64'",
        ],
    },
    entry_points={"console_scripts": ["elmo-tf=elmo_tf.cli.main:console_main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "License :: OSI Approved :: Apache Software License",
    ],
)
