"""``CodepointIds``: a code-point model's token mapping (``elmo_tf.tokens.codepoints``) in the
graph.

The SavedModel's string signatures of a model converted from ELMoForManyLangs map tokens as
``codepoints.CodepointMapper`` does on the host, row for row: the token decoded from UTF-8
(invalid UTF-8 fails the request, as the host refuses it), cut to its first 48 code points,
each looked up in the model's character table (``<oov>``'s id where it has none), framed by
EFML's swapped word marks and padded with ``<pad>``; the word id of the cut token (exact
match, ``<oov>``'s where the vocabulary lacks it); the tokens ``<bos>`` and ``<eos>`` as the
sentence markers. The tables are ``tf.lookup.StaticHashTable``s: core ops
(``HashTableV2``, ``LookupTableFindV2``, initialised when the SavedModel loads), which stock TF
Serving runs.
"""

from elmo_tf import backend

backend.require_tensorflow("the code-point mapping of the SavedModel")  # one line, first

import numpy as np
import tensorflow as tf

from elmo_tf.tokens import codepoints


class CodepointIds(tf.__internal__.tracking.AutoTrackable):
    """Token strings ``[batch, T]`` to id rows ``[batch, T, config.id_width]`` (int32).

    Args:
        mapper: the model's ``codepoints.CodepointMapper``, its vocabulary loaded.
    """

    def __init__(self, mapper):
        config, vocabulary = mapper.config, mapper.vocabulary
        if vocabulary is None:
            raise ValueError(
                "this code-point model has no character table yet: load its weights "
                "(ELMo.from_preset, elmo_tf.load_weights), which hold it"
            )
        specials = dict(zip(codepoints.CHAR_SPECIALS, config.special_characters))
        self._oov, self._pad = specials["oov"], specials["pad"]
        self._eow, self._bow = specials["eow"], specials["bow"]
        self._width = config.max_characters_per_token
        chars = vocabulary.char_table()
        self.char_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(np.array(list(chars), np.int64), tf.int64),
                tf.constant(np.array(list(chars.values()), np.int32), tf.int32),
            ),
            default_value=self._oov,
        )
        self.word_table = None
        if config.word_embedding_dim:
            words = vocabulary.word_table()
            word_oov = dict(zip(codepoints.WORD_SPECIALS, config.special_words))["oov"]
            self.word_table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(list(words), tf.string),
                    tf.constant(np.array(list(words.values()), np.int32), tf.int32),
                ),
                default_value=word_oov,
            )
        self._bos = tf.constant(mapper.bos_row, tf.int32)
        self._eos = tf.constant(mapper.eos_row, tf.int32)

    def __call__(self, tokens):
        cut = codepoints.MAX_TOKEN_CODEPOINTS
        codes = tf.strings.unicode_decode(tokens, "UTF-8", errors="strict")  # [B, T, (n)]
        dense = codes.to_tensor(default_value=-1)[:, :, :cut]
        dense = tf.pad(dense, [[0, 0], [0, 0], [0, cut - tf.shape(dense)[2]]], constant_values=-1)
        present = dense >= 0
        looked_up = self.char_table.lookup(tf.cast(dense, tf.int64))
        middle = tf.where(present, looked_up, self._pad)  # [B, T, 48]
        shape = tf.shape(middle)
        eow = tf.fill([shape[0], shape[1], 1], self._eow)
        tail = tf.fill([shape[0], shape[1], self._width - cut - 1], self._pad)
        row = tf.concat([eow, middle, tail], axis=-1)  # [B, T, 50]
        n = tf.reduce_sum(tf.cast(present, tf.int32), axis=-1)
        bow_at = tf.range(self._width)[None, None, :] == (n + 1)[:, :, None]
        row = tf.where(bow_at, self._bow, row)
        if self.word_table is not None:
            word = tf.strings.substr(tokens, 0, cut, unit="UTF8_CHAR")  # the cut token
            row = tf.concat([row, self.word_table.lookup(word)[:, :, None]], axis=-1)
        row = tf.where((tokens == "<bos>")[:, :, None], self._bos, row)
        return tf.where((tokens == "<eos>")[:, :, None], self._eos, row)
