"""CharEmbedding: a lookup table of character vectors."""

import keras

from elmo_tf.layers.finite_weights import FiniteWeights
from elmo_tf.tokens import characters


@keras.saving.register_keras_serializable(package="elmo_tf")
class CharEmbedding(FiniteWeights, keras.layers.Layer):
    """Maps character ids to dense vectors.

    The table has one row per id ``0..num_characters-1``. Row 0 (a padded token position) is
    never read for a real token; the official files do not store it (see ``weights``).

    Args:
        embedding_dim: size E of a character vector.
        num_characters: number of ids, 262 for every published model.

    Call arguments:
        char_ids: int tensor ``(..., 50)`` of ids ``0..num_characters-1``; any other id is
            an error (on a CPU; a GPU lookup out of range reads zeros).

    Returns:
        float tensor ``(..., 50, E)``.

    Example:
    >>> layer = CharEmbedding(embedding_dim=4)
    >>> layer(np.ones([2, 50], "int32")).shape
    TensorShape([2, 50, 4])
    """

    def __init__(self, embedding_dim, num_characters=characters.NUM_CHAR_IDS, **kwargs):
        super().__init__(**kwargs)
        self.embedding_dim = embedding_dim
        self.num_characters = num_characters

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.num_characters, self.embedding_dim),
            initializer=keras.initializers.RandomUniform(-1.0, 1.0),
        )

    def call(self, char_ids):
        ids = keras.ops.cast(char_ids, "int32")
        # keras.ops.take counts a negative id from the table's end (NumPy's rule): such an id
        # is made one past the table instead, which the lookup refuses (TensorFlow on a CPU
        # raises) as it refuses any other id out of range.
        ids = keras.ops.where(ids < 0, self.num_characters, ids)
        return keras.ops.take(self.embeddings, ids, axis=0)

    def get_config(self):
        config = super().get_config()
        config.update(embedding_dim=self.embedding_dim, num_characters=self.num_characters)
        return config
