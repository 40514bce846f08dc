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

import os

import numpy as np

from elmo_tf import characters, extras, untrusted_files
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ModelFileError
from elmo_tf.models.length_batches import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_BATCH_TOKENS,
    length_batches,
)
from elmo_tf.options_file import MAX_OPTIONS_BYTES

# The file's input and the metadata key of its options (onnx_export writes them).
INPUT_NAME = "char_ids"
OPTIONS_KEY = "elmo_tf.options"
# The precision of an int8 file's weights (onnx_quantize); a file without it is float32.
PRECISION_KEY = "elmo_tf.precision"
# The outputs every export has (elmo_tf.models.outputs), with ONNX Runtime's type names; the
# lstm_outputsK and elmo_K ones depend on the model.
_REQUIRED_OUTPUTS = {
    "word_emb": "tensor(float)",
    "elmo": "tensor(float)",
    "default": "tensor(float)",
    "sequence_len": "tensor(int32)",
}
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
    extras.require("onnx", "elmo_tf.export.onnx", modules=("onnxruntime",))
    import onnxruntime  # lazy: the [onnx] extra, checked above in one line

    path = os.fspath(path)
    untrusted_files.check_readable(path, "ONNX file", ModelFileError)
    options = onnxruntime.SessionOptions()
    # ONNX Runtime's warnings (a declared shape it cannot merge, ...) are coloured C++ lines on
    # fd 2 before check_contract can name the file's fault in one line; its errors still pass.
    options.log_severity_level = 3
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
    check_contract(runner, path)
    return runner


def check_contract(runner, source="the ONNX model"):
    """Raises ``ModelFileError`` (one line, naming ``source``) unless the session ``runner``
    has an ELMo export's input and outputs (``elmo_tf.export.onnx_export``): one input
    ``char_ids``, int32 ``[batch, time, 50]`` with both first axes dynamic, and the outputs
    ``word_emb``, ``lstm_outputsK``, ``elmo``, ``default`` (float) and ``sequence_len`` (int32).
    A file with other inputs or outputs would run and return something else, or fail inside
    ONNX Runtime."""
    inputs = runner.get_inputs()
    expected = f"one input {INPUT_NAME!r}, int32 [batch, time, {characters.MAX_CHARS_PER_TOKEN}]"
    if len(inputs) != 1:
        names = [spec.name for spec in inputs]
        raise ModelFileError(
            f"{source}: not an ELMo export: its inputs are {names}, expected {expected}"
        )
    (spec,) = inputs
    shape = spec.shape
    width = characters.MAX_CHARS_PER_TOKEN
    if (
        spec.name != INPUT_NAME
        or spec.type != "tensor(int32)"
        or shape is None
        or len(shape) != 3
        or any(isinstance(size, int) for size in shape[:2])  # both axes dynamic
        or isinstance(shape[2], int)
        and shape[2] != width
    ):
        raise ModelFileError(
            f"{source}: not an ELMo export: its input is {spec.name!r} {spec.type} {shape}, "
            f"expected {expected}, both first axes dynamic"
        )
    types = {output.name: output.type for output in runner.get_outputs()}
    wanted = dict(_REQUIRED_OUTPUTS)
    layers = [name for name in types if name.startswith("lstm_outputs")]
    wanted.update({name: "tensor(float)" for name in layers or ["lstm_outputs1"]})
    problems = [
        f"{name} ({types.get(name, 'missing')})"
        for name, kind in wanted.items()
        if types.get(name) != kind
    ]
    if problems:
        raise ModelFileError(
            f"{source}: not an ELMo export: outputs {', '.join(problems)}; expected word_emb, "
            "lstm_outputs1.., elmo, default (float) and sequence_len (int32)"
        )


def check_char_ids(char_ids, width=characters.MAX_CHARS_PER_TOKEN):
    """``char_ids`` as an int32 array after checking it is ``[batch, time, width]`` character
    ids; ``ValueError`` (one line) for another rank or width, a dtype that is not an integer,
    or an id outside ``[0, 261]``."""
    char_ids = np.asarray(char_ids)
    if char_ids.ndim != 3 or char_ids.shape[-1] != width:
        raise ValueError(
            f"char_ids must have shape [batch, time, {width}] {_MAKES_THEM}, got {char_ids.shape}"
        )
    if not np.issubdtype(char_ids.dtype, np.integer):
        raise ValueError(f"char_ids must be integers {_MAKES_THEM}, got dtype {char_ids.dtype}")
    if char_ids.size:
        low, high = char_ids.min(), char_ids.max()
        if low < 0 or high >= characters.NUM_CHAR_IDS:
            raise ValueError(
                f"char_ids must be in [0, {characters.NUM_CHAR_IDS - 1}] {_MAKES_THEM}, got "
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
        model = model.session
    if hasattr(model, "run"):
        runner = model
        check_contract(runner)
    else:
        runner = session(model)
    char_ids = check_char_ids(char_ids)
    names = [output.name for output in runner.get_outputs()]
    return dict(zip(names, runner.run(names, {INPUT_NAME: char_ids}), strict=True))


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
        self.session = session(self.path, threads, providers)
        metadata = self.session.get_modelmeta().custom_metadata_map
        if OPTIONS_KEY not in metadata:
            raise ModelFileError(
                f"{self.path}: no {OPTIONS_KEY} metadata; not an ELMo export (elmo-tf export "
                "onnx writes one)"
            )
        # The metadata is the file's own options.json, read as one: bounded, then checked.
        source = f"{self.path}: its {OPTIONS_KEY} metadata"
        data = metadata[OPTIONS_KEY].encode("utf-8", "surrogatepass")
        if len(data) > MAX_OPTIONS_BYTES:
            raise ModelFileError(
                f"{source} is larger than {MAX_OPTIONS_BYTES} bytes, not an options.json"
            )
        options = untrusted_files.parse_json(data, source, "options.json", ModelFileError)
        self.config = ElmoConfig.from_options(options, source=source)
        self.precision = "int8" if metadata.get(PRECISION_KEY) == "int8" else "float32"

    def __call__(self, char_ids):
        """``run_onnx`` on this session."""
        return run_onnx(self.session, char_ids)

    def embed_batches(
        self, sentences, batch_size=DEFAULT_BATCH_SIZE, max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS
    ):
        """Yields ``(indices, outputs)`` per batch of similar length, longest first, as
        ``ELMo.embed_batches`` does (no state, no token cache: the file dedupes the tokens of
        each call)."""
        sentences = characters.token_lists(sentences)
        lengths = [len(s) for s in sentences]
        for indices in length_batches(lengths, batch_size, max_batch_tokens):
            char_ids = characters.batch_to_ids([sentences[i] for i in indices])
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
            return self(characters.batch_to_ids([]))
        return results
