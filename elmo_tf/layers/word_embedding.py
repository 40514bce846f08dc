"""WordEmbedding: a lookup table of word vectors (ELMoForManyLangs' word branch)."""

import keras

from elmo_tf.layers.char_embedding import CharEmbedding


@keras.saving.register_keras_serializable(package="elmo_tf")
class WordEmbedding(CharEmbedding):
    """Maps word ids to dense vectors: ``CharEmbedding``'s lookup over a word vocabulary.

    Row 0 (a padded position) is never read for a real token; the weight file does not store
    it. ELMoForManyLangs' ``<pad>`` row is an ordinary trained-as-initialised row.

    Args:
        embedding_dim: size W of a word vector.
        num_words: number of ids, 0 included.

    Call arguments:
        word_ids: int tensor ``(...)`` of ids ``0..num_words-1``.

    Returns:
        float tensor ``(..., W)``.

    Example:
    >>> layer = WordEmbedding(embedding_dim=3, num_words=10)
    >>> layer(np.ones([2], "int32")).shape
    TensorShape([2, 3])
    """

    def __init__(self, embedding_dim, num_words, **kwargs):
        kwargs.pop("num_characters", None)  # CharEmbedding's name of it, in a saved config
        super().__init__(embedding_dim, num_characters=num_words, **kwargs)
        self.num_words = num_words

    def get_config(self):
        config = super().get_config()
        config["num_words"] = config.pop("num_characters")
        return config
