"""Where the repository and the committed fixtures are."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TINY = FIXTURES / "tiny"  # a tiny random model with AllenNLP's golden outputs
BILM = FIXTURES / "bilm_fixture"  # bilm-tf's test model with its golden outputs


def bilm_tf_outputs():
    """``(sentences, [layer 0, 1, 2])`` of bilm-tf's stored outputs on its test model: per
    layer, the ten sentences' ``(n_tokens, 2P)`` (forward and backward concatenated, without
    ``<S>``/``</S>``)."""
    import json

    import h5py
    import numpy as np

    with open(BILM / "sentences.json", encoding="utf-8") as f:
        sentences = json.load(f)
    expected = []
    for k in range(3):
        with h5py.File(BILM / f"lm_embeddings_{k}.hdf5", "r") as f:
            expected.append([np.concatenate(list(f[str(i)][...]), axis=-1) for i in range(10)])
    return sentences, expected
