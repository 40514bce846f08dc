"""ELMoForManyLangs models against the numbers of EFML's own code (tests/fixtures/efml: a tiny
model saved by EFML 0.0.4.post2 and its outputs, golden.npz): every layer and the average, the
weight-file and .keras round trips, ElmoLayer, and `elmo-tf convert` / `embed` in process."""

import os
import re

import numpy as np
import pytest
from support.foreign_models import (
    EFML_TINY,
    TOLERANCE,
    efml_golden,
    efml_members,
    stacked_layers,
    zip_bytes,
)

from elmo_tf.foreign import efml_folder
from elmo_tf.kinds import efml_conversion


def _converted():
    return efml_conversion.convert(efml_folder.read_folder(EFML_TINY))


@pytest.fixture(scope="module")
def efml_model():
    from elmo_tf.models import ELMo

    return ELMo.from_preset(str(EFML_TINY))


@pytest.mark.numerics
def test_every_layer_and_the_average_are_efmls(efml_model):
    sentences, golden = efml_golden()
    outputs = efml_model.embed(sentences)
    for i, sentence in enumerate(sentences):
        n = len(sentence)
        np.testing.assert_allclose(stacked_layers(outputs, i, n), golden[f"layers_{i}"], rtol=0,
                                   atol=TOLERANCE, err_msg=f"sentence {i}")  # fmt: skip
        np.testing.assert_allclose(outputs["elmo"][i, :n], golden[f"average_{i}"], rtol=0,
                                   atol=TOLERANCE, err_msg=f"sentence {i}")  # fmt: skip


@pytest.mark.numerics
def test_a_direct_call_on_the_models_ids_gives_the_same_numbers(efml_model):
    sentences, golden = efml_golden()
    outputs = efml_model(efml_model.batch_to_ids(sentences))
    for i, sentence in enumerate(sentences):
        np.testing.assert_allclose(np.asarray(outputs["elmo"])[i, : len(sentence)],
                                   golden[f"average_{i}"], rtol=0, atol=TOLERANCE)  # fmt: skip


def test_ids_of_another_scheme_are_refused_by_name(efml_model):
    import elmo_tf

    with pytest.raises(ValueError, match=r"shape \(batch, tokens, 51\) \(the model's batch_to"):
        efml_model(elmo_tf.batch_to_ids([["a"]]))
    ids = efml_model.batch_to_ids([["a"]])
    ids[0, 0, -1] = 33
    with pytest.raises(ValueError, match="last column must hold word ids from 0 to 32"):
        efml_model(ids)


def test_the_weight_file_round_trip_keeps_the_numbers(efml_model, tmp_path):
    from elmo_tf import load_weights, save_weights
    from elmo_tf.models import ELMo

    save_weights(efml_model, tmp_path / "weights.hdf5")
    again = load_weights(ELMo(efml_model.config), tmp_path / "weights.hdf5")
    sentences, _ = efml_golden()
    a, b = efml_model.embed(sentences), again.embed(sentences)
    np.testing.assert_array_equal(a["elmo"], b["elmo"])


def test_a_model_of_the_config_alone_maps_nothing_until_its_weights_load():
    from elmo_tf.models import ELMo

    model = ELMo(_converted()[0])
    with pytest.raises(ValueError, match="has no character table yet: load its weights"):
        model.embed([["a"]])


def test_without_weights_the_folder_still_gives_its_token_mapping():
    from elmo_tf.models import ELMo

    model = ELMo.from_preset(str(EFML_TINY), load_weights=False)
    sentences, golden = efml_golden()
    np.testing.assert_array_equal(model.batch_to_ids([sentences[0]])[0, :, :50],
                                  golden["char_ids_0"][1:-1] + 1)  # fmt: skip


