"""A code-point model's token mapping in the graph (``elmo_tf.export.codepoint_ids``) gives
the host mapper's rows (``elmo_tf.tokens.codepoints.CodepointMapper``) for every kind of token: in
and out of the tables, over 48 code points, empty, the sentence markers, four-byte UTF-8."""

import numpy as np
import pytest
import tensorflow as tf
from support.foreign_models import EFML_TINY, efml_golden

from elmo_tf.models import ELMo


@pytest.fixture(scope="module")
def mapper():
    return ELMo.from_preset(str(EFML_TINY)).token_mapper


def _rows(mapper, sentences):
    from elmo_tf.export.codepoint_ids import CodepointIds

    width = max(len(s) for s in sentences)
    tokens = tf.constant([s + [""] * (width - len(s)) for s in sentences])
    return CodepointIds(mapper)(tokens).numpy()


def test_the_graph_maps_every_token_as_the_host_does(mapper):
    sentences, _ = efml_golden()
    edge = ["", "<bos>", "<eos>", "<pad>", "é" * 47, "é" * 48, "é" * 49, "中" * 60, "😀x",
            "a b", "\u3000"]  # fmt: skip
    sentences = [*sentences, edge]
    graph = _rows(mapper, sentences)
    for i, sentence in enumerate(sentences):
        host = mapper.batch_to_ids([sentence])[0]
        np.testing.assert_array_equal(graph[i, : len(sentence)], host, err_msg=str(sentence))


def test_invalid_utf8_fails_the_call(mapper):
    from elmo_tf.export.codepoint_ids import CodepointIds

    with pytest.raises(tf.errors.InvalidArgumentError):
        CodepointIds(mapper)(tf.constant([[b"\xff"]]))
