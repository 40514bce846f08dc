"""The one choice of how a model maps tokens to its id rows, made by its config.

``mapper_for(config, vocabulary)`` is ``Utf8ByteMapper`` for bilm-tf's scheme (UTF-8 bytes,
``elmo_tf.characters``, the same for every model) and ``codepoints.CodepointMapper`` for
ELMoForManyLangs' (the model's own code-point table and word vocabulary). Both give
``token_row(token)``, ``batch_to_ids(sentences)`` and the sentence markers' ``bos_row`` /
``eos_row``; ``ELMo.token_mapper`` is the model's, and everything that maps tokens for a model
(``ELMo.embed``, ``ELMo.batch_to_ids``) goes through it.
"""

from elmo_tf import characters, codepoints


class Utf8ByteMapper:
    """bilm-tf's mapping (``elmo_tf.characters``): one for every model of that scheme."""

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
