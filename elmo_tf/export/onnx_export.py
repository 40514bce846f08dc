"""ELMo as an ONNX model for ONNX Runtime, Triton and any ONNX runtime (``elmo-tf export onnx``).

Contract of the file (opset ``OPSET``, built-in ONNX operators only, of the default domain):

- one input, ``char_ids``: int32 ``[batch, time, 50]``, both ``batch`` and ``time`` dynamic
  (ids from ``elmo_tf.batch_to_ids``, in [0, 261]; zero rows are padding, positions and
  sentences);
- the outputs of the table in ``elmo_tf.models.outputs``, by name and in its order:
  ``word_emb`` ``[batch, time, P]``, ``lstm_outputs1`` .. ``lstm_outputsL`` and ``elmo``
  ``[batch, time, 2P]`` float32, ``default`` ``[batch, 2P]`` float32, ``sequence_len``
  ``[batch]`` int32. They equal the model's to float32 round-off; padded positions and all-zero
  rows come out as zeros. A sentence's vectors do not depend on its batch.
- metadata (``metadata_props``): ``elmo_tf.options``, the model's options.json, and
  ``elmo_tf.version``.

How it is made (export/README.md says why this route): the model's own TensorFlow graph,
traced with ``ELMo.call`` and converted by tf2onnx. The weights go in as arguments of the
traced function (``keras.StatelessScope``), not as captured variables, so the graph tf2onnx
freezes and rewrites holds no weight; each of those inputs then becomes an ONNX initializer
named by its variable's path (``_weights_as_initializers``), and ONNX Runtime folds the weight-only
nodes (slices, transposes) when it loads the file. Two parts of the TensorFlow path need
help: the biLSTM's packed loop, which tf2onnx cannot convert, is traced with
``elmo_tf.export.onnx_lstm`` (the same steps in a loop it converts into ONNX ``Loop``), and
``UniqueV2`` (the token CNN once per distinct token), which tf2onnx has no rule for, becomes
ONNX ``Unique`` (``_unique_rows``). Everything else, the maths included, is the model's code.

``elmo_tf.export.onnx.run_onnx`` runs the file without TensorFlow.
"""

import base64
import json
import logging

from elmo_tf import __version__
from elmo_tf.export import onnx_graph
from elmo_tf.export.onnx_contract import INPUT_NAME, OPTIONS_KEY, VOCABULARY_KEY
from elmo_tf.export.onnx_graph import (  # noqa: F401 (this module's names before onnx_graph)
    ONNX_DOMAINS,
    non_standard_operators,
    operators,
)
from elmo_tf.models.outputs import output_keys
from elmo_tf.system import extras, files, native_logs

# Opset 13: every operator the graph needs is there (Unique, CumSum, ScatterND, Loop with
# scan outputs) in its current form, and runtimes have run it since ONNX Runtime 1.7.
OPSET = 13
BATCH_AXIS = "batch"
TIME_AXIS = "time"
VERSION_KEY = "elmo_tf.version"
EXPORT_LOOP = "elmo_tf.export.onnx_lstm"


def export_onnx(model, path, precision="float32"):
    """Writes ``model`` (an ``ELMo``) as an ONNX file at ``path``; returns its size in bytes.

    ``precision``: ``"float32"``, or ``"int8"`` for int8 weights (``onnx_quantize``). The file
    is written to a temporary name beside ``path`` and renamed into place.
    """
    model_proto = onnx_model(model, precision)
    data = model_proto.SerializeToString()
    files.write_bytes(path, data)
    return len(data)


def onnx_model(model, precision="float32"):
    """``model`` (an ``ELMo``) as an ``onnx.ModelProto`` (this module's contract), checked;
    ``precision`` ``"int8"`` quantises its weights (``onnx_quantize``)."""
    from elmo_tf import backend  # lazy: it starts Keras; the command line reads OPSET first
    from elmo_tf import precision as precisions  # lazy: beside backend, read at export

    precisions.check(precision, "onnx")
    backend.require_tensorflow("ONNX export")
    extras.require("onnx", "elmo_tf.export.onnx_export")
    import keras  # lazy: the command line reads OPSET before Keras starts
    import onnx  # lazy: the [onnx] extra
    import tensorflow as tf  # lazy: the export runs on TensorFlow; the runner does not
    import tf2onnx  # lazy: the [onnx] extra

    from elmo_tf.layers import lstm_layout  # lazy: the layers start Keras

    keys = output_keys(model.config.n_lstm_layers)
    spec = tf.TensorSpec([None, None, model.config.id_width], tf.int32, name=INPUT_NAME)
    variables = list(model.variables)
    paths = [v.path for v in variables]
    if len(set(paths)) != len(paths) or INPUT_NAME in paths:
        raise RuntimeError(f"the model's variables need distinct paths, got {sorted(paths)}")
    # Each weight is an argument named by its variable's path: the input, then the
    # initializer, of that name in the ONNX graph.
    signature = [spec, *(tf.TensorSpec(v.shape, v.dtype, name=v.path) for v in variables)]

    @tf.function(input_signature=signature)
    def serve(char_ids, *weights):
        # Every read of a variable in the call reads its argument instead: the traced graph
        # holds placeholders, not the weights, so that tf2onnx's freezing and passes (which
        # copy every constant, several times) stay small whatever the model's size.
        with keras.StatelessScope(state_mapping=list(zip(variables, weights))):
            outputs = model(char_ids)
        return {key: outputs[key] for key in keys}

    converter_log = logging.getLogger("tf2onnx")
    level = converter_log.level
    converter_log.setLevel(logging.ERROR)  # its INFO lines: one per optimiser pass
    try:
        # Traced with the layout that runs best across CPUs, and the loop tf2onnx converts.
        with lstm_layout.exporting(), backend.tracing_bilstm_with(EXPORT_LOOP):
            with native_logs.quiet():
                model_proto, _ = tf2onnx.convert.from_function(
                    serve,
                    input_signature=signature,
                    opset=OPSET,
                    custom_op_handlers={"UniqueV2": (_unique_rows, [])},
                )
    finally:
        converter_log.setLevel(level)

    _weights_as_initializers(model_proto, variables)
    onnx_graph.loop_invariants_from_outer_scope(model_proto.graph)
    _name_axes(model_proto, model, keys)
    # tf2onnx imports ai.onnx.ml whether a node uses it or not: a runtime without it would
    # refuse the file for nothing.
    onnx_graph.keep_used_domains(model_proto)
    model_proto.producer_name = "elmo-tf"
    model_proto.producer_version = __version__
    properties = {OPTIONS_KEY: json.dumps(model.config.to_options()), VERSION_KEY: __version__}
    if model.config.uses_codepoints:  # the runner maps tokens on the host with the tables
        vocabulary = model.token_mapper.vocabulary.to_bytes()
        properties[VOCABULARY_KEY] = base64.b64encode(vocabulary).decode("ascii")
    onnx.helper.set_model_props(model_proto, properties)
    unknown = onnx_graph.non_standard_operators(model_proto)
    if unknown:
        raise RuntimeError(f"the converted model needs operators outside ONNX {unknown}")
    onnx.checker.check_model(model_proto, full_check=True)
    if precision == "int8":
        from elmo_tf.export.onnx_quantize import quantize_int8  # lazy: the quantiser, int8 only

        return quantize_int8(model_proto)
    return model_proto


