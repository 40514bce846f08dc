"""ELMoForManyLangs (EFML) models read as data, no model built: their dictionaries, config and
folder (``elmo_tf.foreign.efml_folder``), the code-point mapping (``elmo_tf.tokens.codepoints``)
against the ids EFML gave, and the format extension. The numbers are
tests/model/test_efml_model.py's."""

import json
import re
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.foreign_models import EFML_TINY, efml_golden
from support.paths import FIXTURES

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ForeignModelError, OptionsError, WeightFileError
from elmo_tf.foreign import efml_dictionaries, efml_folder
from elmo_tf.kinds import efml_conversion
from elmo_tf.tokens import codepoints


@pytest.fixture
def folder(tmp_path):
    """A copy of the tiny EFML model folder, for a test to change."""
    target = tmp_path / "model"
    shutil.copytree(EFML_TINY, target)
    return target


def test_a_dictionary_reads_as_efml_reads_it():
    data = "a\t0\n\u3000\t1\n\u00a0\t2\n<pad>\t3\n".encode()
    # EFML's loop keeps the last id of U+3000; a second whitespace line is refused here
    with pytest.raises(ForeignModelError, match=re.escape(r"line 3 gives '\u3000' again")):
        efml_dictionaries.parse_dictionary(data, "char.dic")
    lexicon = efml_dictionaries.parse_dictionary(b"a\t0\n \t1\nb\t2", "char.dic")
    assert lexicon == {"a": 0, "\u3000": 1, "b": 2}  # a space line strips to its id alone


def test_the_fixture_dictionaries_read_with_the_ids_efml_gave():
    chars = efml_dictionaries.read_dictionary(EFML_TINY / "char.dic")
    words = efml_dictionaries.read_dictionary(EFML_TINY / "word.dic")
    assert chars["<"] == 0 and chars["\u3000"] == chars["中"] - 1
    assert [chars[f"<{n}>"] for n in codepoints.CHAR_SPECIALS] == list(range(120, 126))
    assert words["<oov>"] == 0 and words["é" * 48] == 29


@pytest.mark.parametrize(
    "data, message",
    [
        (b"a\t0\n\nb\t1\n", "char.dic: line 2 is empty"),
        (b"a\t0\na\t1\n", "char.dic: line 2 gives 'a' again (first on line 1"),
        (b"a\t0\nb\t0\n", "char.dic: line 2 gives the id 0 again (first on line 1)"),
        (b"a\t0\nb\tc\t1\n", "char.dic: line 2 has 3 tab-separated fields"),
        (b"a\tx\n", "char.dic: line 1: the id 'x' is not a decimal number"),
        (b"a\t-1\n", "the id '-1' is not a decimal number"),
        (b"a\t0\n\xff\t1\n", "char.dic: line 2: not UTF-8 text"),
        ("a\t0\n\u2028\t1\n".encode(), "char.dic: line 2 is empty"),  # EFML splits there
    ],
)
def test_a_broken_dictionary_is_refused_naming_its_line(data, message):
    with pytest.raises(ForeignModelError, match=re.escape(message)) as error:
        efml_dictionaries.parse_dictionary(data, "char.dic")
    assert "\n" not in str(error.value)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_the_dictionary_parser(data):
    try:
        lexicon = efml_dictionaries.parse_dictionary(data)
    except ForeignModelError as e:
        assert "\n" not in str(e)
    else:
        assert len(set(lexicon.values())) == len(lexicon)


def test_the_config_path_of_another_machine_falls_back_to_the_folder(folder):
    config, source = efml_folder.resolve_config(folder)
    assert source == str(folder / "cnn_tiny.json")
    assert config.filters == ((1, 4), (2, 4), (3, 6)) and config.word_dim == 3
    assert (config.cell_clip, config.proj_clip) == (0.5, 0.4)


def _set_config_path(folder, path):
    options = json.loads((folder / "config.json").read_text())
    options["config_path"] = path
    (folder / "config.json").write_text(json.dumps(options))


def test_the_config_is_looked_for_in_configs_and_by_its_relative_path(folder):
    (folder / "configs").mkdir()
    (folder / "cnn_tiny.json").rename(folder / "configs" / "cnn_tiny.json")
    assert efml_folder.resolve_config(folder)[1] == str(folder / "configs" / "cnn_tiny.json")
    (folder / "configs" / "cnn_tiny.json").rename(folder / "other.json")
    _set_config_path(folder, "other.json")
    assert efml_folder.resolve_config(folder)[1] == str(folder / "other.json")


