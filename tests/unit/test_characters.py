"""bilm-tf's character ids on the host (``elmo_tf.batch_to_ids``): the token layout, the cut at
48 UTF-8 bytes, padding, bad input named. The graph's mapping against the host's and AllenNLP's
golden ids: tests/model/test_character_graph.py."""

import numpy as np
import pytest

import elmo_tf
from elmo_tf.tokens import characters


def test_token_layout():
    ids = characters.token_to_ids("ab")
    assert ids.tolist()[:5] == [259, ord("a") + 1, ord("b") + 1, 260, 261]
    assert ids.shape == (50,)
    assert characters.token_to_ids("<S>").tolist()[:4] == [259, 257, 260, 261]
    assert characters.token_to_ids("</S>").tolist()[:4] == [259, 258, 260, 261]
    assert characters.token_to_ids("").tolist()[:3] == [259, 260, 261]


@pytest.mark.parametrize("length", [47, 48, 49, 60])
def test_truncation_by_bytes(length):
    token = "é" * length  # 2 bytes each: truncation cuts inside a character
    encoded = token.encode()[:48]
    ids = characters.token_to_ids(token)
    assert ids[1 : len(encoded) + 1].tolist() == [b + 1 for b in encoded]
    assert ids[len(encoded) + 1] == 260


def test_bytes_tokens_equal_str_tokens():
    np.testing.assert_array_equal(
        elmo_tf.batch_to_ids([["Zürich", "<S>"]]),
        elmo_tf.batch_to_ids([["Zürich".encode(), b"<S>"]]),
    )


def test_padding_and_empty():
    ids = elmo_tf.batch_to_ids([["a"], [], ["b", "c"]])
    assert ids.shape == (3, 2, 50)
    assert not ids[1].any() and not ids[0, 1].any()
    assert elmo_tf.batch_to_ids([]).shape == (0, 0, 50)
    assert elmo_tf.batch_to_ids([["a"]], max_length=4).shape == (1, 4, 50)


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="list of tokens"):
        elmo_tf.batch_to_ids(["a sentence as one string"])
    with pytest.raises(
        TypeError, match=r"sentences is one string \(.not a batch.\); pass a list of sentences"
    ):
        elmo_tf.batch_to_ids("not a batch")
    with pytest.raises(TypeError, match="token must be str or bytes"):
        elmo_tf.batch_to_ids([["ok", 3]])
    with pytest.raises(ValueError, match="max_length=1"):
        elmo_tf.batch_to_ids([["a", "b"]], max_length=1)
