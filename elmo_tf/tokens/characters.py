"""Mapping from string tokens to ELMo character ids.

ELMo reads every token as a fixed-width row of 50 character ids (Peters et al. 2018; the ids
are those of bilm-tf's ``UnicodeCharsVocabulary`` and AllenNLP's ``ELMoCharacterMapper``,
shifted by +1 so that 0 can mean "padded token position"):

=====================  =====================================================
id                     meaning
=====================  =====================================================
0                      the whole token position is padding
b + 1                  UTF-8 byte ``b`` (0..255) of the token
257 / 258              the begin / end-of-sentence "characters" of ``<S>`` / ``</S>``
259 / 260              begin-of-word / end-of-word
261                    padding inside a token
=====================  =====================================================

A token is ``[259, bytes[:48] + 1 ..., 260, 261, ...]``; truncation is by bytes, so it can cut
a multi-byte character, exactly as the reference implementations do. The literal tokens
``<S>`` and ``</S>`` map to the sentence-boundary rows, as in both references.

Sentences are split into tokens on :data:`WHITESPACE`, by :func:`split_tokens` on the host and
by :func:`whitespace_to_space` plus ``tf.strings.split`` in the graph, so ``elmo-tf embed`` and
the served ``default`` signature see the same tokens.

Two equivalent implementations live here: :func:`batch_to_ids` on the host (numpy) and
:func:`tokens_to_char_ids` in the graph (core TensorFlow ops only, so stock TF Serving can run
an exported model that uses it).
"""

import numpy as np

MAX_CHARS_PER_TOKEN = 50
MAX_TOKEN_BYTES = MAX_CHARS_PER_TOKEN - 2  # room for begin- and end-of-word

