"""ElmoConfig: reading, validating and writing options.json."""

import json

import pytest
from conftest import FIXTURES, TINY

import elmo_tf
from elmo_tf.config import ElmoConfig, OptionsError


def _write(tmp_path, options):
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    return path


def _tiny_options():
    return json.loads((TINY / "options.json").read_text())


def test_reads_tiny_options():
    config = ElmoConfig.from_file(TINY / "options.json")
    assert config.filters == ((1, 8), (2, 8), (3, 16), (4, 16))
    assert (config.n_filters, config.projection_dim, config.lstm_dim) == (48, 16, 32)
    assert (config.cell_clip, config.proj_clip, config.n_highway) == (3.0, 3.0, 1)
    assert config.output_dim == 32


@pytest.mark.parametrize(
    "name, file",
    [
        ("small", "elmo_2x1024_128_2048cnn_1xhighway_options.json"),
        ("original", "elmo_2x4096_512_2048cnn_2xhighway_options.json"),
    ],
)
def test_presets_equal_published_options(name, file):
    published = ElmoConfig.from_file(FIXTURES / "official_options" / file)
    assert elmo_tf.preset(name) == published
    assert ElmoConfig.from_options(published.to_options()) == published


def test_training_default_is_the_bundled_models_architecture():
    from elmo_tf import presets, pretrained

    options_file, _ = pretrained.default_model_files()
    assert presets.TRAINING_DEFAULT == ElmoConfig.from_file(options_file)


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        elmo_tf.preset("huge")


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda o: o["lstm"].pop("projection_dim"), "missing key 'lstm.projection_dim'"),
        (lambda o: o.pop("char_cnn"), "missing key 'char_cnn.filters'"),
        (lambda o: o["lstm"].update(dim="1024"), "'lstm.dim' must be an integer"),
        (lambda o: o["char_cnn"].update(filters=[[1, 2, 3]]), "'char_cnn.filters' must be a list"),
        (lambda o: o["char_cnn"].update(activation="gelu"), "'char_cnn.activation' must be one"),
        (lambda o: o["char_cnn"].update(n_characters=300), "'char_cnn.n_characters' must be 261"),
        (lambda o: o["lstm"].update(cell_clip=-1), "'lstm.cell_clip' must be positive"),
        (
            lambda o: o["char_cnn"].update(max_characters_per_token=20),
            "'char_cnn.max_characters_per_token' must be 50",
        ),
    ],
)
def test_bad_options_name_key_and_file(tmp_path, mutate, message):
    options = _tiny_options()
    mutate(options)
    path = _write(tmp_path, options)
    with pytest.raises(OptionsError, match=message) as info:
        ElmoConfig.from_file(path)
    assert str(path) in str(info.value)


def test_unreadable_options_files(tmp_path):
    with pytest.raises(OptionsError, match="options file not found"):
        ElmoConfig.from_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(OptionsError, match="not a valid JSON options file"):
        ElmoConfig.from_file(bad)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(OptionsError, match="not a valid JSON"):
        ElmoConfig.from_file(binary)
    array = _write(tmp_path, [1, 2])
    with pytest.raises(OptionsError, match="expected a JSON object"):
        ElmoConfig.from_file(array)


def test_n_characters_261_is_accepted(tmp_path):
    options = _tiny_options()
    options["char_cnn"]["n_characters"] = 261  # bilm-tf's training options
    assert ElmoConfig.from_file(_write(tmp_path, options)).n_characters == 261


def test_save_round_trip(tmp_path):
    config = ElmoConfig.from_file(TINY / "options.json")
    config.save(tmp_path / "out.json")
    assert ElmoConfig.from_file(tmp_path / "out.json") == config
    assert json.loads((tmp_path / "out.json").read_text()) == _tiny_options()
