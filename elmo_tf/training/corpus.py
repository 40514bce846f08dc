"""Corpus: tokenised training or held-out text, held as integer arrays."""

import glob
import os

import numpy as np

from elmo_tf.errors import CorpusError, InputFileError
from elmo_tf.tokens import characters
from elmo_tf.tokens.text_lines import read_text_lines
from elmo_tf.training.vocabulary import BOS, EOS

# Type ids of the sentence boundaries in every corpus (see ``Corpus``).
BOS_TYPE = 0
EOS_TYPE = 1


class Corpus:
    """Sentences of whitespace-separated tokens, as type ids into a table of distinct tokens.

    Every distinct token of the text is a *type*; ``types[0]`` is ``<S>`` and ``types[1]`` is
    ``</S>`` (a literal ``<S>``/``</S>`` in the text is the same type, as in bilm-tf). The
    character CNN reads types, out-of-vocabulary ones included; the softmax predicts their
    vocabulary ids (``type_targets``).

    Attributes:
        files: the files read, in order.
        types: list of the distinct tokens.
        token_types: int32 ``(n_tokens,)``, the type id of every token, sentence after sentence.
        row_splits: int64 ``(n_sentences + 1,)``; sentence ``i`` is
            ``token_types[row_splits[i]:row_splits[i + 1]]``.
        type_counts: int64 ``(n_types,)``, occurrences of each type.
    """

    def __init__(self, files, types, token_types, row_splits, type_counts):
        self.files = list(files)
        self.types = list(types)
        self.token_types = np.asarray(token_types, np.int32)
        self.row_splits = np.asarray(row_splits, np.int64)
        self.type_counts = np.asarray(type_counts, np.int64)

    @property
    def n_sentences(self):
        return len(self.row_splits) - 1

    @property
    def n_tokens(self):
        """Tokens of the text, without sentence boundaries."""
        return len(self.token_types)

    @property
    def n_positions(self):
        """Predictions per direction in one pass: each sentence's tokens plus one boundary."""
        return self.n_tokens + self.n_sentences

    def counts(self):
        """``{token: count}`` of the text's tokens (what a vocabulary is built from)."""
        return {token: int(n) for token, n in zip(self.types, self.type_counts) if n > 0}

    def type_targets(self, vocabulary):
        """int32 ``(n_types,)``: the vocabulary id of every type (``<UNK>`` when absent)."""
        return np.array(vocabulary.ids(self.types), np.int32)

    def oov_rate(self, vocabulary):
        """The fraction of the text's tokens that are not in ``vocabulary``."""
        if not self.n_tokens:
            return 0.0
        oov = np.array([t not in vocabulary for t in self.types])
        return float(self.type_counts[oov].sum() / self.n_tokens)

    def type_char_ids(self):
        """int32 ``(n_types, 50)``: the character ids of every type."""
        if not self.types:
            return np.zeros([0, characters.MAX_CHARS_PER_TOKEN], np.int32)
        return np.stack([characters.token_to_ids(t) for t in self.types])


def list_files(paths, what="training"):
    """Expands files, directories (every non-hidden file below, sorted) and glob patterns."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, n) for n in sorted(names) if not n.startswith(".")]
            if not found:
                raise CorpusError(f"{path}: the {what} directory holds no files")
            files += found
        elif os.path.exists(path):
            files.append(path)
        elif glob.has_magic(path):
            found = sorted(p for p in glob.glob(path) if os.path.isfile(p))
            if not found:
                raise CorpusError(f"{path}: no {what} file matches this pattern")
            files += found
        else:
            raise CorpusError(f"{path}: {what} file or directory not found")
    if not files:
        raise CorpusError(f"no {what} files given")
    return files


def read_corpus(paths, what="training"):
    """Reads UTF-8 text files with one whitespace-tokenised sentence per line.

    Blank lines are skipped. Every file is checked before anything else happens, so bad input
    stops with an error naming the file: ``CorpusError`` when it is not found, empty or binary
    (NUL bytes), ``InputFileError`` (``elmo_tf.system.files``) when it is unreadable or not valid
    UTF-8 (with the line number).
    """
    files = list_files(paths, what)
    index = {BOS: BOS_TYPE, EOS: EOS_TYPE}
    types = [BOS, EOS]
    token_types = []
    lengths = []
    for path in files:
        for sentence in _read_file(path, what):
            ids = []
            for token in sentence:
                i = index.get(token)
                if i is None:
                    i = index[token] = len(types)
                    types.append(token)
                ids.append(i)
            token_types.append(np.array(ids, np.int32))
            lengths.append(len(ids))
    flat = np.concatenate(token_types) if token_types else np.zeros([0], np.int32)
    row_splits = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    counts = np.bincount(flat, minlength=len(types)).astype(np.int64)
    return Corpus(files, types, flat, row_splits, counts)


def _read_file(path, what):
    try:
        lines = list(read_text_lines(path, what=what))
    except InputFileError:
        # A corpus names a binary file by the offset of its first NUL byte, wherever it is
        # (before any undecodable line: a binary file is the likelier mistake).
        nul = _nul_offset(path)
        if nul is None:
            raise
        raise CorpusError(
            f"{path}: binary file (NUL byte at byte offset {nul}); expected UTF-8 text with "
            "one sentence per line"
        ) from None
    sentences = [tokens for tokens in (line.split() for line in lines) if tokens]
    if not sentences:
        raise CorpusError(f"{path}: the {what} file is empty (no tokens)")
    return sentences


def _nul_offset(path):
    """The offset of the first NUL byte of ``path``; ``None`` if it has none (or is gone)."""
    offset = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                nul = chunk.find(b"\0")
                if nul >= 0:
                    return offset + nul
                offset += len(chunk)
    except OSError:
        return None
    return None
