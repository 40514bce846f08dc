"""The model against the original bilm-tf's outputs on a trained biLM (tests/fixtures/bilm_fixture).

bilm-tf was stateful: batch i = (list0[i], list1[i], list2[i]) ran with each row's state carried
from batch i - 1. Batch 0 starts from zero state.
"""

import h5py
import numpy as np
import pytest
from support.numerics import REFERENCE_ATOL_BILM_TF
from support.paths import BILM, bilm_tf_outputs

import elmo_tf

ATOL = REFERENCE_ATOL_BILM_TF


@pytest.fixture(scope="module")
def bilm_data():
    return bilm_tf_outputs()


def _batch(sentences, i):
    return [sentences[k][i].split() for k in range(3)]


@pytest.mark.numerics
def test_batch_0_stateless(bilm_model, bilm_data):
    sentences, expected = bilm_data
    out = bilm_model.embed(_batch(sentences, 0))
    for k in range(3):
        n = len(sentences[k][0].split())
        assert out["sequence_len"][k] == n
        np.testing.assert_allclose(out["lstm_outputs2"][k, :n], expected[k][0], atol=ATOL, rtol=0)


@pytest.mark.numerics
def test_ten_batches_stateful_through_explicit_state(bilm_model, bilm_data):
    sentences, expected = bilm_data
    state = None
    for i in range(10):
        out, state = bilm_model.embed(_batch(sentences, i), initial_state=state, return_state=True)
        for k in range(3):
            n = out["sequence_len"][k]
            np.testing.assert_allclose(
                out["lstm_outputs2"][k, :n],
                expected[k][i],
                atol=ATOL,
                rtol=0,
                err_msg=f"batch {i}, row {k}",
            )


def test_stateless_later_batches_differ_from_stateful_reference(bilm_model, bilm_data):
    sentences, expected = bilm_data
    out = bilm_model.embed(_batch(sentences, 3))
    n = out["sequence_len"][0]
    assert np.abs(out["lstm_outputs2"][0, :n] - expected[0][3]).max() > 0.1


@pytest.mark.numerics
def test_context_free_token_embeddings(bilm_model):
    """bilm-tf's dump_token_embeddings of vocab_test.txt equals our character encoder."""
    vocab = (BILM / "vocab_test.txt").read_text(encoding="utf-8").split("\n")
    vocab = [t for t in vocab if t]
    with h5py.File(BILM / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...]
    assert expected.shape == (len(vocab), 16)
    ids = elmo_tf.batch_to_ids([vocab])[0]
    vectors = bilm_model.character_encoder(ids).numpy()
    np.testing.assert_allclose(vectors, expected, atol=ATOL, rtol=0)
