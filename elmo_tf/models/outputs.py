"""What an ELMo returns: its output keys, in order, and its explicit LSTM state.

Every surface returns these outputs (T = the longest sentence, P the
projection size, L the model's number of LSTM layers, ``lstm.n_layers`` in its options.json;
``elmo_tf.models.output_keys(L)`` lists the keys in this order):

==================  ==========================  ============================================
output              shape, dtype                meaning
==================  ==========================  ============================================
``word_emb``        ``[batch, T, P]`` float32   context-free character-CNN token vectors
``lstm_outputs1``   ``[batch, T, 2P]`` float32  biLSTM layer 1 (forward ; backward)
...                 ...                         ...
``lstm_outputsL``   ``[batch, T, 2P]`` float32  biLSTM layer L, the top one (two in the
                                                published models: ``lstm_outputs2``)
``elmo``            ``[batch, T, 2P]`` float32  the learned ScalarMix of the L + 1 layers
                                                (``word_emb`` duplicated to 2P, then each
                                                biLSTM layer)
``default``         ``[batch, 2P]`` float32     mean of ``elmo`` over each sentence's tokens
``sequence_len``    ``[batch]`` int32           tokens per sentence
==================  ==========================  ============================================

This table is the one statement of the outputs: ``ELMo.call``/``ELMo.embed``, the SavedModel's
signatures (``elmo_tf.export.saved_model_module``), ``elmo_tf.ElmoLayer`` and the TFLite export
(``elmo_tf.export.tflite``) return the same keys with the same meaning. Padded positions are
zero. A model with ``num_output_representations`` R > 1 also returns ``elmo_1`` ..
``elmo_{R-1}``, shaped like ``elmo``.
"""

import typing

from elmo_tf import checks


def output_keys(n_lstm_layers, num_output_representations=1):
    """The output keys of an ELMo with ``n_lstm_layers`` LSTM layers, in order.

    ``word_emb``, ``lstm_outputs1`` .. ``lstm_outputs{n_lstm_layers}``, ``elmo`` (then
    ``elmo_1`` .. ``elmo_{R-1}`` for ``num_output_representations`` R > 1), ``default``,
    ``sequence_len``. With the default R = 1 these are the outputs of every exported surface
    (SavedModel signatures, ``ElmoLayer``, TFLite); their shapes and meaning are tabled above.

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


def output_shapes(config, batch_size=None, length=None, num_output_representations=1):
    """``{key: shape}`` of the outputs of a model of ``config`` (an ``ElmoConfig``), in key
    order; ``batch_size`` and ``length`` (T) fill the batch and position axes (``None`` or an
    axis name: unknown)."""
    keys = output_keys(config.n_lstm_layers, num_output_representations)
    shapes = {key: (batch_size, length, config.output_dim) for key in keys}
    shapes.update(
        word_emb=(batch_size, length, config.projection_dim),
        default=(batch_size, config.output_dim),
        sequence_len=(batch_size,),
    )
    return shapes


class LSTMState(typing.NamedTuple):
    """Per-row LSTM state of both directions of every layer.

    ``cell``: ``(B, n_layers, 2, D)``; ``hidden``: ``(B, n_layers, 2, P)``; axis 2 is
    (forward, backward).
    """

    cell: typing.Any
    hidden: typing.Any
