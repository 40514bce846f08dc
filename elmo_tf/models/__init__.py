"""Models that compose the ELMo layers."""

from elmo_tf.models.elmo import ELMo, LSTMState, output_keys

__all__ = ["ELMo", "LSTMState", "output_keys"]
