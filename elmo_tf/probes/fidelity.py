"""How far a reduced-precision run's vectors are from the float32 run's: per-token cosine
similarity and the largest difference, per output key, on real tokens only.

Both runs embed the same sentences with the same weights (``ELMo.embed``, ``OnnxModel.embed``
or any runner returning ``embed``'s dict); the float32 run of the same runtime is the
reference, so that the figures measure the precision alone, not the runtime's float32
round-off. Padding is left out (it is zero in both, and would raise every mean).

>>> exact = elmo_tf.ELMo.from_preset("sotu").embed(sentences)
>>> approx = elmo_tf.ELMo.from_preset("sotu", precision="bfloat16").embed(sentences)
>>> compare(exact, approx)["elmo"].cos_mean
0.9996...

``benchmarks/precision.py`` prints these per runtime and precision, with the word-sense
probe (``word_senses``) per layer beside them.
"""

import dataclasses

import numpy as np

# The keys compared by default: the token layer, the LSTM layers, the mix (``default``, a
# sentence's mean, follows ``elmo``).
PER_TOKEN_PREFIXES = ("word_emb", "lstm_outputs", "elmo")


@dataclasses.dataclass(frozen=True)
class Fidelity:
    """One output key's agreement over ``tokens`` real tokens: the mean and 1st percentile of
    the per-token cosine similarity, the lowest, and the largest absolute difference (beside
    the largest absolute value of the reference, its scale)."""

    tokens: int
    cos_mean: float
    cos_p1: float
    cos_min: float
    max_abs: float
    scale: float


def token_fidelity(reference, test, lengths):
    """The ``Fidelity`` of ``test`` against ``reference``, both ``(B, T, D)`` arrays of one
    output key, over each row's first ``lengths[b]`` positions."""
    reference, test = np.asarray(reference), np.asarray(test)
    if reference.shape != test.shape or reference.ndim != 3:
        raise ValueError(
            f"expected two (batch, time, dim) arrays of one shape, got {reference.shape} and "
            f"{test.shape}"
        )
    lengths = np.asarray(lengths)
    mask = np.arange(reference.shape[1])[None, :] < lengths[:, None]  # (B, T)
    a = reference[mask].astype(np.float64)  # (tokens, D)
    b = test[mask].astype(np.float64)
    if not len(a):
        raise ValueError("no real token to compare")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    # Two zero vectors agree; one zero against one that is not does not.
    both_zero = (np.linalg.norm(a, axis=1) == 0) & (np.linalg.norm(b, axis=1) == 0)
    cos = np.where(both_zero, 1.0, (a * b).sum(axis=1) / np.maximum(norms, 1e-30))
    return Fidelity(
        tokens=int(len(a)),
        cos_mean=float(cos.mean()),
        cos_p1=float(np.percentile(cos, 1)),
        cos_min=float(cos.min()),
        max_abs=float(np.abs(a - b).max()),
        scale=float(np.abs(a).max()),
    )


def compare(reference, test, keys=None):
    """``{key: Fidelity}`` of ``test`` against ``reference``, two ``embed`` results of the same
    sentences; ``keys`` default to every per-token key (``word_emb``, ``lstm_outputsK``,
    ``elmo``...). The lengths are the reference's ``sequence_len``."""
    if keys is None:  # in the outputs' order (elmo_tf.models.outputs), whatever the dict's
        keys = sorted(
            (k for k in reference if k.startswith(PER_TOKEN_PREFIXES)),
            key=lambda k: (next(i for i, p in enumerate(PER_TOKEN_PREFIXES) if k.startswith(p)), k),
        )
    lengths = np.asarray(reference["sequence_len"])
    if not np.array_equal(lengths, np.asarray(test["sequence_len"])):
        raise ValueError("the two results hold sentences of different lengths")
    return {key: token_fidelity(reference[key], test[key], lengths) for key in keys}
