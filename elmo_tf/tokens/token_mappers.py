"""The one choice of how a model maps tokens to its id rows, made by its config.

``mapper_for(config, vocabulary)`` is ``Utf8ByteMapper`` for bilm-tf's scheme (UTF-8 bytes,
``elmo_tf.tokens.characters``, the same for every model) and ``codepoints.CodepointMapper`` for
ELMoForManyLangs' (the model's own code-point table and word vocabulary). Both give
``token_row(token)``, ``batch_to_ids(sentences)`` and the sentence markers' ``bos_row`` /
``eos_row``; ``ELMo.token_mapper`` is the model's, and everything that maps tokens for a model
(``ELMo.embed``, ``ELMo.batch_to_ids``) goes through it. ``save_tables`` and ``load_tables``
carry a code-point model's tables in a ``.keras`` file.
"""

import os

import numpy as np

from elmo_tf.tokens import characters, codepoints

# A code-point model's token tables in a .keras file (``save_tables``, ``ELMo.save_assets``).
TABLES_ASSET = "vocabulary.npz"


class Utf8ByteMapper:
    """bilm-tf's mapping (``elmo_tf.tokens.characters``): one for every model of that scheme."""

    bos_row = characters.BOS_CHAR_IDS
    eos_row = characters.EOS_CHAR_IDS

    @staticmethod
    def token_row(token):
        return characters.token_to_ids(token)

    @staticmethod
    def batch_to_ids(sentences, max_length=None):
        return characters.batch_to_ids(sentences, max_length)


def mapper_for(config, vocabulary=None):
    """The mapper of ``config``'s character scheme (``vocabulary``: a code-point model's
    ``CodepointVocabulary``, from its weight file)."""
    if config.uses_codepoints:
        return codepoints.CodepointMapper(config, vocabulary)
    return Utf8ByteMapper()


def save_tables(mapper, directory):
    """Writes a code-point mapper's tables into ``directory`` (Keras's assets of a ``.keras``
    file), as the weight file's ``vocabulary/*`` datasets; nothing for bilm-tf's mapper."""
    vocabulary = getattr(mapper, "vocabulary", None)
    if vocabulary is not None:
        arrays = {name.rsplit("/", 1)[-1]: a for name, a in vocabulary.arrays().items()}
        np.savez(os.path.join(directory, TABLES_ASSET), **arrays)


def load_tables(config, directory, mapper):
    """The mapper of ``config`` with the tables ``save_tables`` wrote into ``directory``,
    checked as a weight file's are; ``mapper`` where there are none (bilm-tf's scheme)."""
    path = os.path.join(directory, TABLES_ASSET)
    if not config.uses_codepoints or not os.path.isfile(path):
        return mapper
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name.rsplit("/", 1)[-1]] for name in codepoints.DATASETS}
    return mapper_for(config, codepoints.CodepointVocabulary.from_arrays(config, arrays, path))
