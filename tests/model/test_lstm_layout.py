"""The LSTM step's gate layout (``elmo_tf.layers.lstm_layout``): per gate by default, fused for
small calls and in exported graphs, pinned on request, the same numbers either way."""

import numpy as np
import pytest
import tensorflow as tf
from support.numerics import assert_reordered
from support.paths import TINY

import elmo_tf
from elmo_tf.layers import lstm_layout

SENTENCES = [["The", "bank", "closed", "."], ["A", "river", "bank"], ["Hello", "!"]]


@pytest.fixture
def traced_layouts(monkeypatch):
    """The layout every trace of ``run_directions`` got, in order."""
    seen = []
    real = lstm_layout.current_layout

    def recording():
        seen.append(real())
        return seen[-1]

    monkeypatch.setattr(lstm_layout, "current_layout", recording)
    return seen


def _model():
    return elmo_tf.load_pretrained(TINY / "options.json", TINY / "weights.hdf5")


@pytest.mark.numerics
def test_both_layouts_give_the_same_numbers(monkeypatch):
    sentences = (SENTENCES * 14)[:40]  # past SMALL_BATCH_ROWS: the pinned layout runs
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


def test_by_default_small_calls_run_fused_and_the_others_per_gate(monkeypatch, traced_layouts):
    monkeypatch.delenv(lstm_layout.LAYOUT_VARIABLE, raising=False)
    model = _model()
    model.embed(SENTENCES)  # 3 rows: the small-call graph
    assert traced_layouts and set(traced_layouts) == {"fused"}
    traced_layouts.clear()
    model.embed(SENTENCES * 14)  # 42 rows
    assert traced_layouts and set(traced_layouts) == {"per_gate"}
    traced_layouts.clear()
    model(elmo_tf.batch_to_ids(SENTENCES))  # a direct call, whatever its rows
    assert traced_layouts and set(traced_layouts) == {"per_gate"}
    monkeypatch.setenv(lstm_layout.LAYOUT_VARIABLE, " ")  # blank is unset
    assert lstm_layout.current_layout() == lstm_layout.DEFAULT_LAYOUT == "per_gate"


@pytest.mark.numerics
def test_exported_graphs_get_the_export_layout(monkeypatch, traced_layouts, tmp_path):
    from elmo_tf.export.saved_model import export_saved_model

    monkeypatch.setenv(lstm_layout.LAYOUT_VARIABLE, "per_gate")  # exports trace fused even so
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
