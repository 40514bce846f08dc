"""ElmoConfig: reading, validating and writing options.json."""

import dataclasses
import json
import os
import time

import pytest
from support.paths import FIXTURES, TINY

import elmo_tf
from elmo_tf.config import ElmoConfig, OptionsError
from elmo_tf.formats import options_file
from elmo_tf.system.environment import EnvironmentVariableError


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
    from elmo_tf import presets
    from elmo_tf.presets import bundled

    options_file, _ = bundled.default_model_files()
    assert presets.TRAINING_DEFAULT == ElmoConfig.from_file(options_file)


def test_every_config_field_is_one_row_of_the_options_table():
    attributes = [field.attribute for field in options_file.FIELDS]
    assert sorted(attributes) == sorted(f.name for f in dataclasses.fields(ElmoConfig))
    keys = [field.key for field in options_file.FIELDS]
    assert len(set(keys)) == len(keys) == len(attributes)
    # The typo check knows each key, a nested section as a key of its parent.
    assert options_file.KNOWN_KEYS["char_cnn"] == (
        "activation",
        "embedding",
        "filters",
        "max_characters_per_token",
        "n_characters",
        "n_highway",
    )
    assert options_file.KNOWN_KEYS["char_cnn.embedding"] == ("dim",)
    config = ElmoConfig.from_file(TINY / "options.json")
    options = config.to_options()
    for field in options_file.FIELDS:
        if getattr(config, field.attribute) is None or field.optional:
            continue  # the format extension's keys, left out at their defaults
        key = field.key
        node = options
        for part in key.split("."):
            node = node[part]  # every key written back


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
        (lambda o: o["lstm"].update(cell_clip=-1), "'lstm.cell_clip' must be a finite positive"),
        (lambda o: o["lstm"].update(cell_clip=0), "'lstm.cell_clip' must be a finite positive"),
        (lambda o: o["lstm"].update(proj_clip=0.0), "'lstm.proj_clip' must be a finite positive"),
        (lambda o: o["char_cnn"].update(filters=[[1, 0]]), r"has an invalid entry \[1, 0\]"),
        (lambda o: o["char_cnn"].update(filters=[[0, 8]]), r"has an invalid entry \[0, 8\]"),
        (lambda o: o["char_cnn"].update(filters=[[51, 8]]), r"has an invalid entry \[51, 8\]"),
        (lambda o: o["char_cnn"].update(filters=[]), "must list at least one"),
        (lambda o: o["lstm"].update(dim=0), "'lstm.dim' must be a positive integer, got 0"),
        (lambda o: o["lstm"].update(n_layers=0), "'lstm.n_layers' must be a positive integer"),
        (lambda o: o["char_cnn"].update(n_highway=-1), "'char_cnn.n_highway' must be a non-neg"),
        (
            lambda o: o["char_cnn"].update(max_characters_per_token=20),
            "'char_cnn.max_characters_per_token' must be 50",
        ),
        (  # not "'char_cnn.filters' has an invalid entry": the key at fault is named
            lambda o: o["char_cnn"].update(max_characters_per_token=0),
            "'char_cnn.max_characters_per_token' must be 50",
        ),
        (
            lambda o: o["lstm"].update(cel_clip=3),
            "'lstm.cel_clip' is not a key of the options format; did you mean 'lstm.cell_clip'",
        ),
        (lambda o: o["lstm"].update(n_layer=1), "did you mean 'lstm.n_layers'"),
        (lambda o: o["char_cnn"].update(embeding={"dim": 4}), "did you mean 'char_cnn.embedding'"),
        (
            lambda o: o["char_cnn"]["embedding"].update(dims=4),
            "did you mean 'char_cnn.embedding.dim'",
        ),
        (lambda o: o["lstm"].update(proj_clips=3), "did you mean 'lstm.proj_clip'"),
        # wrong types
        (lambda o: o["lstm"].update(dim=True), "'lstm.dim' must be an integer, got True"),
        (lambda o: o["lstm"].update(dim=[4096]), "'lstm.dim' must be an integer, got \\[4096\\]"),
        (lambda o: o["lstm"].update(dim=32.0), "'lstm.dim' must be an integer, got 32.0"),
        (lambda o: o["lstm"].update(n_layers=None), "'lstm.n_layers' must be an integer"),
        (lambda o: o["lstm"].update(cell_clip="3"), "'lstm.cell_clip' must be a number, got '3'"),
        (lambda o: o["lstm"].update(proj_clip=[3]), "'lstm.proj_clip' must be a number"),
        (lambda o: o["lstm"].update(cell_clip=False), "'lstm.cell_clip' must be a number"),
        (
            lambda o: o["lstm"].update(use_skip_connections="false"),
            "'lstm.use_skip_connections' must be true or false, got 'false'",
        ),
        (lambda o: o["char_cnn"].update(filters=[[1, True]]), "'char_cnn.filters' must be a list"),
        (lambda o: o["char_cnn"].update(filters=[[1, 2.5]]), "'char_cnn.filters' must be a list"),
        (lambda o: o["char_cnn"].update(filters="[[1, 8]]"), "'char_cnn.filters' must be a list"),
        (lambda o: o["char_cnn"].update(activation=["relu"]), "'char_cnn.activation' must be one"),
        (lambda o: o["char_cnn"].update(embedding=16), "'char_cnn.embedding' must be a JSON obj"),
        (lambda o: o.update(lstm=[1, 2]), "'lstm' must be a JSON object, got \\[1, 2\\]"),
        (lambda o: o["char_cnn"].update(n_characters=262.0), "'char_cnn.n_characters' must be an"),
    ],
)
def test_bad_options_name_key_and_file(tmp_path, mutate, message):
    """A missing key, a value of the wrong type or out of its range, a misspelt key: one
    line naming the file and the key."""
    options = _tiny_options()
    mutate(options)
    path = _write(tmp_path, options)
    with pytest.raises(OptionsError, match=message) as info:
        ElmoConfig.from_file(path)
    assert str(path) in str(info.value)