def test_the_standard_config_name_without_a_file_is_efmls_standard_config(folder):
    (folder / "cnn_tiny.json").unlink()
    _set_config_path(folder, "/Users/x/models/word_elmo/cnn_50_100_512_4096_sample.json")
    config, source = efml_folder.resolve_config(folder)
    assert source == "standard"
    assert config.filters[-1] == (7, 1024) and (config.projection_dim, config.dim) == (512, 4096)
    assert (config.word_dim, config.char_dim, config.n_highway) == (100, 50, 2)


def test_a_config_path_outside_the_folder_is_never_opened(folder, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"encoder": {}}))  # would fail loudly if it were read
    (folder / "cnn_tiny.json").unlink()
    for path in (str(outside), "../outside.json"):
        _set_config_path(folder, path)
        with pytest.raises(ForeignModelError) as error:
            efml_folder.resolve_config(folder)
        message = str(error.value)
        # what was looked for, inside the folder; never the path outside, which is not read
        assert message.endswith(
            "names no model config in the folder (configs/outside.json, outside.json); put it there"
        )
        assert len(message) - len(str(folder)) < 200, message
    # a link in the folder that leads out of it is not followed either
    (folder / "outside.json").symlink_to(outside)
    with pytest.raises(ForeignModelError, match="names no model config in the folder"):
        efml_folder.resolve_config(folder)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["encoder"].update(name="lstm"), "only EFML's 'elmo' encoder"),
        (
            lambda c: c["token_embedder"].update(name="lstm"),
            "only EFML's 'cnn' token embedder",
        ),
        (lambda c: c["token_embedder"].update(filters=[[60, 4]]), "'token_embedder.filters'"),
        (lambda c: c["token_embedder"].update(max_characters_per_token=40), "must be 50"),
        (lambda c: c["encoder"].update(dim="10"), "'encoder.dim' must be a positive integer"),
        (lambda c: c["encoder"].update(cell_clip=-1), "'encoder.cell_clip' must be"),
        (lambda c: c.pop("encoder"), "'encoder' must be a JSON object"),
    ],
)
def test_a_bad_model_config_is_refused_naming_the_key(change, message):
    config = json.loads((EFML_TINY / "cnn_tiny.json").read_text())
    change(config)
    with pytest.raises(ForeignModelError, match=message):
        efml_folder.parse_model_config(json.dumps(config).encode(), "cnn_tiny.json")


def test_a_config_json_without_a_config_path_is_refused():
    with pytest.raises(ForeignModelError, match="'config_path' must name the model config"):
        efml_folder.parse_train_config(b'{"seed": 1}', "config.json")


def _rewrite_dic(path, lines):
    path.write_text("".join(f"{token}\t{i}\n" for token, i in lines), encoding="utf-8")


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda f: (f / "encoder.pkl").unlink(), r"encoder.pkl: missing"),
        (
            lambda f: _rewrite_dic(
                f / "char.dic", list(efml_dictionaries.read_dictionary(f / "char.dic").items())[:-1]
            ),  # fmt: skip
            r"char.dic: lacks <eow>",
        ),
        (
            lambda f: _rewrite_dic(
                f / "char.dic",
                [("ζ", 126), *efml_dictionaries.read_dictionary(f / "char.dic").items()],
            ),  # fmt: skip
            r"token_embedder.pkl: char_emb_layer.embedding.weight has shape \(126, 4\), "
            r"expected \(127, 4\)",
        ),
        (
            lambda f: (f / "cnn_tiny.json").write_text(
                (f / "cnn_tiny.json").read_text().replace('"word_dim": 3', '"word_dim": 5')
            ),
            r"word_emb_layer.embedding.weight has shape \(32, 3\), expected \(32, 5\)",
        ),
        (
            lambda f: (f / "cnn_tiny.json").write_text(
                (f / "cnn_tiny.json").read_text().replace('"n_layers": 2', '"n_layers": 1')
            ),
            r"encoder.pkl: holds forward_layer_1.input_linearity.weight, which the model config",
        ),
        (
            lambda f: (f / "cnn_tiny.json").write_text(
                (f / "cnn_tiny.json").read_text().replace('"dim": 10', '"dim": 12')
            ),
            r"encoder.pkl: forward_layer_0.input_linearity.weight has shape \(40, 6\), "
            r"expected \(48, 6\)",
        ),
    ],
)
def test_a_folder_whose_files_disagree_is_refused_naming_the_file(folder, break_it, message):
    break_it(folder)
    with pytest.raises(ForeignModelError, match=message) as error:
        efml_folder.read_folder(folder)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e39], ids=["NaN", "inf", "past float32"])
