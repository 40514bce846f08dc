"""What a Beam model handler yields per sentence, whatever runs the model: ``split_rows`` cuts a
batch's padded outputs into one prediction per sentence, as ``elmo-tf embed`` writes them
(``layers``: ``None`` for the dict of outputs, or ``"all"``, ``"top"``, ``"average"``), and
``in_sentence_order`` puts them back in the order of the sentences the handler was given."""

import numpy as np

from elmo_tf.formats.embedding_file import LAYER_CHOICES, layer_stack, select_layers


def check_layers(layers):
    if layers is not None and layers not in LAYER_CHOICES:
        raise ValueError(f"layers must be None or one of {LAYER_CHOICES}, got {layers!r}")


def split_rows(outputs, n_lstm_layers, layers):
    """One prediction per row of a batch's padded outputs, trimmed to the row's length.

    ``layers=None`` gives dicts of every output; otherwise the arrays ``elmo-tf embed``
    writes (the same ``layer_stack`` and ``select_layers`` calls on the same slices). Each
    array is a copy, so a prediction does not keep its whole batch alive.
    """
    lengths = outputs["sequence_len"]
    if layers is not None:
        stack = layer_stack(outputs, n_lstm_layers)  # (L + 1, B, T, 2P)
        for row, n in enumerate(lengths):
            vectors = select_layers(stack[:, row, :n], layers)
            yield np.array(vectors, dtype=np.float32, copy=True)
        return
    for row, n in enumerate(lengths):
        yield {
            key: (
                int(n)
                if key == "sequence_len"
                else np.array(value[row] if value.ndim == 2 else value[row, :n], copy=True)
            )
            for key, value in outputs.items()
            if key != "state"
        }


def in_sentence_order(count, batches, n_lstm_layers, layers):
    """The predictions of ``count`` sentences in their order, from ``batches``: pairs of the
    sentences' indices and their padded outputs, as ``embed_batches`` yields them (sorted by
    length, not in the sentences' order)."""
    predictions = [None] * count
    for indices, outputs in batches:
        for index, prediction in zip(indices, split_rows(outputs, n_lstm_layers, layers)):
            predictions[index] = prediction
    return predictions


def batch_bytes(batch):
    """A batch of token lists' size as Beam's ``get_num_bytes`` reports it: its UTF-8 bytes."""
    return sum(len(token.encode("utf-8")) for tokens in batch for token in tokens)