def test_other_unknown_keys_stay_accepted(tmp_path):
    """Official files carry bilm-tf's training settings; they are no typo of a model key."""
    options = _tiny_options()
    options.update(n_epochs=10, unroll_steps=20, all_clip_norm_val=10.0, bidirectional=True)
    options["lstm"]["use_skip_connections_in_training"] = True
    assert ElmoConfig.from_file(_write(tmp_path, options)) == ElmoConfig.from_file(
        TINY / "options.json"
    )


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


def _write_text(tmp_path, text, name="options.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '"cell_clip": NaN',
            "'lstm.cell_clip' must be a finite positive number or absent, got nan",
        ),
        (
            '"cell_clip": Infinity',
            "'lstm.cell_clip' must be a finite positive number or absent, got inf",
        ),
        ('"proj_clip": -Infinity', "'lstm.proj_clip' must be a finite positive number"),
        (
            '"proj_clip": 1e400',
            "'lstm.proj_clip' must be a finite positive number or absent, got inf",
        ),
        ('"cell_clip": 1' + "0" * 400, "'lstm.cell_clip' must be a finite positive number"),
        ('"dim": 1e400', "'lstm.dim' must be an integer, got inf"),
        ('"dim": 1' + "0" * 5000, "not a valid JSON options file"),
    ],
)
def test_non_finite_and_out_of_range_numbers(tmp_path, text, message):
    """bilm-tf's JSON allows NaN/Infinity and 1e400 parses to inf: none may reach the model."""
    options = json.dumps(_tiny_options())
    key = text.split(":")[0]
    options = options.replace(key + ": ", text + ', "unused_' + key.strip('"') + '": ', 1)
    path = _write_text(tmp_path, options)
    with pytest.raises(OptionsError, match=message) as info:
        ElmoConfig.from_file(path)
    assert str(path) in str(info.value)
    assert len(str(info.value)) < 300  # one readable line, not the 5000 digits


def test_huge_values_are_shortened_in_messages(tmp_path):
    options = _tiny_options()
    options["char_cnn"]["filters"] = [[1, "x" * 1_000]] * 500
    with pytest.raises(OptionsError, match="'char_cnn.filters' must be a list") as info:
        ElmoConfig.from_file(_write(tmp_path, options))
    assert len(str(info.value)) < 500


