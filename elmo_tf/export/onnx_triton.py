"""A Triton Inference Server model repository for an ELMo ONNX export
(``elmo-tf export onnx --triton DIR``).

Layout (Triton's): ``DIR/NAME/config.pbtxt`` and ``DIR/NAME/N/model.onnx``, N the next version
(``elmo_tf.export.versions``: 1 in a new repository). The configuration is written from the
ONNX file's own inputs and outputs: the ``onnxruntime`` backend, ``max_batch_size``, every
tensor's name, data type and dims without the batch axis (``-1`` for the dynamic time axis;
``sequence_len``, one number per sentence, as ``dims: [ 1 ]`` reshaped to the model's ``[ ]``,
Triton's way of declaring a tensor that has the batch axis alone), and dynamic batching.

Triton batches requests whose tensors have the same shape: requests of one length (``time``)
batch together. Clients that pad their sentences to a few lengths (zero positions: the outputs
there are zero, and each sentence's vectors are its own) get fuller batches. No
``instance_group`` is written: Triton then puts one instance on each GPU it sees, or on the
CPU where it sees none (serving/README.md, "Triton").
"""

import os

from elmo_tf import checks
from elmo_tf.errors import ExportError
from elmo_tf.export.versions import MAX_VERSION, next_version, version_directory
from elmo_tf.system import files

MODEL_NAME = "elmo"
MODEL_FILE = "model.onnx"  # the onnxruntime backend's default file name
CONFIG_FILE = "config.pbtxt"
# Requests run together at most; a batch's memory grows with its rows x its length.
DEFAULT_MAX_BATCH_SIZE = 64
# Triton's ModelConfig.max_batch_size is an int32: a larger value fails its config's parsing.
MAX_MAX_BATCH_SIZE = 2**31 - 1
# How long a request may wait for others of its shape: a small part of one call's time on a
# GPU (tens of milliseconds for a sentence of the published model), so batching costs a
# lone request little.
MAX_QUEUE_DELAY_MICROSECONDS = 2000

# ONNX TensorProto data types -> Triton's (model_config.proto, DataType).
_TRITON_TYPES = {1: "TYPE_FP32", 6: "TYPE_INT32", 7: "TYPE_INT64", 10: "TYPE_FP16"}


def write_triton_repository(
    model_proto, directory, name=MODEL_NAME, max_batch_size=DEFAULT_MAX_BATCH_SIZE, version=None
):
    """Writes ``model_proto`` (an ``onnx.ModelProto`` of an ELMo export) into the Triton model
    repository ``directory``; returns the path of the ``model.onnx`` written.

    ``config.pbtxt`` is written (replaced) first, then the version directory, renamed into
    place complete, so a Triton polling the repository never loads half a version.
    """
    check_max_batch_size(max_batch_size)
    check_repository(directory, name, version)
    model_dir = os.path.join(directory, name)
    _, target = version_directory(model_dir, version)
    os.makedirs(model_dir, exist_ok=True)
    config = config_text(model_proto, name, max_batch_size)
    files.write_text(os.path.join(model_dir, CONFIG_FILE), config)
    with files.atomic_path(target) as staging:
        os.makedirs(staging)
        with open(os.path.join(staging, MODEL_FILE), "xb") as f:
            f.write(model_proto.SerializeToString())
    return os.path.join(target, MODEL_FILE)


def check_max_batch_size(max_batch_size, name="max_batch_size"):
    """Raises ``ValueError`` unless ``max_batch_size`` is an integer from 1 to 2**31 - 1
    (Triton's int32); the message calls it ``name`` (the command line passes its flag)."""
    checks.integer(name, max_batch_size, 1, MAX_MAX_BATCH_SIZE)


def check_repository(directory, name=MODEL_NAME, version=None):
    """Raises ``ExportError`` (one line) unless a version of model ``name`` can be written into
    the Triton repository ``directory``: neither it nor ``directory/name`` a file,
    ``config.pbtxt`` no directory, pipe or device, and a next version number left (or
    ``version`` free). The command line calls it before the model loads."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ExportError(f"{directory}: is a file; --triton names a model repository directory")
    model_dir = os.path.join(directory, name)
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
        raise ExportError(
            f"{model_dir}: is a file; a Triton repository holds the model's directory "
            f"{name}/ ({CONFIG_FILE} and the versions N/)"
        )
    config = os.path.join(model_dir, CONFIG_FILE)
    kind = "directory" if os.path.isdir(config) else files.special_kind(config)
    if kind:
        raise ExportError(f"{config}: is a {kind}; {CONFIG_FILE} is written there as a file")
    if version is None and os.path.isdir(model_dir) and next_version(model_dir) > MAX_VERSION:
        raise ExportError(
            f"{model_dir}: holds version {MAX_VERSION:,}, the highest Triton reads, so there is "
            "no next one; remove that version directory"
        )


def config_text(model_proto, name=MODEL_NAME, max_batch_size=DEFAULT_MAX_BATCH_SIZE):
    """The ``config.pbtxt`` (Triton's ``ModelConfig`` in protobuf text format) of the model."""
    lines = [
        f'name: "{name}"',
        'backend: "onnxruntime"',
        f"max_batch_size: {max_batch_size}",
        "input [",
        ",\n".join(_tensor(value) for value in model_proto.graph.input),
        "]",
        "output [",
        ",\n".join(_tensor(value) for value in model_proto.graph.output),
        "]",
        "dynamic_batching {",
        f"  max_queue_delay_microseconds: {MAX_QUEUE_DELAY_MICROSECONDS}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _tensor(value_info):
    """One input or output entry: its name, Triton data type and dims without the batch axis."""
    tensor_type = value_info.type.tensor_type
    name, elem_type = value_info.name, tensor_type.elem_type
    if elem_type not in _TRITON_TYPES:
        raise ExportError(f"{name}: ONNX element type {elem_type} has no Triton type here")
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim]
    if not dims or dims[0] != -1:
        raise ExportError(f"{name}: its first axis must be the dynamic batch, got {dims}")
    fields = [f'    name: "{name}"', f"    data_type: {_TRITON_TYPES[elem_type]}"]
    if len(dims) == 1:  # the batch axis alone: Triton declares [1] and reshapes to []
        fields += ["    dims: [ 1 ]", "    reshape: { shape: [ ] }"]
    else:
        fields.append(f"    dims: [ {', '.join(str(d) for d in dims[1:])} ]")
    return "  {\n" + "\n".join(fields) + "\n  }"
