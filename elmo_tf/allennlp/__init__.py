"""AllenNLP's ELMo interface for PyTorch code: ``from elmo_tf.allennlp import Elmo, batch_to_ids``
in place of ``from allennlp.modules.elmo import Elmo, batch_to_ids``.

It runs on Keras's PyTorch backend: set ``KERAS_BACKEND=torch`` before Keras or elmo_tf is
imported. ``Elmo`` is a ``torch.nn.Module`` with AllenNLP's arguments, outputs and checkpoint
layout (``elmo_tf.allennlp.elmo``); docs/migration.md says what differs.
"""

from elmo_tf import backend

if backend.name() != "torch":
    raise backend.BackendError(
        "elmo_tf.allennlp is PyTorch code: this process runs Keras on "
        f"{backend.name()}; set KERAS_BACKEND=torch before importing keras or elmo_tf"
    )

from elmo_tf.allennlp.character_ids import batch_to_ids  # noqa: E402
from elmo_tf.allennlp.elmo import Elmo  # noqa: E402

__all__ = ["Elmo", "batch_to_ids"]
