"""Running and inspecting an exported ELMo flatbuffer with LiteRT (the ``[tflite]`` extra).

The flatbuffer's contract is stated in ``elmo_tf.export.tflite``, which writes it.
``run_tflite`` pads, chunks and runs it; ``operator_names`` and ``non_builtin_ops`` list what it
needs from the runtime::

    from ai_edge_litert.interpreter import Interpreter
    from elmo_tf.export.litert import run_tflite

    interpreter = Interpreter(model_path="elmo.tflite")  # load once, reuse per request
    outputs = run_tflite(interpreter, elmo_tf.batch_to_ids([["Hello", "world", "!"]]))
    outputs["elmo"]  # numpy float32 [1, 3, 2P]: 2P = 256 for the bundled sotu model
"""

import os
import weakref

from elmo_tf.system import extras

extras.require("tflite", __name__)

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from elmo_tf.system import native_logs
from elmo_tf.tokens import characters

SIGNATURE_KEY = "serving_default"  # the one signature elmo_tf.export.tflite writes


def _builtin_operators():
    """``{code: name}`` of every TFLite built-in operator (``CUSTOM`` included)."""
    members = vars(schema.BuiltinOperator).items()
    return {code: name for name, code in members if not name.startswith("_")}


def operator_names(model):
    """The distinct operators of a flatbuffer (bytes or path): built-in names, else custom codes.

    Flex (``SELECT_TF_OPS``) operators show up as custom codes ``Flex<TF op name>``.
    """
    if not isinstance(model, bytes | bytearray):
        with open(model, "rb") as f:
            model = f.read()
    builtin_names = _builtin_operators()
    root = schema.Model.GetRootAs(model, 0)
    names = set()
    for i in range(root.OperatorCodesLength()):
        code = root.OperatorCodes(i)
        # Codes above 127 live only in BuiltinCode; DeprecatedBuiltinCode caps at 127.
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            names.add(code.CustomCode().decode())
        else:
            names.add(builtin_names[builtin])
    return sorted(names)


def non_builtin_ops(model):
    """The operators of a flatbuffer (bytes or path) that stock TFLite does not have built in.

    Empty for an ELMo export; Flex ops (``Flex<TF op>``) or other custom ops otherwise.
    """
    builtin = set(_builtin_operators().values()) - {"CUSTOM"}
    return [name for name in operator_names(model) if name not in builtin]


# The operators whose weights dynamic-range quantisation can store as int8: their input 1.
_WEIGHTED = ("FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D", "DEPTHWISE_CONV_2D")


def weight_types(model):
    """``{subgraph: {(operator, weight type): count}}`` of a flatbuffer (bytes or path): for each
    subgraph (by name, ``subgraphN`` when unnamed: the main graph, then each ``WHILE``'s
    condition and body), the type of every weighted operator's weight (input 1: ``"INT8"`` once
    quantised, ``"FLOAT32"`` otherwise), and ``("DEQUANTIZE", type)`` for weights stored
    int8 but computed in float. How a test or a user sees which products of an export, those
    of the LSTM loop's body included, run on int8 weights."""
    if not isinstance(model, bytes | bytearray):
        with open(model, "rb") as f:
            model = f.read()
    names = _builtin_operators()
    types = {code: name for name, code in vars(schema.TensorType).items() if name.isupper()}
    root = schema.Model.GetRootAs(model, 0)
    report = {}
    for s in range(root.SubgraphsLength()):
        graph, counts = root.Subgraphs(s), {}
        for i in range(graph.OperatorsLength()):
            operator = graph.Operators(i)
            code = root.OperatorCodes(operator.OpcodeIndex())
            name = names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
            if name in _WEIGHTED and operator.InputsLength() > 1:
                key = (name, types[graph.Tensors(operator.Inputs(1)).Type()])
            elif name == "DEQUANTIZE":
                key = (name, types[graph.Tensors(operator.Inputs(0)).Type()])
            else:
                continue
            counts[key] = counts.get(key, 0) + 1
        report[(graph.Name() or b"").decode() or f"subgraph{s}"] = counts
    return report


def run_tflite(model, char_ids, num_threads=None):
    """Runs an exported ELMo flatbuffer in the LiteRT interpreter on any number of sentences.

    Pads the batch with zero rows to the model's batch size (in chunks when there are more
    sentences), pads the length to ``--max-length`` when the model fixed one (else resizes
    the input to the batch's length), and strips the padding from the outputs.

    Args:
        model: path of the ``.tflite`` file, or an ``ai_edge_litert.interpreter.Interpreter``
            (reuse one across calls to skip loading).
        char_ids: int array ``[batch, T, 50]`` from ``elmo_tf.batch_to_ids``.
        num_threads: interpreter threads when ``model`` is a path.

    Returns:
        A dict of numpy arrays with the keys and meaning of the flatbuffer's outputs (see
        this module's docstring), ``batch`` rows and ``T`` positions.

    Example:
    >>> ids = elmo_tf.batch_to_ids([["Hello", "world"], ["Hi"]])
    >>> run_tflite("elmo.tflite", ids)["elmo"].shape  # the bundled sotu model: 2P = 256
    (2, 2, 256)
    """
    interpreter = model
    if not isinstance(model, Interpreter):
        interpreter = Interpreter(model_path=os.fspath(model), num_threads=num_threads)
    runner = interpreter.get_signature_runner(SIGNATURE_KEY)
    batch_size, max_length, n_chars = runner.get_input_details()["char_ids"]["shape_signature"]

    char_ids = np.asarray(char_ids)
    if char_ids.ndim != 3 or char_ids.shape[-1] != n_chars:
        raise ValueError(f"char_ids must have shape [batch, T, {n_chars}], got {char_ids.shape}")
    if not np.issubdtype(char_ids.dtype, np.integer):
        raise ValueError(f"char_ids must be integers, got dtype {char_ids.dtype}")
    if char_ids.size and (char_ids.min() < 0 or char_ids.max() >= characters.NUM_CHAR_IDS):
        raise ValueError(f"char_ids must be in [0, {characters.NUM_CHAR_IDS - 1}]")
    n, length = char_ids.shape[:2]
    if max_length > 0 and length > max_length:
        raise ValueError(
            f"char_ids has {length} positions; this model was exported with --max-length "
            f"{max_length}: split or truncate longer sentences"
        )
    # An empty input still runs on one (zero) position: zero-size tensors trip some kernels.
    padded_length = max_length if max_length > 0 else max(length, 1)

    chunks = []
    for start in range(0, max(n, 1), batch_size):
        rows = char_ids[start : start + batch_size]
        padded = np.zeros([batch_size, padded_length, n_chars], np.int32)
        padded[: len(rows), :length] = rows
        outputs = _run(interpreter, runner, padded)
        chunks.append(
            {
                key: value[: len(rows), :length] if value.ndim == 3 else value[: len(rows)]
                for key, value in outputs.items()
            }
        )
    return {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]}


# Interpreters that have run once: LiteRT writes "INFO: Created TensorFlow Lite XNNPACK delegate
# for CPU." to file descriptor 2 at an interpreter's first run, which runs inside the filter.
_started = weakref.WeakSet()


def _run(interpreter, runner, char_ids):
    if interpreter in _started:
        return runner(char_ids=char_ids)
    with native_logs.quiet():
        outputs = runner(char_ids=char_ids)
    _started.add(interpreter)
    return outputs
