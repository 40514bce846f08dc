"""Host-side grouping of sentences into batches of similar length."""

import numpy as np

# Sentences per model call that ``ELMo.embed``, ``elmo-tf embed`` and the Beam handlers use by
# default. The biLSTM's recurrent matmul ((B, P) x (P, 4D) a step) streams its 32 MB kernel
# (published shape) once per step whatever B is, so it gets faster per row as B grows:
# single-threaded, 126-136 GFLOP/s at B = 64, 135-145 at 128, 154 at 256, against 166-171
# for a 2048² matmul (``benchmarks/lstm_step.py --bound``; Intel machine). While the input half
# of the gates ran on every padded position, more rows also meant more padding there, and past
# 128 tokens/s fell again: ``profile_embed.py``-style passes over the README's corpus, full
# shape, Intel 2-core machine, medians of 3, two runs: B = 64 (budget 3,072) 1,025 / 1,142
# tokens/s, B = 96 964, B = 128 (budget 6,144) 1,164 / 1,205, B = 128 (budget 8,192) 1,174,
# B = 256 (budget 12,288) 1,130. Since the input half runs on real positions only, B = 256 on
# the Zen 4 machine (default budget, passes interleaved with 128's) gains 2-3% tokens/s but
# peaks 14-22% higher in RSS (the README's performance section), so 128 stays. The small shape
# does not care (9,619 vs 9,587).
DEFAULT_BATCH_SIZE = 128

# Padded tokens per batch (rows x its longest sentence) allowed by default: 128 x 48. A
# batch's tensors are (B, T + 2, ...) (char ids, every layer's outputs, the mixed result), so
# its memory follows B x T, not B; only the input half of the LSTM gates (``run_directions``,
# 4D float32 per real position and direction, 64 KiB for the published D = 4096) follows the
# real tokens. Sentences of up to 48 tokens (98% of the README's benchmark corpus,
# ``make_corpus.py --n 1000 --seed 7``: mean 22, 95th percentile 44, max 119) still fill the
# default 128 rows; only the long tail gets fewer.
DEFAULT_MAX_BATCH_TOKENS = DEFAULT_BATCH_SIZE * 48


def check_max_batch_tokens(max_batch_tokens):
    """Raises ``ValueError`` unless ``max_batch_tokens`` is ``None`` or an integer >= 0."""
    if max_batch_tokens is None:
        return
    if (
        isinstance(max_batch_tokens, bool)
        or not isinstance(max_batch_tokens, int | np.integer)
        or max_batch_tokens < 0
    ):
        raise ValueError(
            "max_batch_tokens must be None or a non-negative integer (0 or None: no budget), "
            f"got {max_batch_tokens!r}"
        )


def length_batches(lengths, batch_size, max_batch_tokens=None):
    """Splits sentence indices into batches sorted by length, longest first.

    Each batch holds at most ``batch_size`` sentences and, with ``max_batch_tokens``, at most
    ``max_batch_tokens // longest`` of them (``longest``: the batch's longest sentence, in
    tokens), so that rows x longest stays within the budget; a sentence longer than the budget
    gets a batch of its own. ``None`` or 0: no budget. Sorting keeps padding small; the longest
    batches come first so that memory peaks early. Returns a list of int arrays of indices
    into ``lengths``.
    """
    if not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    check_max_batch_tokens(max_batch_tokens)
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    if not max_batch_tokens:
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches, start = [], 0
    while start < len(order):
        longest = max(int(lengths[order[start]]), 1)  # the batch's first row is its longest
        rows = min(batch_size, max(1, max_batch_tokens // longest))
        batches.append(order[start : start + rows])
        start += rows
    return batches
