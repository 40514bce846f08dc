"""ELMo as a TFLite flatbuffer that runs with built-in ops only (``elmo-tf export tflite``).

Contract of the flatbuffer: one signature, ``serving_default``, with one input,
``char_ids`` int32 ``[N, T, 50]`` (ids from ``elmo_tf.batch_to_ids``, in [0, 261]; zero rows
are padding, positions and sentences), where N = ``--batch-size`` and T = the sentence length,
fixed to ``--max-length`` when given, else set per call. Its outputs are those of the
SavedModel's ``char_ids`` signature, with the same keys, shapes (``batch`` = N) and meaning:
the table in ``elmo_tf.saved_model_module`` (``word_emb``, ``lstm_outputs1`` ..
``lstm_outputsL`` for the model's L LSTM layers, ``elmo``, ``default``, ``sequence_len``).
They equal the SavedModel's to float32 round-off; padded positions and all-zero rows come out
as zeros.

Shapes. The batch size is fixed: the biLSTM's ``tf.while_loop`` writes each step into a
``TensorArray``, and the converter lowers that to built-in ops only when the element shape
``[batch, P]`` is static. Send fewer sentences by padding with zero rows (they cost as much as
real ones); send more in chunks. The length stays dynamic unless ``--max-length`` fixes it
(for delegates that need static shapes): resize the input (``resize_tensor_input`` +
``allocate_tensors``; the signature runner does both) to ``[N, T, 50]`` for each request.
``run_tflite`` does the padding, chunking and resizing and strips the padding again::

    from ai_edge_litert.interpreter import Interpreter
    from elmo_tf.export.tflite import run_tflite

    interpreter = Interpreter(model_path="elmo.tflite")  # load once, reuse per request
    outputs = run_tflite(interpreter, elmo_tf.batch_to_ids([["Hello", "world", "!"]]))
    outputs["elmo"]  # numpy float32 [1, 3, 2P]

Why character ids and not strings: the SavedModel's string signatures split and map text in
the graph with ``StaticRegexReplace``, ``StringSplitV2``, ``StringLength`` and
``DecodePaddedRaw``, which are not TFLite built-ins; they would need a Flex-enabled runtime
(``SELECT_TF_OPS``, TensorFlow kernels linked into the app). Map tokens to ids on the host with
``elmo_tf.batch_to_ids`` (UTF-8 bytes + 1 between begin- and end-of-word ids, padded to 50;
easy to port to the app's language).

``--quantize dynamic`` stores the weights as int8 (dynamic-range quantisation,
``tf.lite.Optimize.DEFAULT``); activations stay float32, so the outputs move by a small,
weight-dependent amount.

The file is written to a temporary name next to OUTFILE and renamed into place.
"""

import os
import tempfile

from elmo_tf import files

SIGNATURE_KEY = "serving_default"
QUANTIZE_CHOICES = ("dynamic",)


def export_tflite(model, outfile, batch_size=1, max_length=None, quantize=None):
    """Writes ``model`` (an ``ELMo``) as a TFLite flatbuffer at ``outfile``; returns its size.

    Args:
        model: the ``ELMo``; one with ``dedupe_tokens=True`` is exported through a copy
            without it (``UniqueV2`` is not a TFLite built-in).
        outfile: path of the ``.tflite`` file.
        batch_size: the model's fixed batch size N.
        max_length: fixed sentence length T, or ``None`` for a dynamic one.
        quantize: ``None`` or ``"dynamic"`` (int8 weights).
    """
    import tensorflow as tf

    from elmo_tf import characters
    from elmo_tf.models.elmo import output_keys

    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be a positive integer or None, got {max_length}")
    if quantize not in (None, *QUANTIZE_CHOICES):
        raise ValueError(f"quantize must be None or one of {QUANTIZE_CHOICES}, got {quantize!r}")
    if model.dedupe_tokens:
        model = _without_dedupe(model)

    keys = output_keys(model.config.n_lstm_layers)
    spec = tf.TensorSpec(
        [batch_size, max_length, characters.MAX_CHARS_PER_TOKEN], tf.int32, name="char_ids"
    )

    @tf.function(input_signature=[spec])
    def serve(char_ids):
        outputs = model(char_ids)
        return {key: outputs[key] for key in keys}

    # Through a SavedModel rather than from_concrete_functions: that path keeps the weights
    # read inside the LSTM's while loop as resource variables the interpreter never
    # initialises; loading a SavedModel freezes them into constants.
    module = tf.Module()
    module.elmo_variables = [w.value for w in model.weights]
    with tempfile.TemporaryDirectory(prefix="elmo-tflite-") as saved_dir:
        tf.saved_model.save(
            module, saved_dir, signatures={SIGNATURE_KEY: serve.get_concrete_function()}
        )
        converter = tf.lite.TFLiteConverter.from_saved_model(saved_dir, [SIGNATURE_KEY])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize == "dynamic":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        flatbuffer = converter.convert()

    custom = non_builtin_ops(flatbuffer)
    if custom:
        raise RuntimeError(f"the converted model needs non-built-in ops {custom}")

    files.write_bytes(outfile, flatbuffer)
    return len(flatbuffer)


def _without_dedupe(model):
    """A copy of ``model`` sharing its weight values, built with ``dedupe_tokens=False``."""
    clone = type(model).from_config({**model.get_config(), "dedupe_tokens": False})
    clone.set_weights(model.get_weights())
    return clone


def _builtin_operators():
    """``{code: name}`` of every TFLite built-in operator (``CUSTOM`` included)."""
    from ai_edge_litert import schema_py_generated as schema

    members = vars(schema.BuiltinOperator).items()
    return {code: name for name, code in members if not name.startswith("_")}


def operator_names(model):
    """The distinct operators of a flatbuffer (bytes or path): built-in names, else custom codes.

    Flex (``SELECT_TF_OPS``) operators show up as custom codes ``Flex<TF op name>``.
    """
    from ai_edge_litert import schema_py_generated as schema

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
    >>> run_tflite("elmo.tflite", ids)["elmo"].shape
    (2, 2, 1024)
    """
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from elmo_tf import characters

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
        outputs = runner(char_ids=padded)
        chunks.append(
            {
                key: value[: len(rows), :length] if value.ndim == 3 else value[: len(rows)]
                for key, value in outputs.items()
            }
        )
    return {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]}
