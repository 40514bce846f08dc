"""ELMoForManyLangs' token mapping: code points looked up in the model's own table, and a word
id from its word vocabulary.

A model with ``character_scheme="codepoints"`` (converted from ELMoForManyLangs, EFML) reads a
token as a row of ``config.id_width`` ids: 50 character slots, then the word id when it has a
word embedding. Every id is EFML's id + 1, so that 0 keeps meaning "a padded token position",
as with UTF-8 bytes (``elmo_tf.tokens.characters``). For a token of n code points (cut to its first
48, as EFML's ``read_list`` cuts it):

=============  ===============================================================================
slot           id
=============  ===============================================================================
0              the id of EFML's ``<eow>``: EFML swaps the two word marks (``frontend.py``
               reads ``bow_id, eow_id = char2id['<eow>'], char2id['<bow>']``), and its
               weights were trained so
1 .. n         each code point's id; one the table lacks: ``<oov>``'s
n + 1          the id of EFML's ``<bow>`` (the swap again)
n + 2 .. 49    ``<pad>``'s id (its row is a trained-as-initialised unit vector, not zeros:
               the max-pooling sees it)
50             the word id of the cut token, exact match (no lowercasing, no normalisation);
               one the vocabulary lacks: ``<oov>``'s
=============  ===============================================================================

The sentence markers (and a token that is the string ``<bos>`` or ``<eos>``, as in EFML) are
``[<eow>, <bos> or <eos>, <bow>, <pad>...]`` with the word ids of ``<bos>`` / ``<eos>``
(``<oov>``'s where the vocabulary lacks them). The special ids live in the model's config
(``ElmoConfig.special_characters``, ``special_words``: the framing needs them), the tables in
its weight file (``CodepointVocabulary``: ``vocabulary/char_codepoints``, ``vocabulary/words``,
``vocabulary/word_offsets``).
"""

import dataclasses

import numpy as np

from elmo_tf import checks
from elmo_tf.errors import ExportError, WeightFileError
from elmo_tf.tokens import characters

UTF8_BYTES = "utf8-bytes"
CODEPOINTS = "codepoints"
SCHEMES = (UTF8_BYTES, CODEPOINTS)

# EFML's special entries, in the order the config's tuples hold their ids.
CHAR_SPECIALS = ("bos", "eos", "oov", "pad", "bow", "eow")
WORD_SPECIALS = ("oov", "bos", "eos", "pad")
MAX_TOKEN_CODEPOINTS = characters.MAX_CHARS_PER_TOKEN - 2  # EFML's cut: max_chars - 2
MAX_CODEPOINT = 0x10FFFF
NO_CODEPOINT = -1  # an id no character maps to: id 0, the specials
# The word vocabulary's bytes, at most this many per word on average and in all (bounds on a
# file's dataset before it is read; EFML's words are a few bytes each, 150,000 at most).
MAX_BYTES_PER_WORD = 256
MAX_VOCABULARY_BYTES = 1 << 30


def check_export(config, surface):
    """``ExportError`` (one line) for an export whose graph takes bilm-tf's character ids
    only (``surface``: ``"a TFLite file"``) of a code-point model: its ids need the model's
    own tables, which the SavedModel carries into its graph and an ONNX file beside it."""
    if config.uses_codepoints:
        raise ExportError(
            f"{surface} takes bilm-tf's character ids only, and this model maps tokens with its "
            "own code-point table (ELMoForManyLangs'): export a SavedModel (elmo-tf export "
            "saved-model), which maps them in its graph, or ONNX (elmo-tf export onnx), whose "
            "runner maps them with the tables the file carries"
        )


def max_word_bytes(config):
    """The most bytes ``vocabulary/words`` may hold for ``config``."""
    return min(config.n_words * MAX_BYTES_PER_WORD, MAX_VOCABULARY_BYTES)


DATASETS = ("vocabulary/char_codepoints", "vocabulary/words", "vocabulary/word_offsets")


def special_token(name):
    """How EFML's dictionaries write a special entry: ``<bos>``."""
    return f"<{name}>"


def boundary_rows(config):
    """``(bos_row, eos_row)``, each ``(config.id_width,)`` int32: the rows of the sentence
    markers, from the config's special ids."""
    ids = dict(zip(CHAR_SPECIALS, config.special_characters))
    rows = []
    for marker in ("bos", "eos"):
        row = np.full([config.id_width], ids["pad"], np.int32)
        row[:3] = [ids["eow"], ids[marker], ids["bow"]]  # EFML's swapped word marks
        if config.word_embedding_dim:
            row[-1] = dict(zip(WORD_SPECIALS, config.special_words))[marker]
        rows.append(row)
    return tuple(rows)


