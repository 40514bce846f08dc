"""ELMo as a TFLite flatbuffer that runs with built-in ops only (``elmo-tf export tflite``).

Contract of the flatbuffer: one signature, ``serving_default``, with one input,
``char_ids`` int32 ``[N, T, 50]`` (ids from ``elmo_tf.batch_to_ids``, in [0, 261]; zero rows
are padding, positions and sentences), where N = ``--batch-size`` and T = the sentence length,
fixed to ``--max-length`` when given, else set per call. Its outputs are those of the
SavedModel's ``char_ids`` signature, with the same keys, shapes (``batch`` = N) and meaning:
the table in ``elmo_tf.models.outputs`` (``word_emb``, ``lstm_outputs1`` ..
``lstm_outputsL`` for the model's L LSTM layers, ``elmo``, ``default``, ``sequence_len``).
They equal the SavedModel's to float32 round-off; padded positions and all-zero rows come out
as zeros.

Shapes. The batch size is fixed: the biLSTM's ``tf.while_loop`` writes each step into a
``TensorArray``, and the converter lowers that to built-in ops only when the element shape
``[batch, P]`` is static. Send fewer sentences by padding with zero rows (they cost as much as
real ones); send more in chunks. The length stays dynamic unless ``--max-length`` fixes it
(for delegates that need static shapes): resize the input (``resize_tensor_input`` +
``allocate_tensors``; the signature runner does both) to ``[N, T, 50]`` for each request.
``elmo_tf.export.litert.run_tflite`` does the padding, chunking and resizing and strips the
padding again.

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

import tempfile

from elmo_tf import backend

backend.require_tensorflow("TFLite export")  # one line, before TensorFlow

import tensorflow as tf

from elmo_tf.export.saved_model import save_context
from elmo_tf.export.tflite_arguments import check_arguments
from elmo_tf.layers import lstm_layout
from elmo_tf.models.outputs import output_keys
from elmo_tf.system import extras, files, native_logs
from elmo_tf.tokens import characters, codepoints

SIGNATURE_KEY = "serving_default"


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
    codepoints.check_export(model.config, "a TFLite file")
    extras.require("tflite", "elmo_tf.export.tflite")  # checks the result: before the slow part
    check_arguments(batch_size, max_length, quantize)
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
    options = tf.saved_model.SaveOptions()
    # Traced with the layout that runs best across CPUs: the file runs on the user's device.
    with tempfile.TemporaryDirectory(prefix="elmo-tflite-") as saved_dir, lstm_layout.exporting():
        with save_context(options):  # traced once, where the save traces (see save_context)
            signatures = {SIGNATURE_KEY: serve.get_concrete_function()}
        tf.saved_model.save(module, saved_dir, signatures=signatures, options=options)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved_dir, [SIGNATURE_KEY])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize == "dynamic":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        with native_logs.quiet():  # the converter's native info lines
            flatbuffer = converter.convert()

    from elmo_tf.export.litert import non_builtin_ops  # lazy: the [tflite] extra

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


def __getattr__(name):
    # run_tflite and the flatbuffer inspection live in elmo_tf.export.litert since 0.2 (they
    # need the [tflite] extra, the exporter does not until its last step); the old names stay.
    if name in ("run_tflite", "operator_names", "non_builtin_ops"):
        from elmo_tf.export import litert  # lazy: the [tflite] extra

        return getattr(litert, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