def test_weights_that_are_no_float32_values_are_refused_naming_the_tensor(folder, value):
    """Converted, they would be written, then refused by every load."""
    from support import torch_pickles

    from elmo_tf.foreign.torch_state_dict import read_state_dict

    tensors = read_state_dict(folder / "encoder.pkl")
    name = "forward_layer_1.state_linearity.bias"
    tensors[name] = tensors[name].astype(np.float64)
    tensors[name][3] = value
    (folder / "encoder.pkl").write_bytes(torch_pickles.legacy_bytes(tensors))
    with pytest.raises(ForeignModelError) as error:
        efml_folder.read_folder(folder)
    assert str(error.value) == (
        f"{folder / 'encoder.pkl'}: {name} holds NaN, infinity or values past float32's range; "
        "the model cannot be converted"
    )


def test_a_dictionary_longer_than_its_table_can_be_is_refused_before_it_is_read(folder):
    """token_embedder.pkl holds a row per entry: 500,000 lines cannot fit the tiny one's bytes,
    and are refused before a table is built (which would cost far more than the file)."""
    from elmo_tf.testing.memory import peak_bytes

    data = "".join(f"c{i}\t{i}\n" for i in range(500_000)).encode()
    (folder / "char.dic").write_bytes(data)
    error, peak = peak_bytes(efml_folder.read_folder, folder)
    assert isinstance(error, ForeignModelError)
    rows = (folder / "token_embedder.pkl").stat().st_size // (2 * 4)  # char_dim 4
    assert str(error) == (
        f"{folder / 'char.dic'}: holds 500,000 lines, more than the {rows:,} entries its table "
        "can have"
    )
    assert peak < 2 * len(data) + (1 << 20), f"{peak:,} bytes for a {len(data):,}-byte file"


@pytest.mark.parametrize(
    "data, lines",
    [(b"", 1), (b"a\t0", 1), (b"a\t0\n", 1), (b"a\t0\r\nb\t1\r\n", 2), (b"a\t0\rb\t1", 2),
     ("a\t0\u2028b\t1\x85c\t2".encode(), 3), ("ą\t0\n".encode(), 1)],
)  # fmt: skip
def test_the_line_bound_is_at_least_what_splitlines_makes(data, lines):
    assert efml_dictionaries.line_count_bound(data) == lines >= len(data.decode().splitlines())


def test_a_dictionary_whose_ids_skip_one_is_refused(folder):
    words = list(efml_dictionaries.read_dictionary(folder / "word.dic").items())
    words[-1] = (words[-1][0], 40)  # 32 entries, ids up to 40: the table has 32 rows
    _rewrite_dic(folder / "word.dic", words)
    with pytest.raises(ForeignModelError, match="word.dic: ids run to 40 for 32 entries"):
        efml_folder.read_folder(folder)


def _converted():
    return efml_conversion.convert(efml_folder.read_folder(EFML_TINY))


def test_the_converted_config_round_trips_through_options_json(tmp_path):
    config, _ = _converted()
    options = config.to_options()
    assert options["characters"] == {
        "scheme": "codepoints",
        "special_ids": dict(zip(codepoints.CHAR_SPECIALS, range(121, 127))),
    }
    assert options["word_embedding"] == {
        "dim": 3,
        "n_words": 33,
        "special_ids": {"oov": 1, "bos": 2, "eos": 3, "pad": 4},
    }
    assert options["char_cnn"]["n_characters"] == 127
    config.save(tmp_path / "options.json")
    assert ElmoConfig.from_file(tmp_path / "options.json") == config
    assert config.describe() == "2x10_6_14cnn_2xhighway_3word" and config.id_width == 51


