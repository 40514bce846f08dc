"""What a batching of sentences must keep."""

import numpy as np


def check_batches(batches, lengths, batch_size, max_batch_tokens):
    """Every sentence once, longest first; each batch within both limits."""
    lengths = np.asarray(lengths)
    assert sorted(np.concatenate([[], *batches]).astype(int).tolist()) == list(range(len(lengths)))
    for before, after in zip(batches, batches[1:]):
        assert lengths[before].min() >= lengths[after].max()
    for indices in batches:
        rows, longest = len(indices), int(lengths[indices].max())
        assert 1 <= rows <= batch_size
        if max_batch_tokens:
            assert rows * longest <= max_batch_tokens or rows == 1, (rows, longest)
