"""What an ELMo returns: its output keys, in order, and its explicit LSTM state."""

import typing

from elmo_tf import checks


def output_keys(n_lstm_layers, num_output_representations=1):
    """The output keys of an ELMo with ``n_lstm_layers`` LSTM layers, in order.

    ``word_emb``, ``lstm_outputs1`` .. ``lstm_outputs{n_lstm_layers}``, ``elmo`` (then
    ``elmo_1`` .. ``elmo_{R-1}`` for ``num_output_representations`` R > 1), ``default``,
    ``sequence_len``. With the default R = 1 these are the outputs of every exported surface
    (SavedModel signatures, ``ElmoLayer``, TFLite); their shapes and meaning are tabled in
    ``elmo_tf.export.saved_model_module``.

    >>> output_keys(1)
    ('word_emb', 'lstm_outputs1', 'elmo', 'default', 'sequence_len')
    """
    checks.positive_integer("n_lstm_layers", n_lstm_layers)
    checks.positive_integer("num_output_representations", num_output_representations)
    return (
        "word_emb",
        *(f"lstm_outputs{k}" for k in range(1, n_lstm_layers + 1)),
        "elmo",
        *(f"elmo_{k}" for k in range(1, num_output_representations)),
        "default",
        "sequence_len",
    )


class LSTMState(typing.NamedTuple):
    """Per-row LSTM state of both directions of every layer.

    ``cell``: ``(B, n_layers, 2, D)``; ``hidden``: ``(B, n_layers, 2, P)``; axis 2 is
    (forward, backward).
    """

    cell: typing.Any
    hidden: typing.Any
