"""The SavedModel export's signatures (``elmo_tf.export.saved_model_module``) as the server's
``SignatureSpec``s, made from their declared inputs without exporting a model: what the serving
fuzz targets check requests against (the ``[serving]`` extra)."""


def export_signatures():
    """``{signature: SignatureSpec}`` of ``default``, ``tokens`` and ``char_ids``."""
    # lazy: the [serving] extra
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import meta_graph_pb2

    from elmo_tf.serving.signature import SignatureSpec

    declared = {
        "default": {"sentences": (types_pb2.DT_STRING, [-1])},
        "tokens": {
            "tokens": (types_pb2.DT_STRING, [-1, -1]),
            "sequence_len": (types_pb2.DT_INT32, [-1]),
        },
        "char_ids": {"char_ids": (types_pb2.DT_INT32, [-1, -1, 50])},
    }
    specs = {}
    for name, inputs in declared.items():
        signature = meta_graph_pb2.SignatureDef()
        for alias, (dtype, dims) in inputs.items():
            info = signature.inputs[alias]
            info.dtype = dtype
            for size in dims:
                info.tensor_shape.dim.add(size=size)
        specs[name] = SignatureSpec(name, signature)
    return specs
