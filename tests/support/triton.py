"""Triton's model configuration for protobuf's text-format parser, the parser Triton reads a
``config.pbtxt`` with: the ONNX export's repository is checked by it."""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def triton_model_config_class():
    """Triton's ``inference.ModelConfig`` message, the fields the export writes (names, types
    and numbers of Triton's model_config.proto), for protobuf's own text-format parser: it
    refuses a field that does not exist and a value of the wrong type."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="triton_model_config_subset.proto", package="inference", syntax="proto3"
    )
    data_type = proto.enum_type.add(name="DataType")
    for number, name in enumerate(
        ["INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
         "INT64", "FP16", "FP32", "FP64", "STRING", "BF16"]
    ):  # fmt: skip
        data_type.value.add(name=f"TYPE_{name}", number=number)
    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED

    def message(name, fields):
        entry = proto.message_type.add(name=name)
        for number, (field_name, kind, label, type_name) in fields.items():
            entry.field.add(
                name=field_name, number=number, type=kind, label=label, type_name=type_name
            )

    message("ModelTensorReshape", {1: ("shape", field.TYPE_INT64, repeated, None)})
    tensor = {
        1: ("name", field.TYPE_STRING, optional, None),
        2: ("data_type", field.TYPE_ENUM, optional, ".inference.DataType"),
        5: ("reshape", field.TYPE_MESSAGE, optional, ".inference.ModelTensorReshape"),
    }
    message("ModelInput", {**tensor, 4: ("dims", field.TYPE_INT64, repeated, None)})
    message("ModelOutput", {**tensor, 3: ("dims", field.TYPE_INT64, repeated, None)})
    message(
        "ModelDynamicBatching",
        {
            1: ("preferred_batch_size", field.TYPE_INT32, repeated, None),
            2: ("max_queue_delay_microseconds", field.TYPE_UINT64, optional, None),
        },
    )
    message(
        "ModelConfig",
        {
            1: ("name", field.TYPE_STRING, optional, None),
            2: ("platform", field.TYPE_STRING, optional, None),
            17: ("backend", field.TYPE_STRING, optional, None),
            4: ("max_batch_size", field.TYPE_INT32, optional, None),
            5: ("input", field.TYPE_MESSAGE, repeated, ".inference.ModelInput"),
            6: ("output", field.TYPE_MESSAGE, repeated, ".inference.ModelOutput"),
            11: (
                "dynamic_batching",
                field.TYPE_MESSAGE,
                optional,
                ".inference.ModelDynamicBatching",
            ),
        },
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("inference.ModelConfig"))