@dataclasses.dataclass(frozen=True)
class CodepointVocabulary:
    """The tables of a code-point model, in our ids (EFML's + 1).

    Args:
        char_codepoints: ``(n_characters,)`` int32: the code point of each id, ``NO_CODEPOINT``
            for id 0, the specials and an entry of more than one character.
        words: ``(M,)`` uint8: the word vocabulary's UTF-8 bytes, one word after another.
        word_offsets: ``(n_words + 1,)`` int64: word ``i`` is ``words[offsets[i]:offsets[i+1]]``
            (id 0 empty). Both empty without a word embedding.
    """

    char_codepoints: np.ndarray
    words: np.ndarray
    word_offsets: np.ndarray

    @classmethod
    def from_lexicons(cls, char_lexicon, word_lexicon=None):
        """The vocabulary of EFML's ``{token: id}`` dictionaries (ids ``0..n-1``, as the
        folder reader checked them), and the special ids, ``(vocabulary, char_specials,
        word_specials)`` (ours: + 1)."""
        codes = np.full([len(char_lexicon) + 1], NO_CODEPOINT, np.int32)
        for token, index in char_lexicon.items():
            if len(token) == 1:  # the specials (and any longer entry) match no character
                codes[index + 1] = ord(token)
        char_specials = tuple(char_lexicon[special_token(n)] + 1 for n in CHAR_SPECIALS)
        for index in char_specials:
            codes[index] = NO_CODEPOINT
        if not word_lexicon:
            empty = np.zeros([0], np.uint8), np.zeros([0], np.int64)
            return cls(codes, *empty), char_specials, None
        encoded = [b""] * (len(word_lexicon) + 1)
        for word, index in word_lexicon.items():
            encoded[index + 1] = word.encode("utf-8")  # pragma: no mutate, equivalent: same codec
        offsets = np.zeros([len(encoded) + 1], np.int64)
        offsets[1:] = np.cumsum([len(w) for w in encoded])
        words = np.frombuffer(b"".join(encoded), np.uint8).copy()
        oov = word_lexicon["<oov>"] + 1
        word_specials = tuple(
            word_lexicon.get(special_token(n), oov - 1) + 1 for n in WORD_SPECIALS
        )
        return cls(codes, words, offsets), char_specials, word_specials

    @classmethod
    def from_arrays(cls, config, arrays, source):
        """The vocabulary of a weight file's datasets (``{name: array}``, names ``DATASETS``),
        checked against ``config``; ``WeightFileError`` naming ``source`` and the dataset."""
        codes = np.asarray(arrays[DATASETS[0]])
        _check(codes.shape == (config.n_characters,), source, DATASETS[0],
               f"has shape {codes.shape}, expected ({config.n_characters},)")  # fmt: skip
        _check(codes.dtype.kind in "iu",  # pragma: no mutate, equivalent: no dtype kind is X
               source, DATASETS[0], "is not integer")  # fmt: skip
        # compared in the file's own dtype: cast to int64 first, uint64's 2**64 - 1 passed as -1
        _check(np.all((codes >= NO_CODEPOINT) & (codes <= MAX_CODEPOINT)), source, DATASETS[0],
               "holds a value that is no code point")  # fmt: skip
        reserved = [0, *config.special_characters]
        _check(np.all(codes[reserved] == NO_CODEPOINT), source, DATASETS[0],
               "gives id 0 or a special character's id a code point")  # fmt: skip
        real = codes[codes >= 0]
        _check(len(np.unique(real)) == len(real), source, DATASETS[0],
               "gives one code point two ids")  # fmt: skip
        words = np.asarray(arrays[DATASETS[1]])
        offsets = np.asarray(arrays[DATASETS[2]])
        n_offsets = config.n_words + 1 if config.n_words else 0
        _check(offsets.shape == (n_offsets,), source, DATASETS[2],
               f"has shape {offsets.shape}, expected ({n_offsets},)")  # fmt: skip
        _check(words.dtype == np.uint8 and words.ndim == 1 and
               offsets.dtype.kind in "iu",  # pragma: no mutate, equivalent: no dtype kind is X
               source, DATASETS[1], "is not bytes with integer offsets")  # fmt: skip
        vocabulary = cls(codes.astype(np.int32), words, offsets.astype(np.int64))
        if config.n_words:
            _check(offsets[0] == 0 and offsets[1] == 0 and np.all(np.diff(offsets) >= 0)
                   and offsets[-1] == len(words), source, DATASETS[2],
                   "does not cut the words into consecutive spans (id 0 empty)")  # fmt: skip
            table = vocabulary.word_table(source)
            names = dict(zip(WORD_SPECIALS, config.special_words))
            for name in ("oov", "pad"):
                _check(table.get(special_token(name)) == names[name], source, DATASETS[1],
                       f"does not hold {special_token(name)} at the config's id")  # fmt: skip
        else:
            _check(len(words) == 0, source, DATASETS[1], "holds words for a model without any")
        return vocabulary

    def to_bytes(self):
        """The three tables as one byte string, as an ONNX file's metadata carries them
        (``from_bytes``): the code points (int32), the words' bytes, the offsets (int64),
        little-endian, their lengths given by the model's config."""
        return b"".join([self.char_codepoints.astype("<i4").tobytes(), self.words.tobytes(),
                         self.word_offsets.astype("<i8").tobytes()])  # fmt: skip

    @classmethod
    def from_bytes(cls, config, data, source):
        """The vocabulary of ``to_bytes``'s ``data`` for ``config``, its length checked before
        any array is made, then every check of ``from_arrays``."""
        n_codes = config.n_characters
        n_offsets = config.n_words + 1 if config.n_words else 0
        n_words = len(data) - 4 * n_codes - 8 * n_offsets
        _check(0 <= n_words <= max_word_bytes(config), source, "vocabulary",
               f"holds {len(data):,} bytes, which the model's tables cannot hold")  # fmt: skip
        arrays = {
            DATASETS[0]: np.frombuffer(
                data,
                "<i4",
                n_codes,
                0,  # pragma: no mutate, equivalent: 0 is the default offset
            ),
            DATASETS[1]: np.frombuffer(data, np.uint8, n_words, 4 * n_codes),
            DATASETS[2]: np.frombuffer(data, "<i8", n_offsets, 4 * n_codes + n_words),
        }
        return cls.from_arrays(config, arrays, source)

    def arrays(self):
        """``{dataset: array}`` as a weight file holds them."""
        return dict(zip(DATASETS, (self.char_codepoints, self.words, self.word_offsets)))

    def char_table(self):
        """``{code point: id}``."""
        ids = np.flatnonzero(self.char_codepoints >= 0)
        return dict(zip(self.char_codepoints[ids].tolist(), ids.tolist()))

    def word_table(self, source="vocabulary"):
        """``{word: id}`` (id 0, a padded position, has none); ``WeightFileError`` for words
        that are not UTF-8, empty or given twice."""
        table = {}
        data, offsets = self.words.tobytes(), self.word_offsets.tolist()
        for index in range(1, len(offsets) - 1):
            span = data[offsets[index] : offsets[index + 1]]
            try:
                word = span.decode("utf-8")  # pragma: no mutate, equivalent: UTF-8 is utf-8
            except UnicodeDecodeError:
                word = None  # pragma: no mutate, equivalent: "" is refused the same
            _check(bool(word) and word not in table, source, DATASETS[1],
                   f"holds word {index} empty, not UTF-8, or twice")  # fmt: skip
            table[word] = index
        return table