def _weights_as_initializers(model_proto, variables):
    """Turns the graph's inputs named by the paths of ``variables`` (``keras.Variable``s,
    ``elmo/bilstm/forward_0/kernel``) into initializers holding their values, and removes them
    from the inputs."""
    import keras  # lazy: the command line reads OPSET before Keras starts
    from onnx import numpy_helper  # lazy: the [onnx] extra

    graph = model_proto.graph
    by_path = {variable.path: variable for variable in variables}
    inputs = [i.name for i in graph.input]
    if sorted(inputs) != sorted([INPUT_NAME, *by_path]):
        raise RuntimeError(
            f"the converted model has inputs {inputs}, expected {INPUT_NAME!r} and the "
            f"{len(by_path)} weights"
        )
    kept = [i for i in graph.input if i.name not in by_path]
    del graph.input[:]
    graph.input.extend(kept)
    # One variable at a time: each weight is copied once more, into the file's message.
    for path, variable in by_path.items():
        value = keras.ops.convert_to_numpy(variable.value)
        graph.initializer.append(numpy_helper.from_array(value, path))


def _name_axes(model_proto, model, keys):
    """Names the dynamic axes ``batch`` and ``time`` on the input and every output, and puts
    the outputs in ``keys``' order (tf2onnx names them ``unk__N`` and sorts them)."""
    shapes = model.output_shapes(BATCH_AXIS, TIME_AXIS)
    graph = model_proto.graph
    by_name = {output.name: output for output in graph.output}
    if sorted(by_name) != sorted(keys) or [i.name for i in graph.input] != [INPUT_NAME]:
        raise RuntimeError(
            f"the converted model has inputs {[i.name for i in graph.input]} and outputs "
            f"{sorted(by_name)}, expected [{INPUT_NAME!r}] and {sorted(keys)}"
        )
    ordered = [by_name[key] for key in keys]
    del graph.output[:]
    graph.output.extend(ordered)
    _set_shape(graph.input[0], (BATCH_AXIS, TIME_AXIS, model.config.id_width))
    for output in graph.output:
        _set_shape(output, shapes[output.name])


def _set_shape(value_info, dims):
    shape = value_info.type.tensor_type.shape
    del shape.dim[:]
    for dim in dims:
        if isinstance(dim, str):
            shape.dim.add().dim_param = dim
        else:
            shape.dim.add().dim_value = dim


def _unique_rows(ctx, node, name, args):
    """tf2onnx handler: TensorFlow's ``UniqueV2`` on axis 0 (the distinct tokens of a call, in
    order of first appearance, and each token's index among them) as ONNX ``Unique``.

    ONNX Runtime's ``Unique`` takes no int32, so the ids go through int64 and back.
    """
    from onnx import TensorProto  # lazy: the [onnx] extra

    axis = node.inputs[1].get_tensor_value(as_list=True)
    if axis not in (0, [0]):
        raise ValueError(f"{name}: UniqueV2 on axis {axis}; the export maps axis 0 only")
    values, (unique_out, index_out) = node.input[0], node.output
    dtype, index_dtype = ctx.get_dtype(values), node.get_attr_value("out_idx")
    ctx.remove_node(name)
    wide = ctx.make_node("Cast", [values], attr={"to": TensorProto.INT64}).output[0]
    unique = ctx.make_node("Unique", [wide], attr={"axis": 0, "sorted": 0}, output_count=4)
    ctx.make_node("Cast", [unique.output[0]], attr={"to": dtype}, outputs=[unique_out])
    ctx.make_node("Cast", [unique.output[2]], attr={"to": index_dtype}, outputs=[index_out])
