"""ELMo vectors of a text file, written to HDF5 in the layout of AllenNLP's ``elmo`` command.

AllenNLP's former ``allennlp elmo`` command wrote this layout, so code that read its files
reads these (``elmo-tf embed`` is the command-line front end):

- one float32 dataset per input line, named by the line's 0-based index (``"0"``, ``"1"``,
  ...), holding for a line of ``n`` tokens:

  - ``layers="all"`` (``--all``, default): ``(L + 1, n, 2P)``, the token layer (``word_emb``
    duplicated to ``2P``, AllenNLP's layer 0) then each LSTM layer (``lstm_outputs1`` ..
    ``lstm_outputsL``);
  - ``"top"`` (``--top``): ``(n, 2P)``, the last LSTM layer;
  - ``"average"`` (``--average``): ``(n, 2P)``, the mean of the ``L + 1`` layers;

  an empty line gives ``n = 0``;
- ``sentence_to_index``: a ``(1,)`` string dataset holding a JSON object that maps each
  sentence to its line index string; a repeated sentence maps to its last line. A sentence
  given as a line of text (what ``elmo-tf embed`` passes) is keyed as written, without its
  leading and trailing whitespace, as AllenNLP's command keyed it (``line.strip()``); one
  given as a token list by its tokens joined by one space.

The sentences are read as a stream (any iterable; ``iter_lines`` reads a file a line at a
time) and embedded ``WINDOW_LINES`` lines at a time, length-sorted within the window, each batch
written as it comes: memory follows the window, not the input. Only ``sentence_to_index``, the
format's JSON of every sentence, grows with the input (its text, a small fraction of the
vectors written to disk). The file is written under a temporary name in the output
directory and renamed into place at the end (``elmo_tf.system.files.atomic_path``): an interrupted
run leaves no file under the output name and any previous file there untouched.
"""

import functools
import json
import os
import re
import sys

import numpy as np

from elmo_tf import checks
from elmo_tf.errors import InputFileError, OutputFileError
from elmo_tf.models.length_batches import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from elmo_tf.system import files
from elmo_tf.tokens.characters import split_tokens
from elmo_tf.tokens.text_lines import MAX_TOKENS_PER_LINE, decoded_lines, read_text_lines

LAYER_CHOICES = ("all", "top", "average")
# Lines embedded (and length-sorted) together: larger windows sort better, smaller ones hold
# less; 4,096 lines of 22 tokens are about 32 batches of 128.
WINDOW_LINES = 4096


def check_line_lengths(sentences, path, max_tokens=MAX_TOKENS_PER_LINE):
    """Raises ``InputFileError`` naming the first line of ``path`` over ``max_tokens`` tokens."""
    for number, sentence in enumerate(sentences, start=1):
        if len(sentence) > max_tokens:
            _too_many_tokens(path, number, len(sentence), max_tokens)


def _too_many_tokens(path, number, count, max_tokens):
    raise InputFileError(
        f"{path}: line {number} has {count:,} tokens, more than the limit of {max_tokens:,} per "
        "line (split it, or raise max_tokens_per_line)"
    )


def read_sentences(path):
    """The tokens of each line of a UTF-8 text file (blank: ``[]``), split on whitespace as the
    served ``default`` signature splits (``characters.split_tokens``)."""
    return list(iter_sentences(path))


def check_max_tokens_per_line(max_tokens, name="max_tokens_per_line"):
    """Raises ``ValueError`` unless ``max_tokens`` is a positive integer."""
    checks.positive_integer(name, max_tokens)


def iter_sentences(path, max_tokens=None):
    """``read_sentences`` as a stream: one token list per line, read as it is needed; a line of
    more than ``max_tokens`` tokens raises ``InputFileError`` naming it (``check_line_lengths``)."""
    for line in iter_lines(path, max_tokens):
        yield split_tokens(line)


def iter_lines(source, max_tokens=None, name=None):
    """The lines of UTF-8 text ``source`` as written (``str``, without line ends), read as they
    are needed: a path, or a binary stream (standard input) that ``name`` names in errors. A line
    of more than ``max_tokens`` tokens raises ``InputFileError`` naming it."""
    if isinstance(source, (str, bytes, os.PathLike)):
        name = os.fspath(source) if name is None else name
        lines = read_text_lines(source, what="input")
    else:
        lines = decoded_lines(source, name or "input", what="input")
    for number, line in enumerate(lines, start=1):
        if max_tokens is not None:
            count = len(split_tokens(line))
            if count > max_tokens:
                _too_many_tokens(name, number, count, max_tokens)
        yield line


def layer_stack(outputs, n_lstm_layers):
    """All ELMo layers of a batch, ``(L + 1, B, T, 2P)``: the token layer, then each LSTM layer.

    The token layer is ``word_emb`` ``(B, T, P)`` concatenated with itself, as AllenNLP's
    ``_ElmoBiLm`` returns it, so that every layer has width ``2P``.
    """
    word_emb = outputs["word_emb"]
    layers = [np.concatenate([word_emb, word_emb], axis=-1)]
    layers += [outputs[f"lstm_outputs{k}"] for k in range(1, n_lstm_layers + 1)]
    return np.stack(layers)


def select_layers(layers, which):
    """Reduces one sentence's ``(L + 1, n, 2P)`` layers to what ``which`` writes."""
    if which == "all":
        return layers
    if which == "top":
        return layers[-1]
    if which == "average":
        return layers.mean(axis=0)
    raise ValueError(f"layers must be one of {LAYER_CHOICES}, got {which!r}")


