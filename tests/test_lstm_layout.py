"""The LSTM step's gate layout (``elmo_tf.layers.lstm_layout``): chosen per machine, pinned on
request, the same numbers either way, and a fixed one in exported graphs."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY
from numerics import assert_reordered

import elmo_tf
from elmo_tf.layers import lstm_layout

pytestmark = pytest.mark.numerics

SENTENCES = [["The", "bank", "closed", "."], ["A", "river", "bank"], ["Hello", "!"]]


@pytest.fixture
def traced_layouts(monkeypatch):
    """The layout every trace of ``run_directions`` got, in order."""
    seen = []
    real = lstm_layout.layout_for

    def recording(cell):
        seen.append(real(cell))
        return seen[-1]

    monkeypatch.setattr(lstm_layout, "layout_for", recording)
    return seen


def _model():
    return elmo_tf.load_pretrained(TINY / "options.json", TINY / "weights.hdf5")


@pytest.mark.parametrize("rows", [3, 40])  # a small call runs fused; a large one per gate here
def test_both_layouts_give_the_same_numbers(monkeypatch, rows):
    sentences = (SENTENCES * 14)[:rows]
    outputs = {}
    for layout in lstm_layout.LAYOUTS:
        monkeypatch.setenv(lstm_layout.LAYOUT_VARIABLE, layout)
        outputs[layout] = _model().embed(sentences)
    for key, value in outputs["fused"].items():
        assert_reordered(outputs["per_gate"][key], value, err_msg=key)


def test_a_pinned_layout_is_used_and_a_bad_one_named(monkeypatch, traced_layouts):
    monkeypatch.setenv(lstm_layout.LAYOUT_VARIABLE, "fused")
    model = _model()
    model.embed(SENTENCES * 14)  # 42 rows: the large-batch graph
    assert set(traced_layouts) == {"fused"}
    monkeypatch.setenv(lstm_layout.LAYOUT_VARIABLE, "diagonal")
    with pytest.raises(ValueError, match="ELMO_TF_LSTM_LAYOUT must be one of per_gate, fused"):
        _model().embed(SENTENCES * 14)


def test_small_calls_run_fused_and_large_ones_autotuned(monkeypatch, traced_layouts):
    monkeypatch.delenv(lstm_layout.LAYOUT_VARIABLE, raising=False)
    tuned = []
    monkeypatch.setattr(lstm_layout, "autotune", lambda *a: tuned.append(a) or "per_gate")
    monkeypatch.setattr(lstm_layout, "_chosen", {})
    model = _model()
    model.embed(SENTENCES)  # 3 rows
    assert traced_layouts == ["fused"] * len(traced_layouts) and tuned == []
    model.embed(SENTENCES * 14)  # 42 rows
    assert traced_layouts[-1] == "per_gate" and len(tuned) == 1
    _model().embed(SENTENCES * 14)  # another model of the same shape: the choice is cached
    assert len(tuned) == 1


def test_the_autotune_picks_a_layout_and_breaks_ties_for_per_gate(monkeypatch):
    assert lstm_layout.autotune(32, 16) in lstm_layout.LAYOUTS
    monkeypatch.setattr(lstm_layout, "TIE", 10.0)  # any difference counts as a tie
    assert lstm_layout.autotune(32, 16) == "per_gate"


def test_exported_graphs_get_the_export_layout(monkeypatch, traced_layouts, tmp_path):
    from elmo_tf.export.saved_model import export_saved_model

    monkeypatch.setenv(lstm_layout.LAYOUT_VARIABLE, "per_gate")  # what this machine would run
    model = _model()
    export_saved_model(model, tmp_path / "exported")
    assert traced_layouts and set(traced_layouts) == {lstm_layout.EXPORT_LAYOUT}
    loaded = tf.saved_model.load(str(tmp_path / "exported" / "1"))
    served = loaded.signatures["tokens"](
        tokens=tf.constant([["The", "bank", "closed", "."]]), sequence_len=tf.constant([4])
    )
    embedded = model.embed([SENTENCES[0]])
    assert_reordered(served["elmo"].numpy(), embedded["elmo"])
    assert np.isfinite(served["elmo"].numpy()).all()
