"""Fuzz target: the ONNX runner's contract check (``elmo_tf.export.onnx``) on fuzzed model
bytes, without an ONNX Runtime session (loading one per input would be most of the time):
``onnx_metadata.metadata_of`` walks the bytes for the ``elmo_tf.options`` entries, ``onnx`` parses
them as ONNX Runtime would, and ``check_contract`` checks the graph's input, outputs and their
metadata on a stand-in of the session that holds the graph's declared input and outputs as
ONNX Runtime reports them.

The contract: an ``ElmoConfig`` or a ``ModelFileError`` of one line naming the file; where the
bytes parse, the walker's entries are those protobuf reads (the last of a field given twice).
"""

import io
import json
import types

from google.protobuf.message import DecodeError

from elmo_tf.system import extras

extras.require("onnx", "fuzz/onnx_contract.py", modules=("onnx",))

import onnx

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ModelFileError
from elmo_tf.export import onnx_metadata
from elmo_tf.export.onnx_contract import OPTIONS_KEY, check_contract
from elmo_tf.formats.options_file import MAX_OPTIONS_BYTES
from elmo_tf.testing.onnx_stand_in import stand_in_model, stand_in_options

SOURCE = "fuzzed.onnx"
# ONNX Runtime's names of the element types (NodeArg.type is "tensor(NAME)")
_ORT_TYPES = {"FLOAT": "float", "DOUBLE": "double", "FLOAT16": "float16"}


class _Session:
    """What ``check_contract`` asks of an ``onnxruntime.InferenceSession``, from a parsed
    ``ModelProto``: inputs (the graph's, less its initializers), outputs, each a name, a type
    and a shape (an int, a name or ``None`` per axis; ``[]`` for an unknown rank), and the
    metadata map (one value per key, the last). As ONNX Runtime's pybind11 does, a name, key
    or value that is not UTF-8 raises ``UnicodeDecodeError`` when it is read (protobuf's
    Python parser gives such a string as bytes)."""

    def __init__(self, model):
        graph = model.graph
        weights = {i.name for i in graph.initializer}
        self.inputs = [_NodeArg(v) for v in graph.input if v.name not in weights]
        self.outputs = [_NodeArg(v) for v in graph.output]
        self.metadata = [(p.key, p.value) for p in model.metadata_props]

    def get_inputs(self):
        return self.inputs

    def get_outputs(self):
        return self.outputs

    def get_modelmeta(self):
        return types.SimpleNamespace(
            custom_metadata_map={_text(k): _text(v) for k, v in self.metadata}
        )


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


class _NodeArg:
    def __init__(self, value):
        self._name = value.name
        kind = value.type.WhichOneof("value")
        self.type, self._dims = str(kind), []
        if kind == "tensor_type":
            tensor = value.type.tensor_type
            known = tensor.elem_type in _ELEMENTS
            name = onnx.TensorProto.DataType.Name(tensor.elem_type) if known else ""
            self.type = f"tensor({_ORT_TYPES.get(name, name.lower())})"
            if tensor.HasField("shape"):
                self._dims = [
                    d.dim_value if d.HasField("dim_value") else d.dim_param or None
                    for d in tensor.shape.dim
                ]

    @property
    def name(self):
        return _text(self._name)

    @property
    def shape(self):
        return [_text(d) for d in self._dims]


_ELEMENTS = set(onnx.TensorProto.DataType.values())


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    try:
        walked = onnx_metadata.metadata_of(io.BytesIO(data), len(data), SOURCE, [OPTIONS_KEY])
        entries = walked.values(OPTIONS_KEY, MAX_OPTIONS_BYTES)
    except ModelFileError as e:
        _check_message(e)
        entries = None
    try:
        model = onnx.load_from_string(data)
    except DecodeError:
        return  # ONNX Runtime cannot load it either
    if entries is not None:  # the walker read what protobuf reads (a long value cut)
        expected = [
            _bytes(p.value)[: MAX_OPTIONS_BYTES + 1]
            for p in model.metadata_props
            if p.key == OPTIONS_KEY
        ]
        assert entries == expected, (entries, expected)
    # as OnnxModel checks a file (its entries read by the walker), and as run_onnx checks a
    # session made by hand (the metadata map)
    for options in ([entries] if entries is not None else []) + [None]:
        try:
            config = check_contract(_Session(model), SOURCE, options)
        except ModelFileError as e:
            _check_message(e)
            continue
        assert isinstance(config, ElmoConfig)


def _bytes(value):
    return value if isinstance(value, bytes) else value.encode("utf-8")


def _check_message(error):
    message = str(error)
    assert message.startswith(f"{SOURCE}: ") and "\n" not in message, repr(message)
    assert len(message) < 2000, len(message)


def seed_corpus():
    """Stand-ins of an export (``elmo_tf.testing.onnx_stand_in``): as exported, with symbolic
    widths, of one and three layers, P=128, and with metadata that disagrees (n_layers, a
    second entry)."""
    models = [
        stand_in_model(),
        stand_in_model(declare_widths=False),
        stand_in_model(n_layers=1),
        stand_in_model(projection_dim=128, n_layers=3),
        stand_in_model(metadata=[(OPTIONS_KEY, json.dumps(stand_in_options(n_layers=1)))]),
        stand_in_model(metadata=[(OPTIONS_KEY, json.dumps(stand_in_options()))] * 2 + [("a", "b")]),
    ]
    return [model.SerializeToString() for model in models]
