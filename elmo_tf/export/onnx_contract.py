"""The contract of an exported ELMo ONNX file, checked without TensorFlow: its one input, its
outputs, and the metadata that says which model it is (``elmo_tf.export.onnx_export`` writes
it). ``check_contract`` checks an ONNX Runtime session against it and gives the model's
``ElmoConfig``; ``checked_char_ids`` and ``check_outputs`` check a call's input and outputs.
"""

import types

import numpy as np

from elmo_tf.checks import shown
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ModelFileError, OptionsError
from elmo_tf.formats.options_file import MAX_OPTIONS_BYTES
from elmo_tf.models.outputs import output_shapes
from elmo_tf.system import untrusted_files
from elmo_tf.tokens import characters

# The file's input and the metadata key of its options (onnx_export writes them).
INPUT_NAME = "char_ids"
OPTIONS_KEY = "elmo_tf.options"
# The precision of an int8 file's weights (onnx_quantize); a file without it is float32.
PRECISION_KEY = "elmo_tf.precision"
# A code-point model's tables (ELMoForManyLangs'), base64 of CodepointVocabulary.to_bytes():
# the runner maps tokens on the host with them, as the graph cannot.
VOCABULARY_KEY = "elmo_tf.vocabulary"
# The input widths an export has: bilm-tf's 50 character ids, and a word id after them.
_WIDTHS = (characters.MAX_CHARS_PER_TOKEN, characters.MAX_CHARS_PER_TOKEN + 1)
# The outputs every export has (elmo_tf.models.outputs), with ONNX Runtime's type names; the
# lstm_outputsK and elmo_K ones depend on the model.
_REQUIRED_OUTPUTS = {
    "word_emb": "tensor(float)",
    "elmo": "tensor(float)",
    "default": "tensor(float)",
    "sequence_len": "tensor(int32)",
}
_LAYER_PREFIX = "lstm_outputs"
_MAKES_THEM = "(elmo_tf.batch_to_ids makes them)"


def check_contract(runner, source="the ONNX model", options=None):
    """The model's ``ElmoConfig``, from its ``elmo_tf.options`` metadata, once the session
    ``runner`` is found to be an ELMo export (``elmo_tf.export.onnx_export``) that agrees with
    it; ``ModelFileError`` (one line, naming ``source``) otherwise.

    The graph: one input ``char_ids``, int32 ``[batch, time, 50]`` with both first axes
    dynamic, and the outputs ``word_emb``, ``lstm_outputsK``, ``elmo``, ``default`` (float)
    and ``sequence_len`` (int32). A file with other inputs or outputs would run and return
    something else, or fail inside ONNX Runtime. Its metadata: one ``elmo_tf.options`` entry
    (``options``, the values of every such entry in the file, from ``onnx_metadata``;
    default: the session's metadata map, which holds one at most), a valid options.json whose
    ``lstm.n_layers`` is the number of ``lstm_outputsK`` outputs (``lstm_outputs1`` ..
    ``lstm_outputsL``) and whose ``lstm.projection_dim`` P is the width of ``word_emb``
    and 2P that of the others, where the graph declares a width (``check_outputs`` checks the
    outputs of each run). ``embed --onnx --all`` stacks the layers the metadata names: a file
    whose metadata names fewer drops the others without a word.

    ONNX Runtime turns every name (and the metadata map) into Python text as it is read: a
    name that is not UTF-8 raised ``UnicodeDecodeError`` there, now a ``ModelFileError``."""
    try:
        inputs, outputs = _node_args(runner.get_inputs()), _node_args(runner.get_outputs())
    except UnicodeDecodeError as e:
        raise ModelFileError(
            f"{source}: not an ELMo export: a name of its inputs or outputs is not UTF-8 text ({e})"
        ) from None
    _check_graph(inputs, outputs, source)
    if options is None:
        try:
            metadata = runner.get_modelmeta().custom_metadata_map
        except UnicodeDecodeError as e:
            raise ModelFileError(
                f"{source}: ONNX Runtime cannot show its metadata, a key or value of which is "
                f"not UTF-8 text ({e}); give the file's path to read it"
            ) from None
        options = [metadata[OPTIONS_KEY]] if OPTIONS_KEY in metadata else []
    config = read_options(options, source)
    (spec,) = inputs
    if isinstance(spec.shape[2], int) and spec.shape[2] != config.id_width:
        raise ModelFileError(
            f"{source}: not an ELMo export of its {OPTIONS_KEY} metadata: its input is "
            f"{shown(spec.name)} {spec.type} {shown(spec.shape)}, expected one input "
            f"{INPUT_NAME!r}, int32 [batch, time, {config.id_width}]"
        )
    _check_graph_agrees(config, outputs, source)
    return config


