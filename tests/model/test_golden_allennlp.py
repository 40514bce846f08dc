"""The model against AllenNLP's outputs on the tiny random weights (tests/fixtures/tiny).

Each path a user can get is checked: on TensorFlow, a call runs the per-gate LSTM layout (the
default), or the fused one where ``ELMO_TF_LSTM_LAYOUT=fused`` pins it, and ``embed`` runs
calls of fewer than 32 rows (every golden batch) in the small-call graph, traced fused
(``elmo_tf.layers.lstm_layout``). CI reruns this file on the other backends' loops
(``elmo_tf.backend.bilstm_path``): JAX's masked scan, PyTorch's eager packed loop.
"""

import numpy as np
import pytest
from support.numerics import REFERENCE_ATOL_ALLENNLP, assert_reordered, to_numpy

import elmo_tf
from elmo_tf import backend
from elmo_tf.layers import lstm_layout

ATOL = REFERENCE_ATOL_ALLENNLP


def _batches(meta):
    return list(meta["batches"].items())


@pytest.fixture(scope="module", params=["default", "fused"])
def runs(request, tiny_model, golden):
    """Each golden batch through ``bilm`` and the model's call, with the default LSTM layout
    and with ``fused`` pinned (a layout of TensorFlow's path only)."""
    if request.param == "fused" and not backend.is_tensorflow():
        pytest.skip("the LSTM layouts are TensorFlow's; this backend runs a loop of its own")
    meta, _ = golden
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "fused":
            mp.setenv(lstm_layout.LAYOUT_VARIABLE, "fused")
        for batch, names in _batches(meta):
            sentences = [meta["sentences"][n] for n in names]
            char_ids = elmo_tf.batch_to_ids(sentences)
            bilm = tiny_model.bilm(char_ids)
            results[batch] = (
                np.stack([to_numpy(a) for a in bilm["activations"]]),
                to_numpy(bilm["mask"]),
                {k: to_numpy(v) for k, v in tiny_model(char_ids).items()},
            )
    return results


@pytest.mark.numerics
def test_activations_with_sentence_boundaries(runs, golden):
    _, arrays = golden
    for batch, (activations, mask, _) in runs.items():
        np.testing.assert_array_equal(mask, arrays[f"{batch}__mask_bos_eos"], err_msg=batch)
        np.testing.assert_allclose(
            activations, arrays[f"{batch}__act_bos_eos"], atol=ATOL, rtol=0, err_msg=batch
        )


@pytest.mark.numerics
def test_layers_and_elmo_without_boundaries(runs, golden):
    _, arrays = golden
    for batch, (_, _, out) in runs.items():
        layers = np.stack(
            [
                np.concatenate([out["word_emb"], out["word_emb"]], axis=-1),
                out["lstm_outputs1"],
                out["lstm_outputs2"],
            ]
        )
        np.testing.assert_allclose(layers, arrays[f"{batch}__act"], atol=ATOL, rtol=0)
        # Mix weights 0 and gamma 1, as in the golden run: the mean of the three layers.
        np.testing.assert_allclose(out["elmo"], arrays[f"{batch}__elmo"], atol=ATOL, rtol=0)
        mask = arrays[f"{batch}__mask"]
        np.testing.assert_array_equal(out["sequence_len"], mask.sum(axis=1))
        assert not out["elmo"][~mask].any(), "padded positions must be zero"
        expected_default = out["elmo"].sum(axis=1) / np.maximum(mask.sum(axis=1), 1)[:, None]
        assert_reordered(out["default"], expected_default)


@pytest.mark.numerics
def test_embed_small_calls(tiny_model, golden):
    """``embed`` of each golden batch (all under ``SMALL_BATCH_ROWS``: the small-call graph)."""
    meta, arrays = golden
    for batch, names in _batches(meta):
        assert len(names) < lstm_layout.SMALL_BATCH_ROWS
        out = tiny_model.embed([meta["sentences"][n] for n in names])
        layers = [np.concatenate([out["word_emb"]] * 2, axis=-1)]
        layers += [out["lstm_outputs1"], out["lstm_outputs2"]]
        np.testing.assert_allclose(
            np.stack(layers), arrays[f"{batch}__act"], atol=ATOL, rtol=0, err_msg=batch
        )
        np.testing.assert_allclose(
            out["elmo"], arrays[f"{batch}__elmo"], atol=ATOL, rtol=0, err_msg=batch
        )


@pytest.mark.numerics
def test_stateful_sequence_with_explicit_state(tiny_model, golden):
    """AllenNLP's stateful ELMo keeps a state per batch row; a smaller batch uses the first
    rows and leaves the others as they were. The explicit state reproduces that."""
    meta, arrays = golden
    order = meta["checks"]["stateful_sequence"]["order"]
    state = tiny_model.zero_state(max(len(meta["batches"][b]) for b in order))
    for step, batch in enumerate(order):
        sentences = [meta["sentences"][n] for n in meta["batches"][batch]]
        rows = len(sentences)
        bilm = tiny_model.bilm(
            elmo_tf.batch_to_ids(sentences),
            initial_state=elmo_tf.LSTMState(state.cell[:rows], state.hidden[:rows]),
        )
        activations = np.stack([to_numpy(a) for a in bilm["activations"]])
        np.testing.assert_allclose(
            activations,
            arrays[f"stateful_seq{step}_{batch}__act_bos_eos"],
            atol=ATOL,
            rtol=0,
            err_msg=f"step {step} ({batch})",
        )
        state.cell[:rows] = to_numpy(bilm["state"].cell)
        state.hidden[:rows] = to_numpy(bilm["state"].hidden)


@pytest.mark.numerics
def test_second_run_is_not_stateful(tiny_model, golden):
    """AllenNLP's second run of a batch differs (state carried over); ours must not."""
    meta, arrays = golden
    sentences = [meta["sentences"][n] for n in meta["batches"]["mixed"]]
    first = tiny_model.embed(sentences)
    second = tiny_model.embed(sentences)
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
    assert not np.allclose(
        arrays["mixed__act_bos_eos_run2_noreset"], arrays["mixed__act_bos_eos"], atol=1e-3
    )
