"""Host-side grouping of sentences into batches of similar length."""

import numpy as np

from elmo_tf import checks

# Sentences per model call that ``ELMo.embed``, ``elmo-tf embed`` and the Beam handlers use by
# default. The biLSTM's recurrent matmul ((B, P) x (P, 4D) a step) streams its kernel once per
# step whatever B is, so a step gets cheaper per row as B grows; past 128, tokens/s gains 2-3%
# while peak memory grows 14-22% (docs/performance.md), so 128 is the default.
DEFAULT_BATCH_SIZE = 128

# Padded tokens per batch (rows x its longest sentence) allowed by default: 128 x 48. A
# batch's tensors are (B, T + 2, ...) (char ids, every layer's outputs, the mixed result), so
# its memory follows B x T, not B. Sentences of up to 48 tokens (98% of the benchmark corpus)
# still fill the default 128 rows; only the long tail gets fewer.
DEFAULT_MAX_BATCH_TOKENS = DEFAULT_BATCH_SIZE * 48


def check_batch_size(batch_size, name="batch_size"):
    """Raises ``ValueError`` unless ``batch_size`` is a positive integer; the message calls it
    ``name`` (the command line passes its flag)."""
    checks.positive_integer(name, batch_size)


def check_max_batch_tokens(max_batch_tokens, name="max_batch_tokens"):
    """Raises ``ValueError`` unless ``max_batch_tokens`` is ``None`` or an integer >= 0."""
    if max_batch_tokens is not None:
        none = "0" if name.startswith("--") else "None or 0"  # a flag has no None
        checks.integer(f"{name} ({none}: no budget)", max_batch_tokens, minimum=0)


def length_batches(lengths, batch_size, max_batch_tokens=None):
    """Splits sentence indices into batches sorted by length, longest first.

    Each batch holds at most ``batch_size`` sentences and, with ``max_batch_tokens``, at most
    ``max_batch_tokens // longest`` of them (``longest``: the batch's longest sentence, in
    tokens), so that rows x longest stays within the budget; a sentence longer than the budget
    gets a batch of its own. ``None`` or 0: no budget. Sorting keeps padding small; the longest
    batches come first so that memory peaks early. Returns a list of int arrays of indices
    into ``lengths``.
    """
    check_batch_size(batch_size)
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