def _node_args(node_args):
    """ONNX Runtime's ``NodeArg``s (or their stand-ins) as plain ``(name, type, shape)``
    records, each read once."""
    return [types.SimpleNamespace(name=a.name, type=a.type, shape=a.shape) for a in node_args]


def _check_graph(inputs, outputs, source):
    """``ModelFileError`` unless ``inputs`` and ``outputs`` (ONNX Runtime's ``NodeArg``s: a
    name, a type, a shape) are an ELMo export's (``check_contract``)."""
    expected = f"one input {INPUT_NAME!r}, int32 [batch, time, {characters.MAX_CHARS_PER_TOKEN}]"
    if len(inputs) != 1:
        names = shown([spec.name for spec in inputs])
        raise ModelFileError(
            f"{source}: not an ELMo export: its inputs are {names}, expected {expected}"
        )
    (spec,) = inputs
    shape = spec.shape
    if (
        spec.name != INPUT_NAME
        or spec.type != "tensor(int32)"
        or shape is None
        or len(shape) != 3
        or any(isinstance(size, int) for size in shape[:2])  # both axes dynamic
        or isinstance(shape[2], int)
        and shape[2] not in _WIDTHS
    ):
        raise ModelFileError(
            f"{source}: not an ELMo export: its input is {shown(spec.name)} {spec.type} "
            f"{shown(shape)}, expected {expected}, both first axes dynamic"
        )
    types = {output.name: output.type for output in outputs}
    wanted = dict(_REQUIRED_OUTPUTS)
    layers = [name for name in types if name.startswith(_LAYER_PREFIX)]
    wanted.update({name: "tensor(float)" for name in layers or [f"{_LAYER_PREFIX}1"]})
    problems = [
        f"{shown(name, quote=False)} ({types.get(name, 'missing')})"
        for name, kind in wanted.items()
        if types.get(name) != kind
    ]
    if problems:
        raise ModelFileError(
            f"{source}: not an ELMo export: outputs {', '.join(problems[:4])}; expected "
            "word_emb, lstm_outputs1.., elmo, default (float) and sequence_len (int32)"
        )


def read_options(values, source):
    """The ``ElmoConfig`` of an export's ``elmo_tf.options`` metadata: ``values``, the value
    (str or bytes) of each entry of that key, one expected; read as an options.json file is
    read (bounded, then checked). ``ModelFileError`` naming ``source`` otherwise."""
    if not values:
        raise ModelFileError(
            f"{source}: no {OPTIONS_KEY} metadata; not an ELMo export (elmo-tf export onnx "
            "writes one)"
        )
    if len(values) > 1:
        raise ModelFileError(
            f"{source}: {len(values)} {OPTIONS_KEY} metadata entries; an export has one (which "
            "one a reader takes is its own choice)"
        )
    where = f"{source}: its {OPTIONS_KEY} metadata"
    (data,) = values
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > MAX_OPTIONS_BYTES:
        raise ModelFileError(
            f"{where} is larger than {MAX_OPTIONS_BYTES} bytes, not an options.json"
        )
    options = untrusted_files.parse_json(data, where, "options.json", ModelFileError)
    try:
        return ElmoConfig.from_options(options, source=where)
    except OptionsError as e:  # the file is the fault: one class for all of its faults
        raise ModelFileError(str(e)) from None


