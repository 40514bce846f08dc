"""The code-point model's tables and token mapping (``elmo_tf.tokens.codepoints``) on a small
hand-made vocabulary: the tables built from EFML's dictionaries, checked from a weight file's
datasets and an ONNX file's bytes (each refusal one exact line), and the rows tokens map to.
The tiny EFML model's own ids: tests/unit/test_efml_folders.py."""

import struct

import numpy as np
import pytest

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ExportError, WeightFileError
from elmo_tf.tokens import codepoints
from elmo_tf.tokens.codepoints import CodepointMapper, CodepointVocabulary

# EFML's ids; ours are one more: a 1, b 2, é 3, the specials 4 to 9 (bos, eos, oov, pad, bow,
# eow); words <oov> 1, <pad> 2, <bos> 3, <eos> 4, ab 5, é 6.
CHARS = {"a": 0, "b": 1, "é": 2, "<bos>": 3, "<eos>": 4, "<oov>": 5, "<pad>": 6, "<bow>": 7,
         "<eow>": 8}  # fmt: skip
WORDS = {"<oov>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3, "ab": 4, "é": 5}
CODES = [-1, ord("a"), ord("b"), ord("é"), -1, -1, -1, -1, -1, -1]
WORD_BYTES = b"<oov><pad><bos><eos>ab" + "é".encode()
OFFSETS = [0, 0, 5, 10, 15, 20, 22, 24]
SOURCE = "weights.hdf5"


def _config(words=True):
    """A code-point config for ``CHARS`` (and ``WORDS`` with ``words``)."""
    word_options = {"word_embedding_dim": 3, "n_words": 7, "special_words": (1, 3, 4, 2)}
    return ElmoConfig(
        filters=((1, 4),), char_embedding_dim=4, n_highway=0, activation="relu",
        projection_dim=4, lstm_dim=8, n_lstm_layers=1, cell_clip=None, proj_clip=None,
        n_characters=10, character_scheme=codepoints.CODEPOINTS,
        special_characters=(4, 5, 6, 7, 8, 9), **(word_options if words else {}),
    )  # fmt: skip


def _arrays(with_words=True, **changes):
    """The weight file's vocabulary datasets of ``_config(with_words)``, ``changes`` replacing
    some (by their last name part: ``char_codepoints``, ``words``, ``word_offsets``)."""
    arrays = {
        "vocabulary/char_codepoints": np.array(CODES, np.int32),
        "vocabulary/words": np.frombuffer(WORD_BYTES if with_words else b"", np.uint8),
        "vocabulary/word_offsets": np.array(OFFSETS if with_words else [], np.int64),
    }
    for name, value in changes.items():
        arrays[f"vocabulary/{name}"] = value
    return arrays


def _refusal(config, arrays, source=SOURCE):
    with pytest.raises(WeightFileError) as error:
        CodepointVocabulary.from_arrays(config, arrays, source)
    return str(error.value)


def _vocabulary(words=True):
    return CodepointVocabulary.from_arrays(_config(words), _arrays(words), SOURCE)


def test_an_export_of_bilm_tf_ids_only_refuses_a_code_point_model():
    with pytest.raises(ExportError) as error:
        codepoints.check_export(_config(), "a TFLite file")
    assert str(error.value) == (
        "a TFLite file takes bilm-tf's character ids only, and this model maps tokens with its "
        "own code-point table (ELMoForManyLangs'): export a SavedModel (elmo-tf export "
        "saved-model), which maps them in its graph, or ONNX (elmo-tf export onnx), whose "
        "runner maps them with the tables the file carries"
    )
    bytes_config = ElmoConfig(filters=((1, 4),), char_embedding_dim=4, n_highway=0,
                              activation="relu", projection_dim=4, lstm_dim=8)  # fmt: skip
    assert codepoints.check_export(bytes_config, "a TFLite file") is None


def test_the_sentence_markers_rows_frame_them_with_efmls_swapped_word_marks():
    bos, eos = codepoints.boundary_rows(_config())
    assert bos.dtype == eos.dtype == np.int32
    assert bos.tolist() == [9, 4, 8] + [7] * 47 + [3]  # eow, bos, bow, pad..., word <bos>
    assert eos.tolist() == [9, 5, 8] + [7] * 47 + [4]
    bos, eos = codepoints.boundary_rows(_config(words=False))
    assert bos.tolist() == [9, 4, 8] + [7] * 47 and eos.tolist() == [9, 5, 8] + [7] * 47


def test_the_tables_of_efmls_dictionaries_hold_its_ids_plus_one():
    vocabulary, char_specials, word_specials = CodepointVocabulary.from_lexicons(CHARS, WORDS)
    assert vocabulary.char_codepoints.dtype == np.int32
    assert vocabulary.char_codepoints.tolist() == CODES
    assert char_specials == (4, 5, 6, 7, 8, 9) and word_specials == (1, 3, 4, 2)
    assert vocabulary.words.dtype == np.uint8 and vocabulary.words.tobytes() == WORD_BYTES
    assert vocabulary.word_offsets.dtype == np.int64
    assert vocabulary.word_offsets.tolist() == OFFSETS
    assert vocabulary.word_table() == {"<oov>": 1, "<pad>": 2, "<bos>": 3, "<eos>": 4, "ab": 5,
                                       "é": 6}  # fmt: skip


def test_the_tables_without_a_word_dictionary_hold_no_words():
    vocabulary, char_specials, word_specials = CodepointVocabulary.from_lexicons(CHARS)
    assert vocabulary.char_codepoints.dtype == np.int32
    assert vocabulary.char_codepoints.tolist() == CODES
    assert vocabulary.words.dtype == np.uint8 and vocabulary.words.shape == (0,)
    assert vocabulary.word_offsets.dtype == np.int64 and vocabulary.word_offsets.shape == (0,)
    assert char_specials == (4, 5, 6, 7, 8, 9) and word_specials is None
    assert CodepointVocabulary.from_lexicons(CHARS, {})[0].words.shape == (0,)


@pytest.mark.parametrize("words", [True, False], ids=["words", "no words"])
def test_a_weight_files_tables_read_back_in_our_dtypes(words):
    arrays = _arrays(words, char_codepoints=np.array(CODES, np.int64))  # as HDF5 may store it
    vocabulary = CodepointVocabulary.from_arrays(_config(words), arrays, SOURCE)
    assert vocabulary.char_codepoints.dtype == np.int32
    assert vocabulary.char_codepoints.tolist() == CODES
    assert vocabulary.words.tobytes() == (WORD_BYTES if words else b"")
    assert vocabulary.word_offsets.dtype == np.int64
    assert vocabulary.word_offsets.tolist() == (OFFSETS if words else [])
    assert {k: v.tolist() for k, v in vocabulary.arrays().items()} == {
        k: v.tolist() for k, v in _arrays(words).items()
    }


def test_the_highest_code_point_and_the_nul_character_are_code_points():
    codes = [-1, 0, ord("b"), 0x10FFFF, -1, -1, -1, -1, -1, -1]
    arrays = _arrays(char_codepoints=np.array(codes, np.int32))
    vocabulary = CodepointVocabulary.from_arrays(_config(), arrays, SOURCE)
    assert vocabulary.char_table() == {0: 1, ord("b"): 2, 0x10FFFF: 3}


def _with_codes(*pairs):
    codes = np.array(CODES, np.int32)
    for index, value in pairs:
        codes[index] = value
    return _arrays(char_codepoints=codes)


CHAR_DATASET = f"{SOURCE}: dataset 'vocabulary/char_codepoints'"
WORDS_DATASET = f"{SOURCE}: dataset 'vocabulary/words'"
OFFSETS_DATASET = f"{SOURCE}: dataset 'vocabulary/word_offsets'"


@pytest.mark.parametrize(
    "arrays, message",
    [
        (_arrays(char_codepoints=np.zeros([5], np.int32)), "has shape (5,), expected (10,)"),
        (_arrays(char_codepoints=np.array(CODES, np.float32)), "is not integer"),
        (_with_codes((1, -2)), "holds a value that is no code point"),
        (_with_codes((1, 0x110000)), "holds a value that is no code point"),
        (  # -1 cast to uint64 (2**64 - 1) for id 0 and the specials: no code point either
            _arrays(char_codepoints=np.array(CODES, np.int64).astype(np.uint64)),
            "holds a value that is no code point",
        ),
        (_with_codes((0, 65)), "gives id 0 or a special character's id a code point"),
        (_with_codes((9, 65)), "gives id 0 or a special character's id a code point"),
        (_with_codes((1, 0), (2, 0)), "gives one code point two ids"),
        (_with_codes((1, 98)), "gives one code point two ids"),
    ],
    ids=["shape", "floats", "below -1", "past U+10FFFF", "uint64", "id 0", "special", "NUL", "b"],
)
def test_a_broken_character_table_is_refused_in_one_line(arrays, message):
    assert _refusal(_config(), arrays) == f"{CHAR_DATASET} {message}"


def _with_word_bytes(data):
    return _arrays(words=np.frombuffer(data, np.uint8))


@pytest.mark.parametrize(
    "arrays, message",
    [
        (
            _arrays(word_offsets=np.array(OFFSETS[:-1], np.int64)),
            f"{OFFSETS_DATASET} has shape (7,), expected (8,)",
        ),
        (
            _arrays(word_offsets=np.array(OFFSETS, np.float64)),
            f"{WORDS_DATASET} is not bytes with integer offsets",
        ),
        (
            _arrays(words=np.frombuffer(WORD_BYTES, np.uint8).astype(np.int32)),
            f"{WORDS_DATASET} is not bytes with integer offsets",
        ),
        (
            _arrays(words=np.frombuffer(WORD_BYTES, np.uint8)[None]),
            f"{WORDS_DATASET} is not bytes with integer offsets",
        ),
        (
            _arrays(word_offsets=np.array([-1, *OFFSETS[1:]], np.int64)),
            f"{OFFSETS_DATASET} does not cut the words into consecutive spans (id 0 empty)",
        ),
        (
            _with_word_bytes(WORD_BYTES.replace(b"<oov>", b"<xov>")),
            f"{WORDS_DATASET} does not hold <oov> at the config's id",
        ),
        (
            _with_word_bytes(WORD_BYTES.replace(b"<pad>", b"<pap>")),
            f"{WORDS_DATASET} does not hold <pad> at the config's id",
        ),
        (
            _with_word_bytes(WORD_BYTES[:-2] + b"ab"),  # é's two bytes become "ab" again
            f"{WORDS_DATASET} holds word 6 empty, not UTF-8, or twice",
        ),
    ],
    ids=[
        "offsets",
        "float offsets",
        "int32 words",
        "2-D words",
        "offset 0",
        "<oov>",
        "<pad>",
        "twice",
    ],
)
def test_a_broken_word_table_is_refused_in_one_line(arrays, message):
    assert _refusal(_config(), arrays) == message


def test_words_for_a_model_without_a_word_embedding_are_refused():
    arrays = _arrays(False, words=np.frombuffer(b"a", np.uint8))
    assert _refusal(_config(words=False), arrays) == (
        f"{WORDS_DATASET} holds words for a model without any"
    )
    arrays = _arrays(False, word_offsets=np.array([0], np.int64))
    message = f"{OFFSETS_DATASET} has shape (1,), expected (0,)"
    assert _refusal(_config(words=False), arrays) == message


def test_the_word_table_refuses_an_empty_word_a_word_not_utf8_and_a_word_twice():
    def table(data, offsets=OFFSETS):
        vocabulary = CodepointVocabulary(
            np.array(CODES, np.int32), np.frombuffer(data, np.uint8), np.array(offsets, np.int64)
        )
        with pytest.raises(WeightFileError) as error:
            vocabulary.word_table()
        return str(error.value)

    default = "vocabulary: dataset 'vocabulary/words' holds word {} empty, not UTF-8, or twice"
    assert table(WORD_BYTES[:-2] + b"ab") == default.format(6)
    assert table(WORD_BYTES[:-2] + b"\xc3\x28") == default.format(6)
    assert table(WORD_BYTES, [0, 0, 5, 10, 15, 20, 20, 24]) == default.format(5)


def test_the_tables_as_bytes_are_the_code_points_the_words_and_the_offsets_little_endian():
    data = _vocabulary().to_bytes()
    assert data == (struct.pack("<10i", *CODES) + WORD_BYTES + struct.pack("<8q", *OFFSETS))
    assert _vocabulary(words=False).to_bytes() == struct.pack("<10i", *CODES)


@pytest.mark.parametrize("words", [True, False], ids=["words", "no words"])
def test_the_tables_round_trip_through_bytes(words):
    vocabulary = _vocabulary(words)
    read = CodepointVocabulary.from_bytes(_config(words), vocabulary.to_bytes(), "model.onnx")
    for name, array in vocabulary.arrays().items():
        assert read.arrays()[name].tolist() == array.tolist(), name
    assert read.words.dtype == np.uint8


def test_bytes_the_tables_cannot_hold_are_refused_before_any_array_is_made():
    config = _config()
    limit = codepoints.max_word_bytes(config)  # 7 words, 256 bytes each at most
    assert limit == 7 * 256
    # words of exactly the limit: the last two long
    words = WORD_BYTES[:20] + b"x" * 800 + b"y" * (limit - 820)
    offsets = [0, 0, 5, 10, 15, 20, 820, limit]
    data = struct.pack("<10i", *CODES) + words + struct.pack("<8q", *offsets)
    read = CodepointVocabulary.from_bytes(config, data, "model.onnx")
    assert read.words.tobytes() == words
    # a byte more than the limit, and fewer than the code points and offsets take
    for refused in (data + b"x", data[: 4 * 10 + 8 * 8 - 1]):
        with pytest.raises(WeightFileError) as error:
            CodepointVocabulary.from_bytes(config, refused, "model.onnx")
        assert str(error.value) == (
            f"model.onnx: dataset 'vocabulary' holds {len(refused):,} bytes, which the model's "
            "tables cannot hold"
        )


def test_bytes_whose_tables_are_broken_are_refused_naming_the_file():
    data = bytearray(_vocabulary().to_bytes())
    data[4:8] = struct.pack("<i", -2)
    with pytest.raises(WeightFileError) as error:
        CodepointVocabulary.from_bytes(_config(), bytes(data), "model.onnx")
    assert str(error.value) == (
        "model.onnx: dataset 'vocabulary/char_codepoints' holds a value that is no code point"
    )


def test_tokens_map_to_efmls_ids_plus_one_with_their_word_id():
    vocabulary = _vocabulary()
    mapper = CodepointMapper(_config(), vocabulary)
    assert mapper.vocabulary is vocabulary
    row = mapper.token_row("ab")
    assert row.dtype == np.int32
    assert row.tolist() == [9, 1, 2, 8] + [7] * 46 + [5]
    assert mapper.token_row("é").tolist() == [9, 3, 8] + [7] * 47 + [6]
    assert mapper.token_row("zé").tolist() == [9, 6, 3, 8] + [7] * 46 + [1]  # word <oov>
    assert mapper.token_row(b"ab").tolist() == row.tolist()
    assert mapper.token_row("é".encode()).tolist() == mapper.token_row("é").tolist()
    assert mapper.token_row("<bos>").tolist() == mapper.bos_row.tolist()
    assert mapper.token_row(b"<eos>").tolist() == mapper.eos_row.tolist()
    long = mapper.token_row("a" * 60)  # cut to 48 code points, as EFML cuts
    assert long.tolist() == [9] + [1] * 48 + [8] + [1]


def test_tokens_of_a_model_without_words_map_to_character_slots_only():
    mapper = CodepointMapper(_config(words=False), _vocabulary(words=False))
    row = mapper.token_row("ba")
    assert row.dtype == np.int32 and row.tolist() == [9, 2, 1, 8] + [7] * 46


def test_a_batch_is_padded_to_max_length_with_zero_rows():
    mapper = CodepointMapper(_config(), _vocabulary())
    ids = mapper.batch_to_ids([["ab", "é"]], max_length=4)
    assert ids.shape == (1, 4, 51)
    assert ids[0, 0].tolist() == mapper.token_row("ab").tolist() and not ids[0, 2:].any()
    assert mapper.batch_to_ids([["ab", "é"]]).shape == (1, 2, 51)


def test_a_token_that_cannot_be_mapped_is_refused_in_one_line():
    mapper = CodepointMapper(_config(), _vocabulary())
    with pytest.raises(ValueError) as error:
        mapper.token_row(b"x" * 40 + b"\xff")
    assert str(error.value) == (
        r"a token must be UTF-8 text, got b'xxxxxxxxxxxxxxxx...xxxxxx... (byte 40)"
    )
    with pytest.raises(TypeError) as error:
        mapper.token_row(3)
    assert str(error.value) == "a token must be str or bytes, got int: 3"
    with pytest.raises(ValueError) as error:
        CodepointMapper(_config()).token_row("a")
    assert str(error.value) == (
        "this code-point model has no character table yet: load its weights "
        "(ELMo.from_preset, elmo_tf.load_weights), which hold it"
    )