def test_deeply_nested_json(tmp_path):
    path = _write_text(tmp_path, '{"lstm": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(OptionsError, match="not a valid JSON options file \\(nested too deeply\\)"):
        ElmoConfig.from_file(path)
    # Nesting inside the limit of the parser is still cut short in the message.
    options = _tiny_options()
    nested = 1
    for _ in range(500):
        nested = [nested]
    options["lstm"]["dim"] = nested
    with pytest.raises(OptionsError, match="'lstm.dim' must be an integer") as info:
        ElmoConfig.from_file(_write(tmp_path, options))
    assert len(str(info.value)) < 300


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda o: o["lstm"].update(dim=10**6),
            "'lstm.dim' is 1000000, above the dimension limit of 32768",
        ),
        (
            lambda o: o["lstm"].update(projection_dim=10**6),
            "'lstm.projection_dim' is 1000000, above the dimension limit of 32768",
        ),
        (
            lambda o: o["char_cnn"]["embedding"].update(dim=10**6),
            "'char_cnn.embedding.dim' is 1000000, above",
        ),
        (lambda o: o["char_cnn"].update(filters=[[1, 10**6]]), "'char_cnn.filters' is 1000000"),
        (lambda o: o["char_cnn"].update(filters=[[1, 30_000]] * 2), "'char_cnn.filters' is 60000"),
        (
            lambda o: o["lstm"].update(n_layers=10**6),
            "'lstm.n_layers' is 1000000, above the layers limit of 32",
        ),
        (lambda o: o["char_cnn"].update(n_highway=10**9), "'char_cnn.n_highway' is 1000000000"),
        (lambda o: o["char_cnn"].update(filters=[[1, 1]] * 33), "'char_cnn.filters' is 33, above"),
        (
            lambda o: o["lstm"].update(dim=10**400),
            r"'lstm.dim' is 10{10,}\.\.\.0+, above the dimension limit of 32768",
        ),
        (
            lambda o: o["lstm"].update(dim=32_000, projection_dim=32_000),
            "the model has 36866091120 parameters, above the parameters limit of 1000000000 "
            "\\(raise it with size_limits={'parameters': ...} or ELMO_TF_MAX_PARAMETERS\\)",
        ),
    ],
)
def test_sizes_are_bounded_before_anything_is_built(tmp_path, mutate, message):
    options = _tiny_options()
    mutate(options)
    path = _write(tmp_path, options)
    start = time.perf_counter()
    with pytest.raises(OptionsError, match=message) as info:
        elmo_tf.load_pretrained(path, tmp_path / "never_opened.hdf5")
    assert time.perf_counter() - start < 1.0  # refused from the numbers, nothing allocated
    assert str(path) in str(info.value)


def test_size_limits_can_be_raised(tmp_path, monkeypatch):
    options = _tiny_options()
    options["lstm"]["n_layers"] = 40
    path = _write(tmp_path, options)
    with pytest.raises(OptionsError, match="ELMO_TF_MAX_LAYERS"):
        ElmoConfig.from_file(path)
    assert ElmoConfig.from_file(path, size_limits={"layers": 40}).n_lstm_layers == 40
    assert ElmoConfig.from_file(path, size_limits={"layers": None}).n_lstm_layers == 40
    monkeypatch.setenv("ELMO_TF_MAX_LAYERS", "64")
    assert ElmoConfig.from_file(path).n_lstm_layers == 40
    with pytest.raises(OptionsError, match="'lstm.n_layers' is 40, above the layers limit of 39"):
        ElmoConfig.from_file(path, size_limits={"layers": 39})  # the argument wins
    monkeypatch.setenv("ELMO_TF_MAX_LAYERS", "lots")
    with pytest.raises(
        EnvironmentVariableError, match="ELMO_TF_MAX_LAYERS must be a positive integer, got 'lots'"
    ):
        ElmoConfig.from_file(path)
    monkeypatch.delenv("ELMO_TF_MAX_LAYERS")
    with pytest.raises(OptionsError, match="unknown limit 'depth'"):
        ElmoConfig.from_file(TINY / "options.json", size_limits={"depth": 3})


def test_options_file_faults_are_one_line_naming_the_file(tmp_path):
    cases = {
        "missing": (tmp_path / "absent.json", "options file not found"),
        "directory": (tmp_path, "is a directory, not an options file"),
        "empty": (_write_text(tmp_path, "", "empty.json"), "options file is empty"),
        "blank": (_write_text(tmp_path, " \n\t", "blank.json"), "options file is empty"),
        "truncated": (
            _write_text(tmp_path, (TINY / "options.json").read_text()[:40], "cut.json"),
            "not a valid JSON options file",
        ),
        "hdf5": (
            TINY / "weights.hdf5",
            "not a valid JSON options file \\(not UTF-8 text: byte 0\\)",
        ),
        "huge": (
            _write_text(tmp_path, " " * (2 << 20) + "{}", "huge.json"),
            "larger than 1048576 bytes, not an options file",
        ),
    }
    for name, (path, message) in cases.items():
        with pytest.raises(OptionsError, match=message) as info:
            ElmoConfig.from_file(path)
        text = str(info.value)
        assert text.startswith(f"{path}: ") and "\n" not in text, name


def test_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + (TINY / "options.json").read_bytes())
    assert ElmoConfig.from_file(path) == ElmoConfig.from_file(TINY / "options.json")


