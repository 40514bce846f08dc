"""Small ONNX models made by hand, for the runner's checks."""

import onnx

from elmo_tf.export.onnx_export import OPSET


def identity_model(path, initializer=None):
    """An Identity graph written to ``path``: of an int32 ``[batch, time, 50]`` input, or of
    the weight ``initializer`` (no input)."""
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["w" if initializer else "x"], ["y"])],
        "g",
        [] if initializer else [value("x", onnx.TensorProto.INT32, [None, None, 50])],
        [value("y", onnx.TensorProto.FLOAT if initializer else onnx.TensorProto.INT32, None)],
        initializer=[initializer] if initializer else [],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    path.write_bytes(model.SerializeToString())
    return path
