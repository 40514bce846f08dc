"""bilm-tf's character ids in the graph (``characters.tokens_to_char_ids``, what a SavedModel's
string signatures run) give the host's (``elmo_tf.batch_to_ids``) and AllenNLP's golden ids, row
for row, the cut at 48 UTF-8 bytes included."""

import numpy as np
import pytest
import tensorflow as tf

import elmo_tf
from elmo_tf.tokens import characters


def _graph_ids(sentences):
    tokens = tf.ragged.constant(sentences, dtype=tf.string, ragged_rank=1)
    mask = tf.sequence_mask(tokens.row_lengths())
    ids = characters.tokens_to_char_ids(tokens.to_tensor(""))
    return (ids * tf.cast(mask, tf.int32)[:, :, None]).numpy()


def test_host_and_graph_ids_equal_golden(golden):
    meta, arrays = golden
    for batch, names in meta["batches"].items():
        sentences = [meta["sentences"][n] for n in names]
        expected = arrays[f"{batch}__char_ids"]
        np.testing.assert_array_equal(elmo_tf.batch_to_ids(sentences), expected, err_msg=batch)
        np.testing.assert_array_equal(_graph_ids(sentences), expected, err_msg=batch)


@pytest.mark.parametrize("length", [47, 48, 49, 60])
def test_the_graph_cuts_a_token_as_the_host_does(length):
    token = "é" * length  # 2 bytes each: the cut falls inside a character
    np.testing.assert_array_equal(_graph_ids([[token]])[0, 0], characters.token_to_ids(token))
