"""The unigram baseline: the perplexity of word frequencies alone, predicted as the biLM predicts.

A biLM's held-out perplexity means little on its own; the perplexity of a unigram model
estimated on the same training text, over the same vocabulary and the same predictions, is
the floor any context must beat.
"""

import math

import numpy as np

from elmo_tf.training.perplexity import perplexities


def prediction_counts(corpus, vocabulary):
    """How often each vocabulary id is a target of each LM in one pass over ``corpus``.

    The forward LM predicts every token and then ``</S>`` for each sentence; the backward LM
    every token and then ``<S>`` (see ``data.frame_sentences``). Tokens outside the
    vocabulary are predicted as ``<UNK>``, and a literal ``<S>``/``</S>`` in the text as that
    boundary, as in training.

    Returns float64 arrays ``(forward (V,), backward (V,))``.
    """
    tokens = np.bincount(
        corpus.type_targets(vocabulary), weights=corpus.type_counts, minlength=len(vocabulary)
    )
    forward = tokens.copy()
    forward[vocabulary.eos_id] += corpus.n_sentences
    backward = tokens
    backward[vocabulary.bos_id] += corpus.n_sentences
    return forward, backward


def unigram_perplexity(train_corpus, heldout_corpus, vocabulary, smoothing=0.0):
    """Perplexity on ``heldout_corpus`` of unigram LMs estimated on ``train_corpus``.

    Each direction's model is ``p(w) = (c(w) + smoothing) / (N + smoothing * V)``, with
    ``c(w)`` the number of times that direction predicts vocabulary id ``w`` in the training
    text (:func:`prediction_counts`), ``N`` their sum and ``V`` the vocabulary size: the
    maximum-likelihood estimate when ``smoothing`` is 0. Its loss is the mean cross-entropy
    per held-out prediction, as ``evaluation.evaluate`` reports for the biLM; the two
    directions differ only by predicting ``</S>`` or ``<S>``, and so agree unless the text
    holds literal boundary tokens.

    Raises ``ValueError`` naming a token when a held-out prediction has probability 0 (a
    vocabulary entry, often ``<UNK>``, that the training text never predicts); pass
    ``smoothing`` > 0 then.

    Returns a dict: ``perplexity`` (``exp`` of the mean of the two losses),
    ``forward_perplexity``, ``backward_perplexity``, ``forward_loss``, ``backward_loss``,
    ``predictions`` (per direction), ``training_predictions``, ``smoothing``.
    """
    if smoothing < 0:
        raise ValueError(f"smoothing must be non-negative, got {smoothing}")
    losses = []
    for train, heldout in zip(
        prediction_counts(train_corpus, vocabulary),
        prediction_counts(heldout_corpus, vocabulary),
    ):
        estimate = train + smoothing
        seen = heldout > 0
        unseen = seen & (estimate == 0)
        if unseen.any():
            token = vocabulary.tokens[int(np.flatnonzero(unseen)[0])]
            raise ValueError(
                f"the held-out text predicts {token!r}, which the training text never "
                f"predicts, so its unigram probability is 0 (vocabulary entries like this: "
                f"{int(unseen.sum())}); use a smoothing above 0"
            )
        log_p = np.log(estimate[seen]) - math.log(estimate.sum())
        losses.append(float(-(heldout[seen] * log_p).sum() / heldout.sum()))
    forward, backward = losses
    return {
        **perplexities(forward, backward),
        "predictions": heldout_corpus.n_positions,
        "training_predictions": train_corpus.n_positions,
        "smoothing": float(smoothing),
    }
