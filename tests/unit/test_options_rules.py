"""Each rule of the options format (``elmo_tf.formats.options_file``) on its own: the exact words
it answers for a value it refuses, the value at its edge it accepts, and the rules between
fields (``cross_check``). test_config.py reads whole files through ``ElmoConfig``."""

import json
import types

import pytest
from support.paths import TINY

from elmo_tf.config import ElmoConfig, OptionsError
from elmo_tf.formats import options_file
from elmo_tf.tokens import codepoints

CHARS = "bos, eos, oov, pad, bow, eow"
WORDS = "oov, bos, eos, pad"
FIXED = "must be 50 (the character mapping is fixed)"


@pytest.mark.parametrize(
    "rule, value, problem",
    [
        (options_file._max_characters, 20, f"{FIXED}, got 20"),
        (options_file._max_characters, "50", f"{FIXED}, got '50'"),
        (options_file._max_characters, 50, None),
        (options_file._filters, [], "must list at least one [width, num_filters] pair"),
        (options_file._filters, ((1, 2, 3),), "has an entry [1, 2, 3], not [width, num]"),
        (options_file._filters, ((51, 1),), "has an invalid entry [51, 1]"),
        (options_file._filters, ((50, 1), (1, 1)), None),
        (options_file._activation, "gelu", "must be one of ('relu', 'tanh'), got 'gelu'"),
        (options_file._activation, ["relu"], "must be one of ('relu', 'tanh'), got ['relu']"),
        (options_file._activation, "tanh", None),
        (options_file._n_characters, "262", "must be an integer, got '262'"),
        (options_file._n_characters, 0, "must be a positive integer, got 0"),
        (options_file._n_characters, 1, None),
        (options_file._scheme, "bytes", "must be one of ('utf8-bytes', 'codepoints'), got 'bytes'"),
        (options_file._scheme, "codepoints", None),
        (options_file._clip, 10**400, "must be a finite positive number, got "
         "100000000000000000...0000000000000000000"),
        (options_file._clip, 0, "must be a finite positive number or absent, got 0"),
        (options_file._clip, 1e-30, None),
        (options_file._positive, 0, "must be a positive integer, got 0"),
        (options_file._non_negative, -1, "must be a non-negative integer, got -1"),
        (options_file._non_negative, 0, None),
    ],
)  # fmt: skip
def test_each_rule_names_what_it_refuses(rule, value, problem):
    assert rule(value) == problem


@pytest.mark.parametrize(
    "rule, value, problem",
    [
        (options_file._special_character_ids, None, None),
        (options_file._special_character_ids, (1, 2, 3, 4, 5, 6), None),
        (options_file._special_character_ids, [1, 2, 3, 4, 5, 6],
         f"must be an object with the ids of {CHARS}"),
        (options_file._special_character_ids, (1, 2, 3),
         f"must be an object with the ids of {CHARS}"),
        (options_file._special_character_ids, (0, 2, 3, 4, 5, 6),
         f"must give a positive integer id for each of {CHARS}"),
        (options_file._special_character_ids, (1, 2, 3, 4, 5, 1),
         "must give each special character its own id"),
        (options_file._special_word_ids, (1, 2, 3), f"must be an object with the ids of {WORDS}"),
        (options_file._special_word_ids, (1, 2, 3, True),
         f"must give a positive integer id for each of {WORDS}"),
        (options_file._special_word_ids, (1, 1, 2, 3), None),  # words may share an id
    ],
)  # fmt: skip
def test_special_ids_are_one_positive_id_per_name(rule, value, problem):
    assert rule(value) == problem


def test_a_special_ids_object_becomes_the_configs_tuple_in_the_names_order():
    ids = {"eow": 6, "bow": 5, "pad": 4, "oov": 3, "eos": 2, "bos": 1}
    assert options_file.special_ids_tuple(ids, codepoints.CHAR_SPECIALS, "k") == (1, 2, 3, 4, 5, 6)
    assert options_file.special_ids_tuple([1, 2], codepoints.CHAR_SPECIALS, "k") == [1, 2]
    with pytest.raises(OptionsError) as error:
        options_file.special_ids_tuple({"bos": 1, "eos": 2}, codepoints.WORD_SPECIALS, "key")
    assert str(error.value) == f"'key' must have the keys {WORDS}, got ['bos', 'eos']"


def _config(**changes):
    """What ``cross_check`` reads of a config: bilm-tf's byte ids and no word embedding."""
    fields = dict(n_characters=262, special_characters=None, character_scheme="utf8-bytes",
                  word_embedding_dim=0, n_words=0, special_words=None)  # fmt: skip
    return types.SimpleNamespace(**{**fields, **changes})


