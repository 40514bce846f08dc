"""Vocabulary: the word list of the language-model softmax, in bilm-tf's file format."""

import collections
import os

from elmo_tf import checks
from elmo_tf.errors import VocabularyError
from elmo_tf.system import files
from elmo_tf.tokens.text_lines import read_text_lines

BOS = "<S>"
EOS = "</S>"
UNK = "<UNK>"
SPECIAL_TOKENS = (BOS, EOS, UNK)


class Vocabulary:
    """The softmax vocabulary: token <-> id, with ``<S>``, ``</S>`` and ``<UNK>``.

    The file format is bilm-tf's: UTF-8, one token per line. Files written by
    :meth:`from_counts` list ``<S>``, ``</S>``, ``<UNK>`` first and then the corpus tokens by
    descending frequency (ties in code-point order), the order the log-uniform sampler of the
    sampled softmax assumes (id 0 most frequent). A file read with :meth:`from_file` may hold
    the three special tokens anywhere, as bilm-tf's loader allows.

    Args:
        tokens: the tokens in id order; must hold each special token exactly once and no
            duplicates.
        source: names the vocabulary in error messages (usually its file).

    Example:
    >>> vocab = Vocabulary.from_counts({"the": 3, "cat": 1})
    >>> vocab.tokens
    ('<S>', '</S>', '<UNK>', 'the', 'cat')
    >>> vocab.ids(["the", "dog"])
    [3, 2]
    """

    def __init__(self, tokens, source="vocabulary"):
        self.tokens = tuple(tokens)
        self.source = source
        self._index = {}
        for i, token in enumerate(self.tokens):
            if not token or any(c.isspace() for c in token):
                raise VocabularyError(
                    f"{source}: entry {i + 1} ({checks.shown(token)}) is empty or contains "
                    "whitespace"
                )
            if token in self._index:
                raise VocabularyError(
                    f"{source}: token {checks.shown(token)} appears twice (entries "
                    f"{self._index[token] + 1} and {i + 1})"
                )
            self._index[token] = i
        missing = [t for t in SPECIAL_TOKENS if t not in self._index]
        if missing:
            raise VocabularyError(
                f"{source}: missing the special token(s) {', '.join(missing)}; a bilm "
                f"vocabulary must hold {', '.join(SPECIAL_TOKENS)}"
            )
        self.bos_id = self._index[BOS]
        self.eos_id = self._index[EOS]
        self.unk_id = self._index[UNK]

    def __len__(self):
        return len(self.tokens)

    def __contains__(self, token):
        return token in self._index

    def id(self, token):
        """The id of ``token``, ``unk_id`` when it is out of the vocabulary."""
        return self._index.get(token, self.unk_id)

    def ids(self, tokens):
        return [self._index.get(t, self.unk_id) for t in tokens]

    @classmethod
    def from_counts(cls, counts, min_count=1, max_size=None, source="vocabulary"):
        """Builds a vocabulary from ``{token: count}``.

        Tokens seen fewer than ``min_count`` times are left out (they become ``<UNK>``);
        ``max_size`` caps the number of entries, the three special tokens included. Literal
        ``<S>``/``</S>``/``<UNK>`` tokens in the counts are not listed twice.
        """
        check_size_arguments(min_count, max_size)
        kept = [
            (token, n)
            for token, n in counts.items()
            if n >= min_count and token not in SPECIAL_TOKENS
        ]
        kept.sort(key=lambda item: (-item[1], item[0]))  # frequency, then a fixed order
        tokens = list(SPECIAL_TOKENS) + [token for token, _ in kept]
        if max_size is not None:
            tokens = tokens[:max_size]
        return cls(tokens, source=source)

    @classmethod
    def from_file(cls, path):
        """Reads a vocabulary file; errors name the file and what is wrong.

        An unreadable, binary or non-UTF-8 file raises ``InputFileError``; a file whose
        entries do not make a vocabulary raises ``VocabularyError``.
        """
        path = os.fspath(path)
        if kind := files.special_kind(path):  # read whole: a pipe's reader would wait forever
            raise VocabularyError(f"{path}: is a {kind}, not a vocabulary file")
        # bilm-tf strips each line; blank lines (a trailing newline) carry no token.
        tokens = [line.strip() for line in read_text_lines(path, what="vocabulary")]
        tokens = [t for t in tokens if t]
        if not tokens:
            raise VocabularyError(f"{path}: the vocabulary file is empty")
        return cls(tokens, source=path)

    def save(self, path):
        """Writes the vocabulary (one token per line), replacing ``path`` atomically."""
        files.write_text(path, "".join(token + "\n" for token in self.tokens))


def check_size_arguments(min_count=1, max_size=None, names=("min_count", "max_size")):
    """Raises ``VocabularyError`` unless ``min_count`` is an integer >= 1 and ``max_size``
    ``None`` or an integer that holds the special tokens; ``names`` name the two in the
    message (the command line passes its flags)."""
    checks.positive_integer(names[0], min_count, error=VocabularyError)
    if max_size is not None:
        checks.integer(names[1], max_size, minimum=len(SPECIAL_TOKENS), error=VocabularyError)


def count_tokens(sentences):
    """``collections.Counter`` of the tokens of an iterable of token lists."""
    counts = collections.Counter()
    for sentence in sentences:
        counts.update(sentence)
    return counts
