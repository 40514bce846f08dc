"""The output keys follow the number of LSTM layers."""

import pytest

from elmo_tf.models import output_keys


def test_output_keys_follow_the_layer_count():
    assert output_keys(1) == ("word_emb", "lstm_outputs1", "elmo", "default", "sequence_len")
    assert output_keys(2) == (
        "word_emb",
        "lstm_outputs1",
        "lstm_outputs2",
        "elmo",
        "default",
        "sequence_len",
    )
    assert output_keys(3, num_output_representations=2) == (
        "word_emb",
        "lstm_outputs1",
        "lstm_outputs2",
        "lstm_outputs3",
        "elmo",
        "elmo_1",
        "default",
        "sequence_len",
    )
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="n_lstm_layers must be a positive integer"):
            output_keys(bad)
