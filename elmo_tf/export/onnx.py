"""Running an exported ELMo ONNX file with ONNX Runtime, without TensorFlow (the ``[onnx]`` extra).

The file's contract is stated in ``elmo_tf.export.onnx_export``, which writes it. ``run_onnx``
checks and runs one batch of character ids; ``OnnxModel`` holds a session and embeds token
lists as ``ELMo.embed`` does (``elmo-tf embed --onnx``)::

    from elmo_tf.characters import batch_to_ids
    from elmo_tf.export.onnx import OnnxModel, run_onnx

    model = OnnxModel("elmo.onnx")  # load once, reuse per request
    outputs = run_onnx(model.session, batch_to_ids([["Hello", "world", "!"]]))
    outputs["elmo"]  # numpy float32 [1, 3, 2P]: 2P = 256 for the bundled sotu model

This module imports neither TensorFlow nor Keras: a process that runs an export needs
onnxruntime and numpy only.
"""

import base64
import binascii
import os
import types

import numpy as np

from elmo_tf import characters, codepoints, extras, token_mappers, untrusted_files
from elmo_tf.checks import shown
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ModelFileError, OptionsError, WeightFileError
from elmo_tf.models.length_batches import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_BATCH_TOKENS,
    length_batches,
)
from elmo_tf.models.outputs import output_shapes
from elmo_tf.options_file import MAX_OPTIONS_BYTES

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


def session(path, threads=None, providers=None):
    """An ``onnxruntime.InferenceSession`` for the file at ``path``.

    Args:
        path: the ``.onnx`` file.
        threads: intra-op threads (default: ONNX Runtime's, one per physical core).
        providers: execution providers in order of preference, e.g.
            ``["CPUExecutionProvider"]`` (default: the CPU; with onnxruntime-gpu, every one the
            build has, in its order: ``CUDAExecutionProvider`` before the CPU).
    """
    return _load(path, threads, providers)[0]


def _load(path, threads=None, providers=None):
    """``(session, ElmoConfig)`` of the file at ``path``, its contract checked
    (``check_contract``, with every metadata entry of the file)."""
    extras.require("onnx", "elmo_tf.export.onnx", modules=("onnxruntime",))
    import onnxruntime  # lazy: the [onnx] extra, checked above in one line

    path = os.fspath(path)
    untrusted_files.check_readable(path, "ONNX file", ModelFileError)
    options = onnxruntime.SessionOptions()
    # ONNX Runtime logs a file's faults as coloured C++ lines on fd 2 while it loads it: a
    # warning (a declared shape it cannot merge) before check_contract names the fault in one
    # line, an error (weights whose external data is a pipe, a directory, or past its file's
    # end) before the exception this function turns into that line. Only its fatal lines pass;
    # every error reaches the caller as an exception.
    options.log_severity_level = 4
    if threads is not None:
        options.intra_op_num_threads = threads
    if providers is None and onnxruntime.get_device() != "CPU":
        # A build with a GPU provider refuses a session that names none: all of the build's.
        providers = onnxruntime.get_available_providers()
    try:
        runner = onnxruntime.InferenceSession(path, options, providers=providers)
    except Exception as e:  # ONNX Runtime has one class per status code, none public
        reason = " ".join(str(e).split())[:300]
        raise ModelFileError(f"{path}: ONNX Runtime cannot load it ({reason})") from None
    return runner, check_contract(runner, path, options_metadata(path))