def test_a_bilm_tf_config_writes_none_of_the_extension():
    options = ElmoConfig.from_file(FIXTURES / "tiny" /
                                   "options.json").to_options()  # fmt: skip
    assert "characters" not in options and "word_embedding" not in options


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda o: o["characters"].update(scheme="bytes"), "'characters.scheme' must be one of"),
        (lambda o: o.pop("characters"), "'char_cnn.n_characters' must be 261 or 262, got 127"),
        (lambda o: o["characters"]["special_ids"].pop("eow"), "'characters.special_ids' must"),
        (
            lambda o: o["characters"]["special_ids"].update(eow=500),
            "'characters.special_ids' must be ids below n_characters",
        ),
        (lambda o: o["word_embedding"].pop("n_words"), "'word_embedding.n_words' and"),
        (
            lambda o: o["word_embedding"]["special_ids"].update(pad=0),
            "'word_embedding.special_ids' must give a positive integer id",
        ),
    ],
)
def test_a_broken_extension_is_refused_naming_the_key(tmp_path, change, message):
    options = _converted()[0].to_options()
    change(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(OptionsError, match=message):
        ElmoConfig.from_file(path)


def test_the_vocabulary_datasets_are_checked_against_the_config():
    config, arrays = _converted()
    vocabulary = codepoints.CodepointVocabulary.from_arrays(config, arrays, "weights.hdf5")
    assert vocabulary.char_table()[ord("é")] == efml_dictionaries.read_dictionary(
        EFML_TINY / "char.dic")["é"] + 1  # fmt: skip
    for name, value, message in [
        ("vocabulary/char_codepoints", np.zeros([5], np.int32), "has shape"),
        ("vocabulary/char_codepoints", np.full([127], 65, np.int32), "gives id 0 or a special"),
        ("vocabulary/word_offsets", arrays["vocabulary/word_offsets"][::-1], "consecutive"),
        ("vocabulary/words", np.zeros([0], np.uint8), "consecutive spans"),  # offsets named
    ]:
        broken = {**arrays, name: value}
        named = "vocabulary/word_offsets" if name == "vocabulary/words" else name
        with pytest.raises(WeightFileError, match=f"weights.hdf5: dataset '{named}' .*{message}"):
            codepoints.CodepointVocabulary.from_arrays(config, broken, "weights.hdf5")


def test_the_mappers_ids_are_efmls_plus_one():
    config, arrays = _converted()
    vocabulary = codepoints.CodepointVocabulary.from_arrays(config, arrays, "weights.hdf5")
    mapper = codepoints.CodepointMapper(config, vocabulary)
    sentences, golden = efml_golden()
    for i, sentence in enumerate(sentences):
        rows = np.stack([mapper.bos_row, *map(mapper.token_row, sentence), mapper.eos_row])
        np.testing.assert_array_equal(rows[:, :50], golden[f"char_ids_{i}"] + 1)
        np.testing.assert_array_equal(rows[:, 50], golden[f"word_ids_{i}"] + 1)
    ids = mapper.batch_to_ids(sentences[:2])
    assert ids.shape == (2, 5, 51) and not ids[0, 4].any()  # a padded position: zeros
    with pytest.raises(ValueError, match="no character table yet"):
        codepoints.CodepointMapper(config).token_row("a")


def test_fuzz_target_of_the_weight_file_reads_the_vocabulary(tmp_path):
    from elmo_tf.formats.weight_file import parse_weight_file, write_arrays

    config, arrays = _converted()
    write_arrays(arrays, tmp_path / "weights.hdf5")
    data = (tmp_path / "weights.hdf5").read_bytes()
    read, vocabulary = parse_weight_file(config, data)
    np.testing.assert_array_equal(vocabulary.char_codepoints, arrays["vocabulary/char_codepoints"])
    assert set(read) == {k for k in arrays if not k.startswith("vocabulary/")}
    with pytest.raises(WeightFileError, match="weight file: not a readable HDF5 weight file"):
        parse_weight_file(config, data[:1000])


def test_a_model_over_the_size_limits_is_refused_naming_the_model_config(folder, monkeypatch):
    monkeypatch.setenv("ELMO_TF_MAX_DIMENSION", "8")
    with pytest.raises(ForeignModelError) as error:
        efml_conversion.convert(efml_folder.read_folder(folder))
    assert str(error.value).startswith(f"{folder / 'cnn_tiny.json'}: 'encoder.dim' is 10, above")


def test_a_dictionary_id_one_past_its_tables_last_row_is_refused(folder):
    """32 entries are rows 0..31: an id of 32 (the others unchanged) is refused in one line."""
    words = list(efml_dictionaries.read_dictionary(folder / "word.dic").items())
    words[-1] = (words[-1][0], len(words))
    _rewrite_dic(folder / "word.dic", words)
    with pytest.raises(ForeignModelError, match="word.dic: ids run to 32 for 32 entries"):
        efml_folder.read_folder(folder)


def test_a_clip_of_0_is_efmls_no_clip():
    """EFML tests `if clip:`: 0 clips nothing (a clip to 0.0 would zero every cell)."""
    config = json.loads((EFML_TINY / "cnn_tiny.json").read_text())
    config["encoder"].update(cell_clip=0, proj_clip=0.0)
    parsed = efml_folder.parse_model_config(json.dumps(config).encode(), "cnn_tiny.json")
    assert (parsed.cell_clip, parsed.proj_clip) == (None, None)
    config["encoder"].update(cell_clip=0.25, proj_clip=None)
    parsed = efml_folder.parse_model_config(json.dumps(config).encode(), "cnn_tiny.json")
    assert (parsed.cell_clip, parsed.proj_clip) == (0.25, None)


def test_the_sentence_markers_word_ids_fall_back_to_oov():
    """A word.dic without <bos> and <eos> (EFML looks them up with <oov>'s id as default)."""
    chars = efml_dictionaries.read_dictionary(EFML_TINY / "char.dic")
    words = {"<oov>": 0, "<pad>": 1, "cat": 2}
    _, _, word_specials = codepoints.CodepointVocabulary.from_lexicons(chars, words)
    assert dict(zip(codepoints.WORD_SPECIALS, word_specials)) == {
        "oov": 1, "bos": 1, "eos": 1, "pad": 2
    }  # fmt: skip
    _, _, word_specials = codepoints.CodepointVocabulary.from_lexicons(
        chars, {**words, "<bos>": 3, "<eos>": 4}
    )
    assert dict(zip(codepoints.WORD_SPECIALS, word_specials))["bos"] == 4


def test_a_character_table_giving_one_code_point_two_ids_is_refused():
    config, arrays = _converted()
    codes = arrays["vocabulary/char_codepoints"].copy()
    first, second = np.flatnonzero(codes >= 0)[:2]
    codes[second] = codes[first]  # two ids, one character: which would it map to?
    with pytest.raises(WeightFileError, match="'vocabulary/char_codepoints' gives one code point"):
        codepoints.CodepointVocabulary.from_arrays(
            config, {**arrays, "vocabulary/char_codepoints": codes}, "weights.hdf5"
        )


@pytest.mark.parametrize("path", ["..", ".", "configs/..", "a/../..", "/x/..", ""])
def test_config_candidates_never_name_the_folder_or_its_parent(path):
    """Found by fuzz/efml_config.py: a config_path of '..' made '..' a place to look."""
    for candidate in efml_folder.config_candidates(path):
        assert candidate not in (".", "..") and not candidate.startswith(".."), candidate


def test_config_candidates_in_order():
    assert efml_folder.config_candidates("configs/cnn.json") == ["configs/cnn.json", "cnn.json"]
    assert efml_folder.config_candidates("/Users/x/cnn.json") == ["configs/cnn.json", "cnn.json"]
    assert efml_folder.config_candidates("../x/cnn.json") == ["configs/cnn.json", "cnn.json"]
    assert efml_folder.config_candidates("sub\\\\cnn.json")[-1] == "cnn.json"


# Each refusal of a folder, a config and a state_dict, as one exact line.


def _refused(read, *args):
    with pytest.raises(ForeignModelError) as error:
        read(*args)
    return str(error.value)


def test_a_path_that_is_no_folder_is_refused(tmp_path):
    for path in (tmp_path / "missing", tmp_path / "file"):
        if path.name == "file":
            path.write_text("{}")
        assert _refused(efml_folder.read_folder, path) == (
            f"{path}: not a directory (an ELMoForManyLangs model folder)"
        )


def test_a_dictionary_without_efmls_special_entries_is_refused_naming_them(folder):
    chars = efml_dictionaries.read_dictionary(folder / "char.dic")
    _rewrite_dic(folder / "char.dic", [(t, i) for t, i in chars.items() if t[1:2] != "b"])
    assert _refused(efml_folder.read_folder, folder) == (
        f"{folder / 'char.dic'}: lacks <bos>, <bow> (EFML's model needs <bos>, <eos>, <oov>, "
        "<pad>, <bow>, <eow>)"
    )
    (folder / "char.dic").write_bytes((EFML_TINY / "char.dic").read_bytes())
    words = efml_dictionaries.read_dictionary(folder / "word.dic")
    _rewrite_dic(folder / "word.dic", [(t, i) for t, i in words.items() if t != "<pad>"])
    assert _refused(efml_folder.read_folder, folder) == (
        f"{folder / 'word.dic'}: lacks <pad> (EFML's model needs <oov>, <pad>)"
    )


def test_a_word_dictionary_longer_than_its_table_can_be_is_refused(folder):
    """token_embedder.pkl's bytes bound the word table's rows at word_dim (3) floats of two
    bytes each at least: one line more than that is refused, that many lines are read on."""
    rows = (folder / "token_embedder.pkl").stat().st_size // (2 * 3)
    words = [("<oov>", 0), ("<pad>", 1), *((f"w{i}", i) for i in range(2, rows))]
    _rewrite_dic(folder / "word.dic", words)
    assert _refused(efml_folder.read_folder, folder).startswith(
        f"{folder / 'token_embedder.pkl'}: word_emb_layer.embedding.weight has shape (32, 3), "
        f"expected ({rows}, 3)"
    )
    _rewrite_dic(folder / "word.dic", [*words, ("one more", rows)])
    assert _refused(efml_folder.read_folder, folder) == (
        f"{folder / 'word.dic'}: holds {rows + 1:,} lines, more than the {rows:,} entries its "
        "table can have"
    )


def test_a_character_dictionary_whose_ids_skip_one_is_refused(folder):
    chars = efml_dictionaries.read_dictionary(folder / "char.dic")
    _rewrite_dic(folder / "char.dic", [*list(chars.items())[:-1], ("<eow>", 200)])
    assert _refused(efml_folder.read_folder, folder) == (
        f"{folder / 'char.dic'}: ids run to 200 for 126 entries; the table has a row per entry"
    )
    _rewrite_dic(folder / "char.dic", chars.items())
    words = efml_dictionaries.read_dictionary(folder / "word.dic")
    _rewrite_dic(folder / "word.dic", [*list(words.items())[:-1], ("x" * 48, 32)])
    assert _refused(efml_folder.read_folder, folder) == (
        f"{folder / 'word.dic'}: ids run to 32 for 32 entries; the table has a row per entry"
    )


def _without_word_branch(folder):
    """The tiny model as it would be with word_dim 0: no word table, the projection's word
    columns gone, no word.dic."""
    from support import torch_pickles

    from elmo_tf.foreign.torch_state_dict import read_state_dict

    config = json.loads((folder / "cnn_tiny.json").read_text())
    config["token_embedder"]["word_dim"] = 0
    (folder / "cnn_tiny.json").write_text(json.dumps(config))
    tensors = read_state_dict(folder / "token_embedder.pkl")
    del tensors["word_emb_layer.embedding.weight"]
    tensors["projection.weight"] = np.ascontiguousarray(tensors["projection.weight"][:, 3:])
    (folder / "token_embedder.pkl").write_bytes(torch_pickles.legacy_bytes(tensors))
    (folder / "word.dic").unlink()


def test_a_folder_without_a_word_branch_reads_without_a_word_dictionary(folder):
    _without_word_branch(folder)
    model = efml_folder.read_folder(folder)
    assert model.folder == str(folder) and model.config_source == str(folder / "cnn_tiny.json")
    assert model.config.word_dim == 0 and model.word_lexicon is None
    assert "word_emb_layer.embedding.weight" not in model.token_embedder
    assert model.token_embedder["projection.weight"].shape == (6, 14)
    assert len(model.char_lexicon) == 126 and len(model.encoder) == 16


def test_a_dictionary_linked_from_outside_the_folder_is_not_read(folder, tmp_path):
    outside = tmp_path / "outside.dic"
    outside.write_bytes((folder / "char.dic").read_bytes())
    (folder / "char.dic").unlink()
    (folder / "char.dic").symlink_to(outside)
    assert _refused(efml_folder.read_folder, folder) == (
        f"{folder / 'char.dic'}: leads outside the model folder; not read"
    )


@pytest.mark.parametrize(
    "path, candidates",
    [
        ("sub/cnn.json", ["sub/cnn.json", "configs/cnn.json", "cnn.json"]),
        ("./cnn.json", ["cnn.json", "configs/cnn.json"]),
        ("\\Users\\x\\cnn.json", ["configs/cnn.json", "cnn.json"]),  # Windows' rooted path
        ("models/", ["models"]),  # no file name: only the relative path
        ("/", []),
        ("..", []),
    ],
)
def test_config_candidates_of_each_kind_of_path(path, candidates):
    assert efml_folder.config_candidates(path) == candidates


def test_a_rooted_config_path_is_never_relative_where_isabs_says_it_is_not_absolute(monkeypatch):
    """Python 3.13's ntpath.isabs("/x") is False: the leading separator still roots it."""
    isabs = efml_folder.os.path.isabs
    monkeypatch.setattr(
        efml_folder.os.path, "isabs", lambda path: path != "/x/cnn.json" and isabs(path)
    )
    assert efml_folder.config_candidates("/x/cnn.json") == ["configs/cnn.json", "cnn.json"]
    assert efml_folder.config_candidates("x/cnn.json")[0] == "x/cnn.json"


@pytest.mark.parametrize(
    "path",
    ["cnn_0_100_512_4096_sample.json", "C:\\Users\\x\\cnn_50_100_512_4096_sample.json"],
)
def test_the_standard_config_name_is_found_in_any_form_of_path(folder, path):
    (folder / "cnn_tiny.json").unlink()
    _set_config_path(folder, path)
    config, source = efml_folder.resolve_config(folder)
    assert source == "standard" and config.dim == 4096


def test_a_config_path_naming_nothing_in_the_folder_is_quoted_to_60_characters(folder):
    path = "/Users/" + "a" * 70 + "/cnn.json"
    _set_config_path(folder, path)
    assert _refused(efml_folder.resolve_config, folder) == (
        f"{folder / 'config.json'}: config_path '{path[:60]}... ({len(path)} characters)' names "
        "no model config in the folder (configs/cnn.json, cnn.json); put it there"
    )
    _set_config_path(folder, "..")
    assert _refused(efml_folder.resolve_config, folder) == (
        f"{folder / 'config.json'}: config_path '..' names no model config in the folder (no "
        "file name); put it there"
    )


def test_the_config_files_errors_name_their_paths_in_the_folder(folder):
    (folder / "config.json").write_text('{"seed": 1}')
    assert _refused(efml_folder.resolve_config, folder) == (
        f"{folder / 'config.json'}: 'config_path' must name the model config, got None"
    )
    (folder / "config.json").write_bytes(b"")
    assert _refused(efml_folder.resolve_config, folder) == (
        f"{folder / 'config.json'}: JSON config is empty"
    )
    (folder / "config.json").write_bytes((EFML_TINY / "config.json").read_bytes())
    config = json.loads((folder / "cnn_tiny.json").read_text())
    config["encoder"]["name"] = "lstm"
    (folder / "cnn_tiny.json").write_text(json.dumps(config))
    assert _refused(efml_folder.resolve_config, folder) == (
        f"{folder / 'cnn_tiny.json'}: 'encoder.name' is 'lstm'; only EFML's 'elmo' encoder "
        "(every released model) is supported"
    )


def test_a_config_file_past_its_size_bound_is_refused(folder):
    (folder / "config.json").write_bytes(b" " * efml_folder.MAX_CONFIG_BYTES + b"{}")
    assert _refused(efml_folder.resolve_config, folder) == (
        f"{folder / 'config.json'}: larger than 1048576 bytes, not a JSON config"
    )


@pytest.mark.parametrize(
    "data, message",
    [
        (b"[]", "config.json: expected a JSON object, got list"),
        (b'{"config_path": 3}', "config.json: 'config_path' must name the model config, got 3"),
        (b'{"config_path": " "}', "config.json: 'config_path' must name the model config, got ' '"),
        (
            b'{"config_path": "a\\u0000b.json"}',
            r"config.json: 'config_path' must name the model config, got 'a\x00b.json'",
        ),
        (
            b"{",
            "config.json: not a valid JSON config.json (Expecting property name enclosed in "
            "double quotes: line 1 column 2 (char 1))",
        ),
    ],
)
def test_a_broken_config_json_is_refused_in_one_line(data, message):
    assert _refused(efml_folder.parse_train_config, data) == message


def test_a_model_config_that_is_no_json_object_is_refused():
    assert _refused(efml_folder.parse_model_config, b"[]") == (
        "model config: 'encoder' must be a JSON object"
    )
    assert _refused(efml_folder.parse_model_config, b"{", "m.json") == (
        "m.json: not a valid JSON model config (Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1))"
    )


def _model_config_with(section, **values):
    config = json.loads((EFML_TINY / "cnn_tiny.json").read_text())
    config[section].update(values)
    return json.dumps(config).encode()


@pytest.mark.parametrize(
    "section, values, message",
    [
        ("token_embedder", {"n_highway": -1},
         "'token_embedder.n_highway' must be a non-negative integer, got -1"),
        ("token_embedder", {"word_dim": -1},
         "'token_embedder.word_dim' must be a non-negative integer, got -1"),
        ("token_embedder", {"char_dim": 0},
         "'token_embedder.char_dim' must be a positive integer, got 0"),
        ("encoder", {"projection_dim": 0},
         "'encoder.projection_dim' must be a positive integer, got 0"),
        ("encoder", {"dim": "10"}, "'encoder.dim' must be a positive integer, got '10'"),
        ("encoder", {"n_layers": 0}, "'encoder.n_layers' must be a positive integer, got 0"),
        ("encoder", {"name": "lstm"},
         "'encoder.name' is 'lstm'; only EFML's 'elmo' encoder (every released model) is "
         "supported"),
        ("token_embedder", {"name": "lstm"},
         "'token_embedder.name' is 'lstm'; only EFML's 'cnn' token embedder (every released "
         "model) is supported"),
        ("token_embedder", {"filters": [[1, 2, 3]]},
         "'token_embedder.filters' must be [width, count] pairs, widths 1 to 50, got [[1, 2, 3]]"),
        ("token_embedder", {"filters": [[1, 2.5]]},
         "'token_embedder.filters' must be [width, count] pairs, widths 1 to 50, got [[1, 2.5]]"),
        ("token_embedder", {"filters": [[51, 4]]},
         "'token_embedder.filters' must be [width, count] pairs, widths 1 to 50, got [[51, 4]]"),
        ("token_embedder", {"filters": [[2, 0]]},
         "'token_embedder.filters' must be [width, count] pairs, widths 1 to 50, got [[2, 0]]"),
        ("token_embedder", {"activation": "sigmoid"},
         "'token_embedder.activation' must be 'relu' or 'tanh', got 'sigmoid'"),
        ("token_embedder", {"max_characters_per_token": 40},
         "'token_embedder.max_characters_per_token' must be 50 (every released model's), got 40"),
        ("encoder", {"cell_clip": -1},
         "'encoder.cell_clip' must be a non-negative number or null, got -1"),
        ("encoder", {"proj_clip": float("inf")},
         "'encoder.proj_clip' must be a non-negative number or null, got inf"),
    ],
)  # fmt: skip
def test_each_bad_model_config_value_is_refused_in_one_exact_line(section, values, message):
    data = _model_config_with(section, **values)
    assert _refused(efml_folder.parse_model_config, data, "cnn_tiny.json") == (
        f"cnn_tiny.json: {message}"
    )


def test_the_model_configs_bounds_are_inclusive():
    config = efml_folder.parse_model_config(
        _model_config_with(
            "token_embedder",
            n_highway=0,
            word_dim=0,
            activation="tanh",
            name="CNN",
            filters=[[50, 1], [1, 1]],
        )  # fmt: skip
    )
    assert (config.n_highway, config.word_dim, config.activation) == (0, 0, "tanh")
    assert config.filters == ((50, 1), (1, 1))
    config = efml_folder.parse_model_config(_model_config_with("encoder", cell_clip=1e30))
    assert config.cell_clip == 1e30


def test_a_state_dict_that_disagrees_with_the_config_is_refused_naming_the_tensor():
    expected = {"a": (1,), "b": (2, 3)}
    floats = np.dtype(np.float32)

    def refused(found):
        return _refused(efml_folder.check_tensors, "t.pkl", expected, "the model config", found)

    assert refused({}) == "t.pkl: lacks a (the model config names it)"
    assert refused({"a": ((1,), floats)}) == "t.pkl: lacks b (the model config names it)"
    assert refused({"a": ((1,), floats), "b": ((2, 3), floats), "c": ((1,), floats)}) == (
        "t.pkl: holds c, which the model config has no place for"
    )
    assert refused({"a": ((1,), floats), "b": ((3, 2), floats)}) == (
        "t.pkl: b has shape (3, 2), expected (2, 3) for the model config and the dictionaries"
    )
    assert refused({"a": ((1,), np.dtype(np.int32)), "b": ((2, 3), floats)}) == (
        "t.pkl: a holds int32, not floats"
    )
    found = {"a": ((1,), floats), "b": ([2, 3], np.dtype(np.float64))}
    assert efml_folder.check_tensors("t.pkl", expected, "the model config", found) is None


def test_a_float64_past_float32s_range_is_refused_without_a_numpy_warning():
    import warnings

    tensors = {"w": np.array([1.0, 1e39])}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _refused(efml_folder._finite, "t.pkl", tensors) == (
            "t.pkl: w holds NaN, infinity or values past float32's range; the model cannot be "
            "converted"
        )
        fine = {"w": np.array([1.0, 3e38])}
        assert efml_folder._finite("t.pkl", fine) is fine