def test_direct_construction_is_validated():
    config = ElmoConfig.from_file(TINY / "options.json")
    fields = dataclasses.asdict(config)
    for change, message in [
        ({"cell_clip": float("nan")}, "'lstm.cell_clip' must be a finite positive"),
        ({"proj_clip": float("inf")}, "'lstm.proj_clip' must be a finite positive"),
        ({"filters": ((1, "8"),)}, "'char_cnn.filters' must be a list"),
        ({"filters": ((1, True),)}, "'char_cnn.filters' must be a list"),
        ({"filters": ((1, 8, 3),)}, "'char_cnn.filters' has an entry \\[1, 8, 3\\]"),
        ({"use_skip_connections": "no"}, "'lstm.use_skip_connections' must be true or false"),
    ]:
        with pytest.raises(OptionsError, match=message):
            ElmoConfig(**{**fields, **change})


def test_a_key_given_twice_is_refused(tmp_path):
    # JSON keeps the last of two equal keys silently: the file would show one value and mean
    # another (a second "lstm" object hid the first one's projection_dim).
    text = (FIXTURES / "tiny" / "options.json").read_text()
    path = tmp_path / "twice.json"
    path.write_text(text[: text.rindex("}")] + ', "lstm": {"dim": 7}}')
    with pytest.raises(OptionsError, match="the key 'lstm' appears twice in one object"):
        ElmoConfig.from_file(path)


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "options.json"
    os.mkfifo(fifo)
    with pytest.raises(OptionsError, match="options.json: is a named pipe, not an options file"):
        ElmoConfig.from_file(fifo)


def test_the_smallest_values_each_rule_allows_are_accepted(tmp_path):
    """The other side of each edge refused above: a tiny clip, width 1 and width 50 (a
    filter over the whole token), one filter, no highway layer, one LSTM layer."""
    options = _tiny_options()
    options["lstm"].update(cell_clip=1e-30, proj_clip=1, n_layers=1)
    options["char_cnn"].update(filters=[[1, 1], [50, 1]], n_highway=0)
    config = ElmoConfig.from_file(_write(tmp_path, options))
    assert (config.cell_clip, config.proj_clip, config.n_lstm_layers) == (1e-30, 1.0, 1)
    assert (config.filters, config.n_highway) == (((1, 1), (50, 1)), 0)


def test_a_file_giving_only_the_required_keys_gets_the_tables_defaults(tmp_path):
    """What each optional key means when a file leaves it out (``options_file.FIELDS``):
    skip connections on, no clipping, two LSTM layers, 262 character ids, 50 per token,
    bilm-tf's byte ids and no word embedding."""
    options = {
        "lstm": {"projection_dim": 16, "dim": 32},
        "char_cnn": {
            "filters": [[1, 8], [2, 8]],
            "activation": "tanh",
            "n_highway": 1,
            "embedding": {"dim": 16},
        },
    }
    config = ElmoConfig.from_file(_write(tmp_path, options))
    assert dataclasses.asdict(config) == {
        "filters": ((1, 8), (2, 8)),
        "char_embedding_dim": 16,
        "n_highway": 1,
        "activation": "tanh",
        "projection_dim": 16,
        "lstm_dim": 32,
        "n_lstm_layers": 2,
        "cell_clip": None,
        "proj_clip": None,
        "use_skip_connections": True,
        "max_characters_per_token": 50,
        "n_characters": 262,
        "character_scheme": "utf8-bytes",  # bilm-tf's ids; no word embedding
        "special_characters": None,
        "n_words": 0,
        "special_words": None,
        "word_embedding_dim": 0,
    }
    # written back whole, but for the clips it has none of
    assert config.to_options()["lstm"] == {
        "use_skip_connections": True,
        "projection_dim": 16,
        "dim": 32,
        "n_layers": 2,
    }


@pytest.mark.parametrize(
    "mutate",
    [
        lambda o: o["lstm"].update(dim=10**4000),
        lambda o: o["lstm"].update(projection_dim=10**4000),
        lambda o: o["lstm"].update(n_layers=10**4000),
        lambda o: o["char_cnn"].update(filters=[[1, 10**4000]]),
        lambda o: o["char_cnn"]["embedding"].update(dim=10**400),
    ],
    ids=["dim", "projection_dim", "n_layers", "a filter's count", "embedding.dim"],
)
def test_a_huge_integer_over_a_size_limit_is_shown_cut(tmp_path, mutate):
    """docs/robustness.md: a value is shown cut to at most 120 characters (the size limits'
    messages printed a 4,000-digit integer whole)."""
    options = _tiny_options()
    mutate(options)
    with pytest.raises(OptionsError, match="above the .* limit of") as info:
        ElmoConfig.from_file(_write(tmp_path, options))
    assert len(str(info.value)) < 300 and "..." in str(info.value)