def test_convert_writes_a_directory_that_loads_with_efmls_numbers(tmp_path, capsys):
    from elmo_tf.cli.main import main
    from elmo_tf.models import ELMo

    out = tmp_path / "converted"
    assert main(["convert", str(EFML_TINY), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "weights.hdf5"]
    assert "2x10_6_14cnn_2xhighway_3word" in capsys.readouterr().err
    model = ELMo.from_preset(str(out))
    sentences, golden = efml_golden()
    outputs = model.embed(sentences)
    for i, sentence in enumerate(sentences):
        np.testing.assert_allclose(outputs["elmo"][i, : len(sentence)], golden[f"average_{i}"],
                                   rtol=0, atol=TOLERANCE)  # fmt: skip
    assert main(["convert", str(EFML_TINY), str(out)]) == 1
    assert "already holds options.json, weights.hdf5" in capsys.readouterr().err
    assert main(["convert", str(EFML_TINY), str(out), "--overwrite"]) == 0


def test_convert_of_an_archive_names_only_what_is_left_afterwards(tmp_path, capsys):
    """The archive is unpacked into a temporary folder for the conversion: the message names
    the archive and the model config inside it, not that folder."""
    from elmo_tf.cli.main import main

    archive = tmp_path / "144.zip"
    archive.write_bytes(zip_bytes(efml_members()))
    assert main(["convert", str(archive), str(tmp_path / "out")]) == 0
    message = capsys.readouterr().err.strip()
    assert message.startswith(
        f"{tmp_path / 'out'}: options.json, weights.hdf5 of the ELMoForManyLangs model "
        f"{archive} (model config: "
    )
    paths = re.findall(r"(/[^\s,():]+)", message)
    assert paths and all(os.path.exists(p) for p in paths), paths


def test_embed_an_efml_folder_to_hdf5_gives_efmls_layers(tmp_path):
    import h5py

    from elmo_tf.cli.main import main

    sentences, golden = efml_golden()
    # one line per sentence, whitespace-tokenised: a token holding U+3000 cannot be written
    kept = [i for i, s in enumerate(sentences) if all(t.split() == [t] for t in s)]
    text = tmp_path / "input.txt"
    text.write_text("".join(" ".join(sentences[i]) + "\n" for i in kept), encoding="utf-8")
    output = tmp_path / "out.hdf5"
    assert main(["embed", str(text), str(output), "--model", str(EFML_TINY), "--all"]) == 0
    with h5py.File(output) as f:
        for line, i in enumerate(kept):
            np.testing.assert_allclose(f[str(line)][...], golden[f"layers_{i}"], rtol=0,
                                       atol=TOLERANCE, err_msg=f"sentence {i}")  # fmt: skip
    assert len(kept) == 9


def test_elmo_layer_takes_an_efml_folder():
    from elmo_tf.export.elmo_layer import ElmoLayer

    layer = ElmoLayer.from_preset(str(EFML_TINY), output_key="elmo")
    sentences, golden = efml_golden()
    vectors = np.asarray(layer(layer.elmo.batch_to_ids(sentences[:2])))
    np.testing.assert_allclose(vectors[0, :4], golden["average_0"], rtol=0, atol=TOLERANCE)


def test_a_keras_file_keeps_the_models_own_token_tables(efml_model, tmp_path):
    import keras

    efml_model.save(tmp_path / "efml.keras")
    restored = keras.models.load_model(tmp_path / "efml.keras")
    sentences, golden = efml_golden()
    outputs = restored.embed(sentences[:3])
    for i in range(3):
        n = len(sentences[i])
        np.testing.assert_allclose(outputs["elmo"][i, :n], golden[f"average_{i}"], rtol=0,
                                   atol=TOLERANCE)  # fmt: skip


def test_a_tflite_export_refuses_a_code_point_model_in_one_line(efml_model, tmp_path):
    from elmo_tf.errors import ExportError
    from elmo_tf.export.tflite import export_tflite

    with pytest.raises(ExportError, match="takes bilm-tf's character ids only") as error:
        export_tflite(efml_model, tmp_path / "never_written")
    assert not list(tmp_path.iterdir())
    assert "\n" not in str(error.value) and "export saved-model" in str(error.value)
