"""batch_to_ids: AllenNLP's character ids, as the int64 tensor its ``batch_to_ids`` returns."""

import torch

from elmo_tf.tokens import characters


def batch_to_ids(batch):
    """Character ids ``(len(batch), longest sentence, 50)`` of tokenised sentences, int64,
    zero at padded positions: AllenNLP's ``allennlp.modules.elmo.batch_to_ids``.

    (A batch whose sentences are all empty gives ``(len(batch), 0, 50)``, where AllenNLP's
    gives a two-axis ``(len(batch), 0)``.)
    """
    return torch.from_numpy(characters.batch_to_ids(batch).astype("int64"))
