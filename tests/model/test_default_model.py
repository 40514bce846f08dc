"""The bundled default model (elmo_tf/presets/sotu): present, loadable, used by the CLI."""

import os
import pathlib

import h5py
import numpy as np
import pytest
from support.paths import ROOT

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.presets.bundled import default_model_files, model_directory

REPO = ROOT
EXAMPLES = REPO / "examples" / "sentences.txt"
TWO_P = 256  # projection_dim P = 128


def test_default_model_files_are_in_the_package():
    options, weights = default_model_files()
    package = pathlib.Path(elmo_tf.__file__).parent / "presets" / "sotu"
    assert pathlib.Path(options) == package / "options.json"
    assert pathlib.Path(weights) == package / "weights.hdf5"
    for name in ("options.json", "weights.hdf5", "vocab.txt", "MODEL_CARD.md"):
        assert os.path.isfile(os.path.join(model_directory(), name)), name
    card = (package / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "TO FILL" not in card


def test_load_pretrained_default_model():
    model = elmo_tf.load_pretrained(*default_model_files())
    assert model.config.projection_dim == TWO_P // 2
    out = model.embed([["The", "cat", "sat", "."], ["Hello", "!"]])
    assert out["elmo"].shape == (2, 4, TWO_P)
    assert out["default"].shape == (2, TWO_P)
    assert out["lstm_outputs2"].shape == (2, 4, TWO_P)
    assert np.all(np.isfinite(out["elmo"])) and np.abs(out["elmo"][0]).max() > 0


def test_embed_and_export_use_the_default_model(tmp_path, capsys):
    output = tmp_path / "default.hdf5"
    assert main(["embed", str(EXAMPLES), str(output)]) == 0, capsys.readouterr().err
    explicit = tmp_path / "explicit.hdf5"
    options, weights = default_model_files()
    argv = ["embed", str(EXAMPLES), str(explicit), "--options", options, "--weights", weights]
    assert main(argv) == 0
    lines = EXAMPLES.read_text(encoding="utf-8").splitlines()
    with h5py.File(output, "r") as got, h5py.File(explicit, "r") as want:
        for i, line in enumerate(lines):
            assert got[str(i)].shape == (3, len(line.split()), TWO_P)
            np.testing.assert_array_equal(got[str(i)][...], want[str(i)][...])


def test_from_preset_loads_bundled_models_directories_and_architectures(tmp_path):
    sotu = elmo_tf.ELMo.from_preset("sotu")
    reference = elmo_tf.load_pretrained(*default_model_files())
    for a, b in zip(sotu.get_weights(), reference.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert elmo_tf.ELMo.from_preset("default").config == sotu.config
    # a directory with options.json + weights.hdf5, as dump-weights writes it
    directory = tmp_path / "model"
    directory.mkdir()
    options, weights = default_model_files()
    (directory / "options.json").write_bytes(pathlib.Path(options).read_bytes())
    (directory / "weights.hdf5").write_bytes(pathlib.Path(weights).read_bytes())
    from_dir = elmo_tf.ELMo.from_preset(directory)
    np.testing.assert_array_equal(from_dir.get_weights()[0], sotu.get_weights()[0])
    # a published model: its architecture offline; its weights downloaded (tests/test_downloads.py)
    small = elmo_tf.ELMo.from_preset("small", load_weights=False)
    assert (small.config.projection_dim, small.config.lstm_dim) == (128, 1024)
    with pytest.raises(ValueError, match="needs .*weights.hdf5"):
        (directory / "weights.hdf5").unlink()
        elmo_tf.ELMo.from_preset(directory)
    with pytest.raises(ValueError, match="'nope' is neither the bundled model"):
        elmo_tf.ELMo.from_preset("nope")
    # files that are there but cannot be read are named as what they are, not as missing
    (directory / "weights.hdf5").write_bytes(pathlib.Path(weights).read_bytes())
    (directory / "options.json").unlink()
    os.mkfifo(directory / "options.json")
    with pytest.raises(ValueError, match=r"options.json: is a named pipe, not an options file"):
        elmo_tf.ELMo.from_preset(directory)
    (directory / "options.json").unlink()
    (directory / "options.json").symlink_to(tmp_path / "gone.json")
    with pytest.raises(ValueError, match=r"options.json: options file not found"):
        elmo_tf.ELMo.from_preset(directory)


def test_shipped_files_stay_small_and_evaluate_alone(tmp_path, capsys):
    """The bundled model ships its softmax (float16) so that `elmo-tf evaluate` works on the
    package's files alone, and all of it stays within 20 MB."""
    import json

    directory = pathlib.Path(model_directory())
    total = sum(p.stat().st_size for p in directory.iterdir())
    assert total <= 20 * 10**6, total
    held_out = tmp_path / "held_out.txt"
    held_out.write_text(
        "The Congress passed the bill .\nOur economy is growing again .\n", encoding="utf-8"
    )
    assert main(["evaluate", str(directory), str(held_out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["predictions"] == 12 + 2
    vocabulary_size = len((directory / "vocab.txt").read_text(encoding="utf-8").splitlines())
    assert 1.0 < result["perplexity"] < vocabulary_size / 10
