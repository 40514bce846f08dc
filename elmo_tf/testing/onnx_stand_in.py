"""ONNX files shaped like an ELMo export, made without TensorFlow in milliseconds: the input,
outputs and ``elmo_tf.options`` metadata of ``elmo_tf.export.onnx_export``'s contract, the
outputs computed from ``char_ids`` by a few built-in operators (their values mean nothing).
The tests of the runner's checks (``elmo_tf.export.onnx``) and the ONNX fuzz target's seeds
are made of these, each with one thing changed.
"""

import json
import math

from elmo_tf.testing.random_weights import options_for

OPSET = 13  # elmo_tf.export.onnx_export.OPSET, without importing the exporter's module
OPTIONS_KEY = "elmo_tf.options"


def stand_in_options(projection_dim=16, n_layers=2):
    """The tiny shape's options with ``lstm.projection_dim`` and ``lstm.n_layers`` set."""
    options = options_for("tiny")
    options["lstm"].update(projection_dim=projection_dim, n_layers=n_layers)
    return options


def stand_in_model(
    projection_dim=16,
    n_layers=2,
    metadata=None,
    declare_widths=True,
    layer_width=None,
):
    """An ``onnx.ModelProto`` with an export's input and outputs.

    Args:
        projection_dim, n_layers: the model's P (``word_emb`` is ``[batch, time, P]``, the
            others ``2P`` wide) and its number of ``lstm_outputsK`` outputs.
        metadata: the ``metadata_props`` entries, ``[(key, value)]`` (default: one
            ``elmo_tf.options`` entry of ``stand_in_options(projection_dim, n_layers)``).
        declare_widths: whether the outputs declare their last axis (an export does); if not,
            every axis is symbolic and only a run shows the widths.
        layer_width: the width the ``lstm_outputsK`` outputs have when run (default ``2P``);
            declared as such when ``declare_widths``.
    """
    # lazy: the [onnx] extra
    import onnx
    from onnx import TensorProto, helper

    width = 2 * projection_dim
    layer_width = width if layer_width is None else layer_width
    # [b, t, 50] ids as floats, tiled along the last axis, then each output cut to its width
    repeats = math.ceil(max(projection_dim, width, layer_width) / 50)
    nodes = [
        helper.make_node("Cast", ["char_ids"], ["floats"], to=TensorProto.FLOAT),
        helper.make_node("Tile", ["floats", "repeats"], ["tiled"]),
    ]
    initializers = [
        helper.make_tensor("repeats", TensorProto.INT64, [3], [1, 1, repeats]),
        helper.make_tensor("starts", TensorProto.INT64, [1], [0]),
        helper.make_tensor("axes", TensorProto.INT64, [1], [2]),
    ]

    if not declare_widths:
        # the ends computed when it runs (the ids' width, 50, over 50 times each size), so that
        # ONNX Runtime's shape inference cannot find the widths either
        initializers.append(helper.make_tensor("fifty", TensorProto.INT64, [1], [50]))
        nodes.append(helper.make_node("Shape", ["char_ids"], ["ids_shape"]))
        nodes.append(helper.make_node("Slice", ["ids_shape", "two", "three"], ["ids_width"]))
        nodes.append(helper.make_node("Div", ["ids_width", "fifty"], ["one"]))
        initializers += [
            helper.make_tensor("two", TensorProto.INT64, [1], [2]),
            helper.make_tensor("three", TensorProto.INT64, [1], [3]),
        ]

    def sliced(output, size):
        end = f"end_{output}"
        initializers.append(helper.make_tensor(end, TensorProto.INT64, [1], [size]))
        if not declare_widths:
            nodes.append(helper.make_node("Mul", ["one", end], [f"{end}_run"]))
            end = f"{end}_run"
        nodes.append(helper.make_node("Slice", ["tiled", "starts", end, "axes"], [output]))

    layers = [f"lstm_outputs{k}" for k in range(1, n_layers + 1)]
    widths = {"word_emb": projection_dim, **dict.fromkeys(layers, layer_width), "elmo": width}
    for name, size in widths.items():
        sliced(name, size)
    nodes.append(helper.make_node("ReduceMean", ["elmo"], ["default"], axes=[1], keepdims=0))
    nodes.append(helper.make_node("ReduceMax", ["char_ids"], ["longest"], axes=[1, 2], keepdims=0))
    nodes.append(helper.make_node("Cast", ["longest"], ["sequence_len"], to=TensorProto.INT32))

    def declared(size, rank=3):
        axes = ["batch", "time"][: rank - 1]
        return [*axes, size if declare_widths else "width"]

    outputs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, declared(size))
        for name, size in widths.items()
    ]
    outputs += [
        helper.make_tensor_value_info("default", TensorProto.FLOAT, declared(width, 2)),
        helper.make_tensor_value_info("sequence_len", TensorProto.INT32, ["batch"]),
    ]
    graph = helper.make_graph(
        nodes,
        "elmo",
        [helper.make_tensor_value_info("char_ids", TensorProto.INT32, ["batch", "time", 50])],
        outputs,
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)  # before the metadata: the checker refuses a key twice
    if metadata is None:
        metadata = [(OPTIONS_KEY, json.dumps(stand_in_options(projection_dim, n_layers)))]
    for key, value in metadata:
        model.metadata_props.add(key=key, value=value)
    return model
