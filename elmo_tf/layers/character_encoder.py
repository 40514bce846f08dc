"""CharacterEncoder: context-free token embeddings from character ids."""

import keras

from elmo_tf.layers.char_cnn import CharCNN
from elmo_tf.layers.char_embedding import CharEmbedding
from elmo_tf.layers.finite_weights import FiniteDense
from elmo_tf.layers.highway import Highway
from elmo_tf.layers.word_embedding import WordEmbedding
from elmo_tf.tokens import characters


@keras.saving.register_keras_serializable(package="elmo_tf")
class CharacterEncoder(keras.layers.Layer):
    """Character embedding -> CNN filter bank -> highway layers -> linear projection.

    With a word embedding (ELMoForManyLangs' word branch), the projection reads
    ``concat([word vector, highway output])``, the word first, as EFML's
    ``ConvTokenEmbedder`` concatenates them.

    Args:
        filters: ``((width, num_filters), ...)`` of the CNN.
        char_embedding_dim: size E of a character vector.
        n_highway: number of highway layers.
        projection_dim: output size P. When it equals the CNN width F there is no projection,
            as in bilm-tf.
        activation: CNN activation, ``"relu"`` or ``"tanh"``.
        num_characters: size of the character vocabulary (262).
        word_embedding_dim: width W of the word embedding (0: none).
        num_words: word ids, 0 included (0 without a word embedding).

    Call arguments:
        char_ids: int tensor ``(N, 50)``, one token per row; with a word embedding
            ``(N, 51)``, the word id in the last column.

    Returns:
        float tensor ``(N, P)``.
    """

    def __init__(
        self,
        filters,
        char_embedding_dim,
        n_highway,
        projection_dim,
        activation="relu",
        num_characters=characters.NUM_CHAR_IDS,
        word_embedding_dim=0,
        num_words=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.filters = tuple(tuple(int(v) for v in f) for f in filters)
        self.char_embedding_dim = char_embedding_dim
        self.n_highway = n_highway
        self.projection_dim = projection_dim
        self.activation = activation
        self.num_characters = num_characters
        self.word_embedding_dim = word_embedding_dim
        self.num_words = num_words
        self.n_filters = sum(n for _, n in self.filters)

        # Sublayers share this layer's dtype policy: Keras gives a sublayer the global policy
        # otherwise, and a float32 sublayer inside a mixed-precision encoder would cast back.
        self.char_embedding = CharEmbedding(
            char_embedding_dim,
            num_characters=num_characters,
            dtype=self.dtype_policy,
            name="char_embedding",
        )
        self.cnn = CharCNN(
            self.filters, activation=activation, dtype=self.dtype_policy, name="char_cnn"
        )
        self.highways = [
            Highway(dtype=self.dtype_policy, name=f"highway_{k}") for k in range(n_highway)
        ]
        self.word_embedding = None
        if word_embedding_dim:
            self.word_embedding = WordEmbedding(
                word_embedding_dim, num_words, dtype=self.dtype_policy, name="word_embedding"
            )
        self.projection = None
        if word_embedding_dim or self.n_filters != projection_dim:
            self.projection = FiniteDense(
                projection_dim, dtype=self.dtype_policy, name="projection"
            )

    def build(self, input_shape):
        n_chars = input_shape[-1] - (1 if self.word_embedding is not None else 0)
        self.char_embedding.build((*input_shape[:-1], n_chars))
        self.cnn.build((None, n_chars, self.char_embedding_dim))
        for highway in self.highways:
            highway.build((None, self.n_filters))
        if self.word_embedding is not None:
            self.word_embedding.build((None,))
        if self.projection is not None:
            self.projection.build((None, self.word_embedding_dim + self.n_filters))

    def call(self, char_ids):
        chars = char_ids if self.word_embedding is None else char_ids[:, :-1]
        x = self.cnn(self.char_embedding(chars))  # (N, F)
        for highway in self.highways:
            x = highway(x)
        if self.word_embedding is not None:  # (N, W + F): the word first, as in EFML
            x = keras.ops.concatenate([self.word_embedding(char_ids[:, -1]), x], axis=-1)
        if self.projection is not None:
            x = self.projection(x)
        return x

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.projection_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            filters=[list(f) for f in self.filters],
            char_embedding_dim=self.char_embedding_dim,
            n_highway=self.n_highway,
            projection_dim=self.projection_dim,
            activation=self.activation,
            num_characters=self.num_characters,
            word_embedding_dim=self.word_embedding_dim,
            num_words=self.num_words,
        )
        return config