def _check(ok, source, dataset, problem):
    if not ok:
        raise WeightFileError(f"{source}: dataset '{dataset}' {problem}")


class CodepointMapper:
    """Tokens to id rows (see the module docstring), on the host with NumPy.

    Args:
        config: an ``ElmoConfig`` with ``character_scheme="codepoints"``.
        vocabulary: its ``CodepointVocabulary`` (the weight file's); ``None`` before weights
            are loaded, when mapping a token says so.
    """

    def __init__(self, config, vocabulary=None):
        self.config = config
        self.vocabulary = vocabulary
        self.bos_row, self.eos_row = boundary_rows(config)
        specials = dict(zip(CHAR_SPECIALS, config.special_characters))
        self._oov, self._pad = specials["oov"], specials["pad"]
        self._eow, self._bow = specials["eow"], specials["bow"]
        self._chars = None if vocabulary is None else vocabulary.char_table()
        self._words = None
        if vocabulary is not None and config.word_embedding_dim:
            self._words = vocabulary.word_table()
            self._word_oov = dict(zip(WORD_SPECIALS, config.special_words))["oov"]

    def token_row(self, token):
        """The ``(id_width,)`` int32 row of one token (``str``, or UTF-8 ``bytes``)."""
        if self._chars is None:
            raise ValueError(
                "this code-point model has no character table yet: load its weights "
                "(ELMo.from_preset, elmo_tf.load_weights), which hold it"
            )
        token = _text(token)
        if token == "<bos>":
            return self.bos_row.copy()
        if token == "<eos>":
            return self.eos_row.copy()
        token = token[:MAX_TOKEN_CODEPOINTS]  # code points, as EFML's read_list cuts
        row = np.full([self.config.id_width], self._pad, np.int32)
        row[0] = self._eow  # EFML's swap: see the module docstring
        chars = self._chars
        row[1 : len(token) + 1] = [chars.get(ord(c), self._oov) for c in token]
        row[len(token) + 1] = self._bow
        if self._words is not None:
            row[-1] = self._words.get(token, self._word_oov)  # the cut token, exact match
        return row

    def batch_to_ids(self, sentences, max_length=None):
        """``(B, T, id_width)`` int32 rows of tokenised sentences, zero at padded positions
        (``elmo_tf.batch_to_ids``'s contract)."""
        return characters.rows_to_ids(sentences, self.token_row, self.config.id_width, max_length)


def _text(token):
    if isinstance(token, str):
        return token
    if isinstance(token, bytes):
        try:
            return token.decode("utf-8")  # pragma: no mutate, equivalent: UTF-8 is utf-8
        except UnicodeDecodeError as e:
            raise ValueError(
                f"a token must be UTF-8 text, got {checks.shown(token, 30)} (byte {e.start})"
            ) from None
    raise TypeError(f"a token must be str or bytes, got {type(token).__name__}: {token!r}")