def check_contract(runner, source="the ONNX model", options=None):
    """The model's ``ElmoConfig``, from its ``elmo_tf.options`` metadata, once the session
    ``runner`` is found to be an ELMo export (``elmo_tf.export.onnx_export``) that agrees with
    it; ``ModelFileError`` (one line, naming ``source``) otherwise.

    The graph: one input ``char_ids``, int32 ``[batch, time, 50]`` with both first axes
    dynamic, and the outputs ``word_emb``, ``lstm_outputsK``, ``elmo``, ``default`` (float)
    and ``sequence_len`` (int32). A file with other inputs or outputs would run and return
    something else, or fail inside ONNX Runtime. Its metadata: one ``elmo_tf.options`` entry
    (``options``, the values of every such entry in the file, from ``options_metadata``;
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


def options_metadata(path, key=OPTIONS_KEY, limit=MAX_OPTIONS_BYTES):
    """The values (bytes) of every ``key`` entry (default ``elmo_tf.options``) of the ONNX file
    ``path``'s ``metadata_props``, in file order; ``ModelFileError`` naming ``path`` if its top
    level is not a protobuf message this reader can walk.

    Our own reader, because no public API holds the rule: ONNX Runtime's metadata map keeps one
    value per key, so a second entry would go unseen, and ``onnx.load`` would parse the whole
    file (every weight) a second time, beside the session that already holds them. This walks the
    ``ModelProto``'s top-level fields by protobuf's wire format, skipping each field it does
    not need (the graph) by its length, and reads the entries of ``metadata_props``
    (field 14: ``key`` 1, ``value`` 2; the last of a repeated field wins, as protobuf reads).
    """
    with open(path, "rb") as f:
        return options_metadata_of(f, os.fstat(f.fileno()).st_size, path, key, limit)


# ModelProto.metadata_props and its StringStringEntryProto's fields (onnx.proto).
_METADATA_FIELD = 14
_KEY_FIELD, _VALUE_FIELD = 1, 2
# protobuf wire types
_VARINT, _FIXED64, _BYTES, _GROUP_START, _GROUP_END, _FIXED32 = 0, 1, 2, 3, 4, 5
# An export has a dozen top-level fields; a file of more is refused rather than walked.
MAX_TOP_LEVEL_FIELDS = 10_000
# protobuf's own default limit on nested messages and groups.
_MAX_GROUP_DEPTH = 100


class _Malformed(Exception):
    """The bytes are not a protobuf message of the shape the walker reads."""


def options_metadata_of(f, size, source, key=OPTIONS_KEY, limit=MAX_OPTIONS_BYTES):
    """``options_metadata`` of the serialized ``ModelProto`` of ``size`` bytes in the binary
    file ``f`` (from its start), its errors naming ``source``."""
    values = []
    wanted = key.encode("utf-8")
    try:
        fields = 0
        while f.tell() < size:
            fields += 1
            if fields > MAX_TOP_LEVEL_FIELDS:
                raise ModelFileError(
                    f"{source}: more than {MAX_TOP_LEVEL_FIELDS:,} top-level fields in its "
                    "ModelProto; not an ELMo export"
                )
            number, wire = _tag(f)
            if number == _METADATA_FIELD and wire == _BYTES:
                end = _length(f, size)
                entry = _entry(f, end, wanted, limit)
                if entry is not None:
                    values.append(entry)
                f.seek(end)
            else:
                _skip(f, number, wire, size)
    except _Malformed as e:
        raise ModelFileError(
            f"{source}: its metadata cannot be read ({e}); not an ELMo export"
        ) from None
    return values


def _entry(f, end, wanted, limit=MAX_OPTIONS_BYTES):
    """The value of the ``StringStringEntryProto`` ending at ``end`` if its key is ``wanted``
    (a value over ``limit`` bytes as its first ``limit + 1`` bytes: refused by size), else
    ``None``."""
    key = value = None  # (offset, length) of the last key and value fields
    while f.tell() < end:
        number, wire = _tag(f)
        if number in (_KEY_FIELD, _VALUE_FIELD) and wire == _BYTES:
            length = _length(f, end) - f.tell()
            if number == _KEY_FIELD and length == len(wanted):
                key = f.read(length)
                continue
            if number == _KEY_FIELD:
                key = b""  # another key
            else:
                value = (f.tell(), length)
            f.seek(length, os.SEEK_CUR)
        else:
            _skip(f, number, wire, end)
    if f.tell() != end:
        raise _Malformed("a metadata entry runs past its length")
    if key != wanted:
        return None
    if value is None:
        return b""
    offset, length = value
    f.seek(offset)
    return f.read(min(length, limit + 1))


def _varint(f):
    result = 0
    for shift in range(0, 70, 7):
        byte = f.read(1)
        if not byte:
            raise _Malformed("the file ends inside a number")
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return result
    raise _Malformed("a number of more than 10 bytes")


def _tag(f):
    tag = _varint(f)
    number, wire = tag >> 3, tag & 7
    if number == 0 or tag >= 1 << 32:
        raise _Malformed(f"field number {number}")
    return number, wire


def _length(f, end):
    """The end offset of a length-delimited field whose length comes next."""
    length = _varint(f)
    stop = f.tell() + length
    if stop > end:
        raise _Malformed("a field runs past the end of the file")
    return stop


def _skip(f, number, wire, end, depth=0):
    """Skips the value of a field of ``number`` and ``wire`` type, ending before ``end``."""
    if wire == _VARINT:
        _varint(f)
        stop = f.tell()
    elif wire in (_FIXED64, _FIXED32):
        stop = f.tell() + (8 if wire == _FIXED64 else 4)
    elif wire == _BYTES:
        stop = _length(f, end)
    elif wire == _GROUP_START:
        if depth >= _MAX_GROUP_DEPTH:
            raise _Malformed("groups nested too deeply")
        while True:
            inner, inner_wire = _tag(f)
            if inner_wire == _GROUP_END:
                if inner != number:
                    raise _Malformed("a group ends with another's number")
                stop = f.tell()
                break
            _skip(f, inner, inner_wire, end, depth + 1)
    else:
        raise _Malformed(f"wire type {wire}")
    if stop > end:
        raise _Malformed("a field runs past the end of the file")
    f.seek(stop)


def check_char_ids(
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


def run_onnx(model, char_ids):
    """Runs an exported ELMo ONNX file on a batch of character ids.

    Args:
        model: path of the ``.onnx`` file, or an ``onnxruntime.InferenceSession`` of it
            (``session``; reuse one across calls to skip loading).
        char_ids: int array ``[batch, time, 50]`` from ``elmo_tf.batch_to_ids``; any batch
            size and length (both axes are dynamic).

    Returns:
        A dict of numpy arrays keyed by the file's outputs, in its order (``word_emb``,
        ``lstm_outputs1`` .., ``elmo``, ``default``, ``sequence_len``: the table in
        ``elmo_tf.models.outputs``), ``batch`` rows and ``time`` positions.

    Example:
    >>> ids = elmo_tf.batch_to_ids([["Hello", "world"], ["Hi"]])
    >>> run_onnx("elmo.onnx", ids)["elmo"].shape  # the bundled sotu model: 2P = 256
    (2, 2, 256)
    """
    if isinstance(model, OnnxModel):
        return model(char_ids)
    if hasattr(model, "run"):
        runner, source = model, "the ONNX model"
        config = check_contract(runner, source)
    else:
        source = os.fspath(model)
        runner, config = _load(source)
    return _run(runner, config, char_ids, source)


def _run(runner, config, char_ids, source):
    """``run_onnx`` on a checked session of ``config``: the outputs, once their shapes are
    checked (``check_outputs``)."""
    char_ids = check_char_ids(char_ids, config.id_width, config.char_table_rows)
    if config.word_embedding_dim and char_ids.size:
        low, high = char_ids[..., -1].min(), char_ids[..., -1].max()
        if low < 0 or high >= config.n_words:
            raise ValueError(
                f"char_ids' last column must hold word ids in [0, {config.n_words - 1}] (the "
                f"model's batch_to_ids makes them), got {low if low < 0 else high}"
            )
    names = [output.name for output in runner.get_outputs()]
    outputs = dict(zip(names, runner.run(names, {INPUT_NAME: char_ids}), strict=True))
    check_outputs(config, outputs, char_ids.shape, source)
    return outputs


class OnnxModel:
    """An exported ELMo ONNX file in an ONNX Runtime session, with ``ELMo``'s host-side API
    for token lists (``embed``, ``embed_batches``), so that ``elmo-tf embed --onnx`` and
    ``elmo_tf.embedding_file.write_embeddings`` run it as they run an ``ELMo``.

    Args:
        path: the ``.onnx`` file (``elmo-tf export onnx``).
        threads, providers: see ``session``.

    Attributes:
        session: the ``onnxruntime.InferenceSession``.
        config: the model's ``ElmoConfig``, from the file's ``elmo_tf.options`` metadata.
        precision: ``"int8"`` for a file of ``elmo-tf export onnx --precision int8`` (its
            ``elmo_tf.precision`` metadata), else ``"float32"``.
    """

    def __init__(self, path, threads=None, providers=None):
        self.path = os.fspath(path)
        self.session, self.config = _load(self.path, threads, providers)
        # read as bytes, as the options are: ONNX Runtime's map decodes every entry
        int8 = options_metadata(self.path, PRECISION_KEY)[-1:] == [b"int8"]
        self.precision = "int8" if int8 else "float32"
        self.token_mapper = token_mappers.mapper_for(
            self.config, _vocabulary(self.path, self.config)
        )

    def __call__(self, char_ids):
        """``run_onnx`` on this session."""
        return _run(self.session, self.config, char_ids, self.path)

    def embed_batches(
        self, sentences, batch_size=DEFAULT_BATCH_SIZE, max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS
    ):
        """Yields ``(indices, outputs)`` per batch of similar length, longest first, as
        ``ELMo.embed_batches`` does (no state, no token cache: the file dedupes the tokens of
        each call)."""
        sentences = characters.token_lists(sentences)
        lengths = [len(s) for s in sentences]
        for indices in length_batches(lengths, batch_size, max_batch_tokens):
            char_ids = self.token_mapper.batch_to_ids([sentences[i] for i in indices])
            yield indices, self(char_ids)

    def embed(
        self, sentences, batch_size=DEFAULT_BATCH_SIZE, max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS
    ):
        """The outputs for token lists, in the order given, padded to the longest sentence
        (``ELMo.embed``'s result)."""
        sentences = characters.token_lists(sentences)
        longest = max((len(s) for s in sentences), default=0)
        results = {}
        for indices, outputs in self.embed_batches(sentences, batch_size, max_batch_tokens):
            for key, value in outputs.items():
                if key not in results:
                    shape = (len(sentences), longest, *value.shape[2:])
                    if value.ndim < 3:
                        shape = (len(sentences), *value.shape[1:])
                    results[key] = np.zeros(shape, value.dtype)
                if value.ndim >= 3:
                    results[key][indices, : value.shape[1]] = value
                else:
                    results[key][indices] = value
        if not results:  # no sentence: run an empty batch for the keys and shapes
            return self(self.token_mapper.batch_to_ids([]))
        return results


def _vocabulary(path, config):
    """A code-point model's ``CodepointVocabulary`` from the file's ``elmo_tf.vocabulary``
    metadata (``None`` for bilm-tf's scheme), read as bytes, bounded by what ``config``'s
    tables can hold, then checked as a weight file's tables are; ``ModelFileError`` otherwise."""
    if not config.uses_codepoints:
        return None
    n_offsets = config.n_words + 1 if config.n_words else 0
    most = 4 * config.n_characters + codepoints.max_word_bytes(config) + 8 * n_offsets
    limit = 4 * (most // 3 + 1)  # its base64 text
    values = options_metadata(path, VOCABULARY_KEY, limit)
    where = f"{path}: its {VOCABULARY_KEY} metadata"
    if len(values) != 1:
        raise ModelFileError(
            f"{path}: {len(values)} {VOCABULARY_KEY} metadata entries; the export of a "
            "code-point model has one (its tables: elmo-tf export onnx writes them)"
        )
    (text,) = values
    if len(text) > limit:
        raise ModelFileError(f"{where} is larger than the model's tables can be ({limit:,} bytes)")
    try:
        data = base64.b64decode(text, validate=True)
        return codepoints.CodepointVocabulary.from_bytes(config, data, where)
    except binascii.Error as e:
        raise ModelFileError(f"{where} is not base64 ({e})") from None
    except WeightFileError as e:
        raise ModelFileError(str(e)) from None