# The characters Python's str.split() and str.isspace() treat as whitespace (Unicode White_Space
# plus the ASCII separators U+001C..U+001F), so sentence.split() and the graph agree. No-break
# spaces (U+00A0, U+202F) are separators here, as they are for str.split().
WHITESPACE = (
    "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

PADDED_TOKEN = 0
BOS_CHAR = 257
EOS_CHAR = 258
BEGIN_OF_WORD = 259
END_OF_WORD = 260
PADDING_CHAR = 261
NUM_CHAR_IDS = 262  # ids 0..261

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary_row(char):
    row = np.full([MAX_CHARS_PER_TOKEN], PADDING_CHAR, dtype=np.int32)
    row[:3] = [BEGIN_OF_WORD, char, END_OF_WORD]
    return row


BOS_CHAR_IDS = _boundary_row(BOS_CHAR)
EOS_CHAR_IDS = _boundary_row(EOS_CHAR)


def token_to_ids(token):
    """Returns the (50,) int32 character ids of one token (a ``str`` or UTF-8 ``bytes``)."""
    if isinstance(token, str):
        if token == BOS_TOKEN:
            return BOS_CHAR_IDS.copy()
        if token == EOS_TOKEN:
            return EOS_CHAR_IDS.copy()
        try:
            token = token.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate: no UTF-8 bytes to map
            raise ValueError(
                f"a token must be Unicode text, got {token[:30]!r}, which holds a lone "
                f"surrogate U+{ord(token[e.start]):04X} at character {e.start + 1} (what "
                "text decoded with errors='surrogateescape' holds for an undecodable byte)"
            ) from None
    elif isinstance(token, bytes):
        if token == BOS_TOKEN.encode():
            return BOS_CHAR_IDS.copy()
        if token == EOS_TOKEN.encode():
            return EOS_CHAR_IDS.copy()
    else:
        raise TypeError(f"a token must be str or bytes, got {type(token).__name__}: {token!r}")
    token = token[:MAX_TOKEN_BYTES]
    row = np.full([MAX_CHARS_PER_TOKEN], PADDING_CHAR, dtype=np.int32)
    row[0] = BEGIN_OF_WORD
    row[1 : len(token) + 1] = np.frombuffer(token, dtype=np.uint8).astype(np.int32) + 1
    row[len(token) + 1] = END_OF_WORD
    return row


def batch_to_ids(sentences, max_length=None):
    """Maps a batch of tokenised sentences to character ids on the host.

    Args:
        sentences: a sequence of sentences, each a sequence of ``str`` (or UTF-8 ``bytes``)
            tokens. Empty sentences are allowed.
        max_length: pad to this many tokens instead of the longest sentence's length.

    Returns:
        An int32 array of shape ``(batch, max_tokens, 50)``, zero at padded token positions.
        No ``<S>``/``</S>`` rows are added: the model frames each sentence itself.
    """
    return rows_to_ids(sentences, token_to_ids, MAX_CHARS_PER_TOKEN, max_length)


def rows_to_ids(sentences, token_row, width, max_length=None):
    """``(B, T, width)`` int32 ids of tokenised sentences, ``token_row(token)`` for each
    distinct token (once per call), zero at padded positions: ``batch_to_ids`` with another
    mapping (a code-point model's, ``elmo_tf.tokens.codepoints``)."""
    sentences = token_lists(sentences)
    longest = max((len(s) for s in sentences), default=0)
    if max_length is None:
        max_length = longest
    elif max_length < longest:
        raise ValueError(
            f"max_length={max_length} is shorter than the longest sentence ({longest})"
        )
    ids = np.zeros([len(sentences), max_length, width], dtype=np.int32)
    cache = {}
    for i, sentence in enumerate(sentences):
        for j, token in enumerate(sentence):
            row = cache.get(token)
            if row is None:
                row = cache[token] = token_row(token)
            ids[i, j] = row
    return ids


def split_tokens(sentence):
    """The tokens of a ``str`` sentence: split on runs of :data:`WHITESPACE`, none empty.

    This is ``sentence.split()``; the served ``default`` signature splits the same way
    (:func:`whitespace_to_space`). No-break space (U+00A0) and ideographic space (U+3000)
    separate tokens.
    """
    return sentence.split()


def whitespace_to_space(sentences):
    """Maps every :data:`WHITESPACE` character of a UTF-8 string tensor to an ASCII space, in
    the graph (core op ``StaticRegexReplace``), so that ``tf.strings.split``, which splits on
    ASCII whitespace only, splits like :func:`split_tokens`."""
    # lazy: the host-side mapping runs without TensorFlow (the command line imports it)
    import tensorflow as tf

    others = "".join(c for c in WHITESPACE if c not in " \t\n\v\f\r")
    return tf.strings.regex_replace(sentences, f"[{others}]", " ")


def token_lists(sentences):
    """``sentences`` (a list of sentences, each a list of tokens) as lists; a ``TypeError``
    names a whole argument or a sentence that is one string."""
    if isinstance(sentences, (str, bytes)):
        raise TypeError(
            f"sentences is one string ({sentences[:30]!r}); pass a list of sentences, each a "
            "list of tokens, e.g. [text.split()]"
        )
    try:
        rows = list(sentences)
    except TypeError:  # None, a number: nothing to iterate
        raise TypeError(
            f"sentences must be a list of sentences, each a list of tokens, got "
            f"{type(sentences).__name__}"
        ) from None
    return [_as_token_list(s, i) for i, s in enumerate(rows)]


def _as_token_list(sentence, index):
    if isinstance(sentence, (str, bytes)):
        raise TypeError(
            f"sentence {index} is a single string ({sentence[:30]!r}); pass a list of tokens, "
            "e.g. sentence.split()"
        )
    try:
        return list(sentence)
    except TypeError:  # None, a number
        raise TypeError(
            f"sentence {index} must be a list of tokens, got {type(sentence).__name__}"
        ) from None


def tokens_to_char_ids(tokens):
    """Maps string tokens to character ids in the graph, with core TensorFlow ops only.

    Args:
        tokens: a string tensor of any shape ``S``; each element is one token (UTF-8 bytes).

    Returns:
        An int32 tensor of shape ``S + (50,)``. Callers zero the rows of padded positions
        themselves (an empty string is a real, empty token).
    """
    # lazy: the host-side mapping runs without TensorFlow (the command line imports it)
    import tensorflow as tf

    tokens = tf.convert_to_tensor(tokens, dtype=tf.string)
    flat = tf.reshape(tokens, [-1])
    # DecodePaddedRaw truncates and zero-pads every string to 48 bytes in one op.
    raw = tf.io.decode_raw(flat, tf.uint8, fixed_length=MAX_TOKEN_BYTES)  # (N, 48)
    length = tf.minimum(tf.strings.length(flat, unit="BYTE"), MAX_TOKEN_BYTES)[:, None]
    position = tf.range(MAX_TOKEN_BYTES, dtype=tf.int32)[None, :]
    body = tf.where(position < length, tf.cast(raw, tf.int32) + 1, PADDING_CHAR)
    body = tf.where(position == length, END_OF_WORD, body)  # (N, 48)
    n = tf.shape(flat)[0]
    ids = tf.concat(
        [
            tf.fill([n, 1], BEGIN_OF_WORD),
            body,
            # slot 49 holds the end-of-word mark only for a full 48-byte token
            tf.where(length == MAX_TOKEN_BYTES, END_OF_WORD, PADDING_CHAR),
        ],
        axis=1,
    )
    ids = tf.where((flat == BOS_TOKEN)[:, None], tf.constant(BOS_CHAR_IDS)[None, :], ids)
    ids = tf.where((flat == EOS_TOKEN)[:, None], tf.constant(EOS_CHAR_IDS)[None, :], ids)
    return tf.reshape(ids, tf.concat([tf.shape(tokens), [MAX_CHARS_PER_TOKEN]], axis=0))
