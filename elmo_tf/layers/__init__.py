"""Keras layers of the ELMo model, one per file."""

from elmo_tf.layers.bidirectional_lstm_stack import BidirectionalLSTMStack
from elmo_tf.layers.char_cnn import CharCNN
from elmo_tf.layers.char_embedding import CharEmbedding
from elmo_tf.layers.character_encoder import CharacterEncoder
from elmo_tf.layers.highway import Highway
from elmo_tf.layers.lstm_cell_with_projection import LSTMCellWithProjection
from elmo_tf.layers.scalar_mix import ScalarMix
from elmo_tf.layers.word_embedding import WordEmbedding

__all__ = [
    "BidirectionalLSTMStack",
    "CharCNN",
    "CharEmbedding",
    "CharacterEncoder",
    "Highway",
    "LSTMCellWithProjection",
    "ScalarMix",
    "WordEmbedding",
]
