"""A bilm-tf-format NLPL archive against simple_elmo's numbers (tests/fixtures/nlpl), as its
zip, its folder, and converted by `elmo-tf convert`."""

import numpy as np
import pytest
from support.foreign_models import NLPL_BILM_ZIP, TOLERANCE, simple_elmo_golden, stacked_layers

from elmo_tf.kinds import model_kinds


@pytest.mark.numerics
def test_the_bilm_tf_archive_gives_simple_elmos_numbers(tmp_path):
    import elmo_tf

    model = elmo_tf.ELMo.from_preset(str(NLPL_BILM_ZIP))
    assert len(model.token_cache) == 9  # vocab.txt's tokens, as simple_elmo caches them
    sentences, golden = simple_elmo_golden()
    outputs = model.embed(sentences)
    for i, sentence in enumerate(sentences):
        n = len(sentence)
        np.testing.assert_allclose(stacked_layers(outputs, i, n), golden[f"layers_{i}"], rtol=0,
                                   atol=TOLERANCE)  # fmt: skip
        np.testing.assert_allclose(outputs["elmo"][i, :n], golden[f"average_{i}"], rtol=0,
                                   atol=TOLERANCE)  # fmt: skip
        np.testing.assert_array_equal(elmo_tf.batch_to_ids([sentence])[0],
                                      golden[f"char_ids_{i}"][1:-1])  # fmt: skip
    # the extracted folder loads the same, and the temporary one is gone
    model_kinds.unpack_archive(NLPL_BILM_ZIP, tmp_path / "folder")
    again = elmo_tf.ELMo.from_preset(str(tmp_path / "folder")).embed(sentences)
    np.testing.assert_array_equal(again["elmo"], outputs["elmo"])


def test_convert_turns_a_bilm_tf_archive_into_a_model_directory(tmp_path):
    import elmo_tf
    from elmo_tf.cli.main import main

    out = tmp_path / "model"
    assert main(["convert", str(NLPL_BILM_ZIP), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "vocab.txt", "weights.hdf5"]
    sentences, golden = simple_elmo_golden()
    outputs = elmo_tf.ELMo.from_preset(str(out)).embed(sentences[:2])
    np.testing.assert_allclose(outputs["elmo"][1, :5], golden["average_1"], rtol=0,
                               atol=TOLERANCE)  # fmt: skip
