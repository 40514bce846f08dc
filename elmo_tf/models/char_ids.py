"""The check of character ids handed to a model directly (``model(char_ids)``,
``ElmoLayer(inputs="char_ids")``), on every backend.

The ids are checked as the caller gave them, before anything converts them: Keras turns a
NumPy array into the backend's tensor before ``call``, and JAX (without 64-bit mode) makes
int64 int32 there, so an id of ``2**32 + 73`` would arrive as 73 and ``2**40`` as padding.
A list of lists is an array of ids like any other; text, a ragged list or another shape is
refused by name. In a traced graph (a SavedModel, ``tf.function``) only the static shape is
known; the lookup refuses a bad id there.
"""

import numpy as np

_MAKES_THEM = "(elmo_tf.batch_to_ids makes them)"


def host_char_ids(inputs):
    """``inputs`` as a NumPy array when the caller gave host values (a NumPy array, a nested
    list or tuple), else ``inputs`` unchanged (a tensor, symbolic or not)."""
    if isinstance(inputs, (list, tuple)):
        try:
            return np.asarray(inputs)
        except ValueError:  # ragged: NumPy cannot make one array of it
            raise ValueError(
                f"char_ids must be one array of shape (batch, tokens, 50) {_MAKES_THEM}, got a "
                "ragged nested list"
            ) from None
    return inputs


def is_host_array(inputs):
    return isinstance(inputs, np.ndarray | np.generic)


def check_char_ids_shape(shape, config):
    """ValueError unless ``shape`` (where known) is ``(batch, tokens, characters per token)``."""
    try:
        rank = len(shape)
    except (TypeError, ValueError):  # no shape, or a tensor of unknown rank
        return
    width = config.id_width
    if rank != 3 or shape[-1] not in (None, width):
        raise ValueError(
            f"char_ids must have the shape (batch, tokens, {width}) {_makes_them(config)}, got "
            f"shape {tuple(shape)}"
        )


def _makes_them(config):
    if config.uses_codepoints:  # the model's own table: ELMo.batch_to_ids
        return "(the model's batch_to_ids makes them)"
    return _MAKES_THEM


def check_char_ids(char_ids, config):
    """ValueError for a shape other than ``(B, T, 50)``, values that are not whole numbers,
    or a character id outside ``0..n_characters - 1``, checked in the values' own dtype (an
    int64 or uint64 id is compared as it is, never narrowed first)."""
    ids = np.asarray(char_ids)
    check_char_ids_shape(ids.shape, config)
    if not (np.issubdtype(ids.dtype, np.integer) or np.issubdtype(ids.dtype, np.floating)):
        raise ValueError(f"char_ids must be integer character ids {_MAKES_THEM}, got {ids.dtype}")
    if ids.size == 0:
        return
    if np.issubdtype(ids.dtype, np.floating):
        whole = np.isfinite(ids) & (ids == np.rint(ids))
        if not np.all(whole):
            raise ValueError(
                f"char_ids must be whole numbers (character ids) {_MAKES_THEM}, got "
                f"{_shown(ids[~whole].flat[0])}"
            )
    chars = ids[..., : config.max_characters_per_token]
    low, high = chars.min(), chars.max()
    if low < 0 or high >= config.n_characters:
        raise ValueError(
            f"char_ids must be character ids from 0 to {config.n_characters - 1} "
            f"{_makes_them(config)}, got {_shown(low if low < 0 else high)}"
        )
    if config.word_embedding_dim:  # the last column holds each token's word id
        words = ids[..., -1]
        low, high = words.min(), words.max()
        if low < 0 or high >= config.n_words:
            raise ValueError(
                f"char_ids' last column must hold word ids from 0 to {config.n_words - 1} "
                f"{_makes_them(config)}, got {_shown(low if low < 0 else high)}"
            )


def _shown(value):
    """An id as its caller wrote it: an integer in full (4294967369, not 4.29497e+09), a
    whole float as that integer, any other float as Python prints it."""
    if isinstance(value, np.integer):
        return str(int(value))
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)