def _codepoints(**changes):
    """A config of code points: 7 character ids, the six special ones 1 to 6."""
    fields = dict(character_scheme="codepoints", n_characters=7,
                  special_characters=(1, 2, 3, 4, 5, 6))  # fmt: skip
    return _config(**{**fields, **changes})


@pytest.mark.parametrize(
    "config, found",
    [
        (_config(), None),
        (_config(n_characters=261), None),
        (_config(n_characters=263), ("char_cnn.n_characters", "must be 261 or 262, got 263")),
        (_config(special_characters=(1, 2, 3, 4, 5, 6)),
         ("characters.special_ids", "is for the codepoints scheme only")),
        (_config(word_embedding_dim=4, n_words=10, special_words=(1, 2, 3, 4)),
         ("word_embedding.dim",
          "needs the codepoints character scheme (its word vocabulary comes with it)")),
        (_codepoints(), None),
        (_codepoints(n_characters=6, special_characters=(1, 2, 3, 4, 5, 0)),
         ("char_cnn.n_characters",
          "must be at least 7 with code points (id 0 and the special characters), got 6")),
        (_codepoints(special_characters=None),
         ("characters.special_ids", "is required with the codepoints scheme")),
        (_codepoints(special_characters=(1, 2, 3, 4, 5, 7)),
         ("characters.special_ids", "must be ids below n_characters (7)")),
        (_codepoints(n_words=10),
         ("word_embedding.n_words", "and 'word_embedding.dim' must both be given, or neither")),
        (_codepoints(word_embedding_dim=4),
         ("word_embedding.n_words", "and 'word_embedding.dim' must both be given, or neither")),
        (_codepoints(n_words=10, word_embedding_dim=4),
         ("word_embedding.special_ids", "is required with a word embedding")),
        (_codepoints(special_words=(1, 2, 3, 4)),
         ("word_embedding.special_ids", "is for a word embedding only")),
        (_codepoints(n_words=4, word_embedding_dim=4, special_words=(1, 2, 3, 4)),
         ("word_embedding.special_ids", "must be ids below n_words (4)")),
        (_codepoints(n_words=5, word_embedding_dim=4, special_words=(1, 2, 3, 4)), None),
    ],
)  # fmt: skip
def test_the_rules_between_fields_name_the_key_at_fault(config, found):
    assert options_file.cross_check(config) == found


def test_a_written_clip_is_an_integer_when_it_is_a_whole_number():
    assert type(options_file._plain_number(3.0)) is int and options_file._plain_number(3.0) == 3
    assert options_file._plain_number(0.5) == 0.5


def _tiny():
    return json.loads((TINY / "options.json").read_text())


def test_an_options_file_over_its_bound_says_what_one_holds(tmp_path):
    path = tmp_path / "options.json"
    path.write_text(" " * (1 << 20) + "{}")
    with pytest.raises(OptionsError) as error:
        options_file.read_config(ElmoConfig, path)
    assert str(error.value) == (
        f"{path}: larger than 1048576 bytes, not an options file (an options.json is a few "
        "hundred bytes)"
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda o: [o], "options: expected a JSON object, got list"),
        (lambda o: {**o, "word_embedding": {"special_ids": {"bos": 1}}},
         f"options: 'word_embedding.special_ids' must have the keys {WORDS}, got ['bos']"),
        (lambda o: {**o, "characters": {"special_ids": {"pad": 1}}},
         f"options: 'characters.special_ids' must have the keys {CHARS}, got ['pad']"),
        (lambda o: {**o, "char_cnn": {**o["char_cnn"], "filters": [[1, 2, 3]]}},
         "options: 'char_cnn.filters' must be a list of [width, num_filters] integer pairs, got "
         "[[1, 2, 3]]"),
        # a typo in a section after one the file leaves out ("characters")
        (lambda o: {**o, "word_embedding": {"dims": 4}},
         "options: 'word_embedding.dims' is not a key of the options format; did you mean "
         "'word_embedding.dim'? (misspelt, it would be ignored)"),
    ],
    ids=["not an object", "word ids", "character ids", "filters", "typo after a missing section"],
)  # fmt: skip
def test_a_parsed_options_value_is_refused_in_one_line_naming_its_source(change, message):
    with pytest.raises(OptionsError) as error:
        options_file.config_from_options(ElmoConfig, change(_tiny()))
    assert str(error.value) == message
    with pytest.raises(OptionsError) as error:
        options_file.config_from_options(ElmoConfig, change(_tiny()), source="mine.json")
    assert str(error.value) == message.replace("options: ", "mine.json: ", 1)
