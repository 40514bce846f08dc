"""Host-side batching without a model: the token-vector cache's LRU bound, the token budget's
batches, JAX's position buckets."""

import numpy as np
import pytest
from support.batches import check_batches

from elmo_tf.models import length_batches


def test_token_vector_cache_is_bounded_lru():
    from elmo_tf.models.token_cache import ENTRY_OVERHEAD_BYTES, TokenVectorCache

    vector = np.zeros(4, np.float32)
    cache = TokenVectorCache(2)
    cache.put("a", vector + 1)
    cache.put("b", vector + 2)
    assert cache.get("a")[0] == 1  # "b" is now the least recently used
    cache.put("c", vector + 3)
    assert cache.get("b") is None and cache.get("c")[0] == 3 and len(cache) == 2
    assert (cache.hits, cache.misses) == (2, 1)
    assert cache.nbytes == 2 * (16 + ENTRY_OVERHEAD_BYTES)
    cache.resize(max_bytes=16 + ENTRY_OVERHEAD_BYTES)  # room for one vector
    assert len(cache) == 1 and cache.get("c") is not None
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    with pytest.raises(ValueError, match="max_tokens must be >= 0"):
        TokenVectorCache(-1)


@pytest.mark.parametrize("batch_size, max_batch_tokens", [(4, 16), (64, 3072), (3, 1), (5, None)])
def test_token_budget_batches_respect_both_limits(batch_size, max_batch_tokens):
    lengths = np.random.default_rng(0).integers(0, 130, size=500).tolist() + [0, 0, 400]
    batches = length_batches.length_batches(lengths, batch_size, max_batch_tokens)
    check_batches(batches, lengths, batch_size, max_batch_tokens)
    if max_batch_tokens:  # rows are only cut where the budget demands it
        for indices in batches[:-1]:
            longest = max(int(np.max(np.asarray(lengths)[indices])), 1)
            assert len(indices) == min(batch_size, max(1, max_batch_tokens // longest))


def test_token_budget_keeps_short_batches_full_and_can_be_turned_off():
    lengths = [3, 48, 48, 20, 1, 0, 47] * 30
    unbudgeted = length_batches.length_batches(lengths, 64)
    for budget in (None, 0, 64 * 48, length_batches.DEFAULT_MAX_BATCH_TOKENS):
        batches = length_batches.length_batches(lengths, 64, budget)
        assert [b.tolist() for b in batches] == [b.tolist() for b in unbudgeted]
    assert [len(b) for b in length_batches.length_batches(lengths, 64, 64 * 47)][:2] == [62, 64]
    for bad in (-1, 1.5, "100", True):
        message = r"max_batch_tokens \(None or 0: no budget\) must be a non-negative integer"
        with pytest.raises(ValueError, match=message):
            length_batches.length_batches(lengths, 64, bad)


def test_position_buckets_pad_by_less_than_twice_and_are_few():
    from elmo_tf.models.compiled_calls import encode_bucket, position_bucket

    assert [position_bucket(n) for n in (1, 16, 17, 32, 33, 64, 65, 129)] == [
        16, 16, 32, 32, 64, 64, 128, 256,
    ]  # fmt: skip
    assert len({position_bucket(n) for n in range(1, 10_003)}) == 11
    assert all(n <= position_bucket(n) < 2 * n or n <= 16 for n in range(1, 10_003))
    assert [encode_bucket(n) for n in (1, 16, 17, 64, 65, 256, 257, 512)] == [
        16, 16, 64, 64, 256, 256, 512, 512,
    ]  # fmt: skip