def write_embeddings(
    model,
    sentences,
    path,
    layers="all",
    batch_size=DEFAULT_BATCH_SIZE,
    on_batch=None,
    max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS,
):
    """Embeds ``sentences`` (token lists) with ``model`` and writes them to the HDF5 ``path``.

    Args:
        model: an ``ELMo``.
        sentences: lines of text (``str``, split on whitespace; ``iter_lines``) or token
            lists, any iterable (read as a stream, ``WINDOW_LINES`` at a time); the module
            docstring says how each is keyed in ``sentence_to_index``.
        path: the HDF5 file to write (replaced atomically when complete).
        layers: ``"all"``, ``"top"`` or ``"average"`` (see the module docstring).
        batch_size: sentences per model call.
        on_batch: called as ``on_batch(n_sentences, n_tokens)`` after each batch is written.
        max_batch_tokens: padded tokens per model call at most (``ELMo.embed_batches``).

    Raises ``OutputFileError`` when the file cannot be written (disk full, a file size limit):
    the partial file is removed and a previous file of that name is left untouched.
    """
    if layers not in LAYER_CHOICES:
        raise ValueError(f"layers must be one of {LAYER_CHOICES}, got {layers!r}")
    n_lstm_layers = model.config.n_lstm_layers
    previous_hooks = sys.unraisablehook, sys.excepthook
    # After a failed write, h5py's objects fail again as they are freed: Cython prints each
    # traceback through sys.excepthook, then "Exception ignored in ObjectID.__dealloc__"
    # through sys.unraisablehook, hundreds of times. The OutputFileError below says it once.
    sys.unraisablehook = functools.partial(_quiet_h5py_dealloc, previous_hooks[0])
    sys.excepthook = functools.partial(_quiet_h5py_traceback, previous_hooks[1])
    try:
        _write(
            model,
            sentences,
            os.fspath(path),
            layers,
            batch_size,
            max_batch_tokens,
            on_batch,
            n_lstm_layers,
        )
    except (OSError, RuntimeError) as e:  # h5py: disk full, a file size limit, an I/O error
        if isinstance(e, OutputFileError):
            raise
        raise OutputFileError(
            f"{path}: cannot write the embeddings ({_reason(e)}); the partial file was removed "
            "and any previous file of that name is untouched"
        ) from None
    finally:
        sys.unraisablehook, sys.excepthook = previous_hooks


def _reason(error):
    """The system's words for a failed write (``File too large``), not HDF5's dump of its
    buffers and offsets."""
    errno = getattr(error, "errno", None)
    if not errno:
        match = re.search(r"errno = (\d+)", str(error))
        errno = int(match.group(1)) if match else None
    if errno:
        return os.strerror(errno)
    return checks.error_text(error, 300)


def _quiet_h5py_dealloc(previous_hook, unraisable):
    if not (isinstance(unraisable.exc_value, RuntimeError) and "h5py" in repr(unraisable.object)):
        previous_hook(unraisable)


def _quiet_h5py_traceback(previous_hook, kind, value, traceback):
    frames, frame = [], traceback
    while frame is not None:
        frames.append(frame.tb_frame.f_code.co_filename)
        frame = frame.tb_next
    if not (issubclass(kind, RuntimeError) and any("h5py" in f for f in frames)):
        previous_hook(kind, value, traceback)


def _write(model, sentences, path, layers, batch_size, max_batch_tokens, on_batch, n_lstm_layers):
    # lazy: the command line imports this module to parse its flags (h5py: 80 ms)
    import h5py

    sentence_to_index = {}
    with files.atomic_path(path) as tmp, h5py.File(tmp, "x") as out:
        for start, window in _windows(sentences):
            keys = [_index_key(sentence) for sentence in window]
            window = [split_tokens(s) if isinstance(s, str) else s for s in window]
            batches = model.embed_batches(window, batch_size, max_batch_tokens=max_batch_tokens)
            for indices, outputs in batches:
                stack = layer_stack(outputs, n_lstm_layers)  # (L + 1, B, T, 2P)
                lengths = outputs["sequence_len"]
                for row, index in enumerate(indices):
                    vectors = select_layers(stack[:, row, : lengths[row]], layers)
                    out.create_dataset(str(start + index), data=vectors.astype(np.float32))
                if on_batch is not None:
                    on_batch(len(indices), int(lengths.sum()))
            for offset, key in enumerate(keys):
                sentence_to_index[key] = str(start + offset)
        out.create_dataset(
            "sentence_to_index", data=[json.dumps(sentence_to_index)], dtype=h5py.string_dtype()
        )


def _index_key(sentence):
    """The key of a sentence in ``sentence_to_index``: a line as written without its leading
    and trailing whitespace (AllenNLP's ``line.strip()``), or a token list's tokens joined by one
    space."""
    if isinstance(sentence, str):
        return sentence.strip()
    return " ".join(sentence)


def _windows(sentences):
    """``(index of the first, list of WINDOW_LINES token lists)`` over any iterable."""
    window, start = [], 0
    for sentence in sentences:
        window.append(sentence)
        if len(window) == WINDOW_LINES:
            yield start, window
            start += len(window)
            window = []
    if window:
        yield start, window