def _check_graph_agrees(config, outputs, source):
    """``ModelFileError`` unless the graph's ``outputs`` are those of ``config``: its
    ``lstm_outputsK`` are ``lstm_outputs1`` .. ``lstm_outputsL`` (L = ``lstm.n_layers``), and
    each declared rank and last axis is the one ``config`` makes. ONNX Runtime gives an output
    of unknown rank as ``[]``, and a symbolic axis as a name or ``None``: those are left to
    ``check_outputs``."""
    metadata = f"its {OPTIONS_KEY} metadata"
    layers = sorted(o.name for o in outputs if o.name.startswith(_LAYER_PREFIX))
    expected = output_shapes(config, "batch", "time")
    wanted = sorted(name for name in expected if name.startswith(_LAYER_PREFIX))
    if layers != wanted:
        raise ModelFileError(
            f"{source}: {metadata} says lstm.n_layers is {config.n_lstm_layers}, but the graph "
            f"has {len(layers)} LSTM layer outputs ({shown(', '.join(layers), quote=False)}); "
            "expected " + ", ".join(wanted)
        )
    for output in outputs:
        want = expected.get(output.name)
        shape = output.shape
        if want is None or not shape:
            continue
        if len(shape) != len(want) or isinstance(shape[-1], int) and shape[-1] != want[-1]:
            raise ModelFileError(
                f"{source}: {metadata} says lstm.projection_dim is {config.projection_dim}, so "
                f"{output.name} is {_shape_text(want)}, but the graph declares it "
                f"{_shape_text(shape)}"
            )


def check_outputs(config, outputs, char_ids_shape, source="the ONNX model"):
    """``ModelFileError`` unless each run output (``{name: array}``) of an export of ``config``
    has the shape that the run's ``char_ids`` of ``char_ids_shape`` make
    (``elmo_tf.models.outputs.output_shapes``): a graph whose axes are symbolic declares no
    width to check before it runs."""
    batch, time = char_ids_shape[:2]
    for name, want in output_shapes(config, batch, time).items():
        got = outputs[name].shape
        if got != want:
            raise ModelFileError(
                f"{source}: its output {name} is {_shape_text(got)} for char_ids "
                f"{_shape_text(char_ids_shape)}; its {OPTIONS_KEY} metadata (lstm.projection_dim "
                f"{config.projection_dim}) makes it {_shape_text(want)}"
            )


def _shape_text(shape):
    return shown("[" + ", ".join("?" if d is None else str(d) for d in shape) + "]", quote=False)


def checked_char_ids(
    char_ids, width=characters.MAX_CHARS_PER_TOKEN, n_characters=characters.NUM_CHAR_IDS
):
    """``char_ids`` as an int32 array after checking it is ``[batch, time, width]`` character
    ids; ``ValueError`` (one line) for another rank or width, a dtype that is not an integer,
    or an id outside ``[0, n_characters - 1]`` (``[0, 261]``; a code-point model's own, its
    word ids in a 51st column checked by the graph's lookup)."""
    char_ids = np.asarray(char_ids)
    if char_ids.ndim != 3 or char_ids.shape[-1] != width:
        raise ValueError(
            f"char_ids must have shape [batch, time, {width}] {_MAKES_THEM}, got {char_ids.shape}"
        )
    if not np.issubdtype(char_ids.dtype, np.integer):
        raise ValueError(f"char_ids must be integers {_MAKES_THEM}, got dtype {char_ids.dtype}")
    chars = char_ids[..., : characters.MAX_CHARS_PER_TOKEN]
    if chars.size:
        low, high = chars.min(), chars.max()
        if low < 0 or high >= n_characters:
            raise ValueError(
                f"char_ids must be in [0, {n_characters - 1}] {_MAKES_THEM}, got "
                f"{low if low < 0 else high}"
            )
    return char_ids.astype(np.int32, copy=False)
