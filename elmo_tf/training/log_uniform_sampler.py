"""LogUniformSampler: the candidates of the sampled softmax, drawn statelessly."""

import numpy as np

from elmo_tf import backend

backend.require_tensorflow("biLM training")  # one line, before TensorFlow

import tensorflow as tf


class LogUniformSampler:
    """Draws ``num_sampled`` distinct word ids from the log-uniform (Zipfian) distribution.

    ``P(k) = (log(k + 2) - log(k + 1)) / log(V + 1)``, the distribution of
    ``tf.random.log_uniform_candidate_sampler`` (which bilm-tf's sampled softmax uses): it fits
    a vocabulary sorted by descending frequency. As with that sampler's ``unique=True``, the
    ids are drawn without replacement; here with the Gumbel-top-k trick
    (``top_k(log P + Gumbel noise)``), which gives the same distribution as drawing with
    replacement and dropping repeats. The draw is a pure function of its seed, so a run
    resumed from a checkpoint draws the same candidates as an uninterrupted one.

    The expected count of id ``k`` (the sampled softmax subtracts its log from the logit) is
    its probability of being among the draws, ``1 - (1 - P(k))^n``, with ``n`` the number of
    draws with replacement that give ``num_sampled`` distinct ids on average (TensorFlow's
    sampler uses the number of draws it actually made). With ``num_sampled >= V`` every id is
    drawn, with expected count 1, and the sampled softmax equals the full softmax.

    Args:
        vocab_size: V.
        num_sampled: candidates per draw (capped at V).

    Example:
    >>> sampler = LogUniformSampler(1000, 64)
    >>> ids, true_count, sampled_count = sampler.sample(tf.constant([[3], [7]]), seed=[1, 2])
    >>> ids.shape, true_count.shape, sampled_count.shape
    (TensorShape([64]), TensorShape([2, 1]), TensorShape([64]))
    """

    def __init__(self, vocab_size, num_sampled):
        self.vocab_size = int(vocab_size)
        self.num_sampled = min(int(num_sampled), self.vocab_size)
        k = np.arange(self.vocab_size, dtype=np.float64)
        p = (np.log(k + 2) - np.log(k + 1)) / np.log(self.vocab_size + 1)
        if self.num_sampled >= self.vocab_size:
            expected = np.ones_like(p)
        else:
            expected = -np.expm1(_draws_for_unique(p, self.num_sampled) * np.log1p(-p))
        self.log_probabilities = tf.constant(np.log(p), tf.float32)
        self.expected_counts = tf.constant(expected, tf.float32)

    def sample(self, labels, seed):
        """Returns ``(sampled (S,) int64, true_expected (N, 1), sampled_expected (S,))``.

        ``labels`` is ``(N, 1)``; ``seed`` a shape-``[2]`` integer tensor. The triple is the
        ``sampled_values`` argument of ``tf.nn.sampled_softmax_loss``.
        """
        if self.num_sampled >= self.vocab_size:
            sampled = tf.range(self.vocab_size, dtype=tf.int64)
        else:
            uniform = tf.random.stateless_uniform(
                [self.vocab_size], seed, minval=np.finfo(np.float32).tiny, maxval=1.0
            )
            gumbel = -tf.math.log(-tf.math.log(uniform))
            _, top = tf.math.top_k(self.log_probabilities + gumbel, k=self.num_sampled)
            sampled = tf.cast(top, tf.int64)
        true_expected = tf.gather(self.expected_counts, tf.cast(labels, tf.int64))
        return sampled, true_expected, tf.gather(self.expected_counts, sampled)


def _draws_for_unique(p, num_unique):
    """The ``n`` with ``sum(1 - (1 - p)^n) == num_unique`` (bisection in log space)."""
    log1m = np.log1p(-p)

    def unique(n):
        return np.sum(-np.expm1(n * log1m))

    lo, hi = np.log(num_unique), np.log(num_unique) + 1.0
    while unique(np.exp(hi)) < num_unique:
        hi += 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if unique(np.exp(mid)) < num_unique:
            lo = mid
        else:
            hi = mid
    return np.exp(0.5 * (lo + hi))
