"""Running an exported ELMo ONNX file with ONNX Runtime, without TensorFlow (the ``[onnx]`` extra).

The file's contract is stated in ``elmo_tf.export.onnx_export``, which writes it. ``run_onnx``
checks and runs one batch of character ids; ``OnnxModel`` holds a session and embeds token
lists as ``ELMo.embed`` does (``elmo-tf embed --onnx``)::

    from elmo_tf.tokens.characters import batch_to_ids
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

import numpy as np

from elmo_tf import checks
from elmo_tf.errors import ModelFileError, WeightFileError
from elmo_tf.export import onnx_metadata
from elmo_tf.export.onnx_contract import (
    INPUT_NAME,
    OPTIONS_KEY,
    PRECISION_KEY,
    VOCABULARY_KEY,
    check_contract,
    check_outputs,
    checked_char_ids,
)
from elmo_tf.formats.options_file import MAX_OPTIONS_BYTES
from elmo_tf.models.length_batches import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_BATCH_TOKENS,
    length_batches,
)
from elmo_tf.system import extras, untrusted_files
from elmo_tf.tokens import characters, codepoints, token_mappers

# An int8 file's precision entry is "int8"; a few bytes more are read to refuse a longer one.
_PRECISION_BYTES = 16


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
    """``(session, ElmoConfig, precision, vocabulary)`` of the file at ``path``, its contract
    checked (``check_contract``, with every metadata entry of the file, read in one walk of
    it: ``onnx_metadata``)."""
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
        reason = checks.error_text(e, 300)
        raise ModelFileError(f"{path}: ONNX Runtime cannot load it ({reason})") from None
    keys = (OPTIONS_KEY, PRECISION_KEY, VOCABULARY_KEY)
    with onnx_metadata.read_metadata(path, keys) as metadata:
        config = check_contract(runner, path, metadata.values(OPTIONS_KEY, MAX_OPTIONS_BYTES))
        # read as bytes, as the options are: ONNX Runtime's map decodes every entry
        int8 = metadata.values(PRECISION_KEY, _PRECISION_BYTES)[-1:] == [b"int8"]
        vocabulary = _vocabulary(metadata, path, config)
    return runner, config, "int8" if int8 else "float32", vocabulary


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
        runner, config, _, _ = _load(source)
    return _run(runner, config, char_ids, source)


def _run(runner, config, char_ids, source):
    """``run_onnx`` on a checked session of ``config``: the outputs, once their shapes are
    checked (``check_outputs``)."""
    char_ids = checked_char_ids(char_ids, config.id_width, config.char_table_rows)
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
    ``elmo_tf.formats.embedding_file.write_embeddings`` run it as they run an ``ELMo``.

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
        self.session, self.config, self.precision, vocabulary = _load(self.path, threads, providers)
        self.token_mapper = token_mappers.mapper_for(self.config, vocabulary)

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


def _vocabulary(metadata, path, config):
    """A code-point model's ``CodepointVocabulary`` from the file's ``elmo_tf.vocabulary``
    metadata (``None`` for bilm-tf's scheme), read as bytes, bounded by what ``config``'s
    tables can hold, then checked as a weight file's tables are; ``ModelFileError`` otherwise."""
    if not config.uses_codepoints:
        return None
    n_offsets = config.n_words + 1 if config.n_words else 0
    most = 4 * config.n_characters + codepoints.max_word_bytes(config) + 8 * n_offsets
    limit = 4 * (most // 3 + 1)  # its base64 text
    values = metadata.values(VOCABULARY_KEY, limit)
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
