"""A signature's declared inputs and outputs (``SignatureSpec``) in process, from
``SignatureDef`` protos and without a model: each bad request is refused with INVALID_ARGUMENT
(or RESOURCE_EXHAUSTED for a limit) in one exact line naming the input; the ELMo contract's
values are checked per request; strings are measured as the model splits them."""

import dataclasses

import grpc
import numpy as np
import pytest
from support.paths import TINY
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from elmo_tf.config import ElmoConfig
from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.onnx_servable import signature_defs
from elmo_tf.serving.request_limits import RequestLimits
from elmo_tf.serving.signature import (
    SignatureSpec,
    TensorSpec,
    _check_elmo_values,
    _check_strings,
    input_rules,
)

INT32, STRING, FLOAT = types_pb2.DT_INT32, types_pb2.DT_STRING, types_pb2.DT_FLOAT
INVALID, EXHAUSTED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED
# The limits of tests/model/test_serving_requests.py.
LIMITS = RequestLimits(
    max_request_rows=16, max_tokens_per_row=12, max_request_tokens=64, max_token_bytes=40
)
TINY_CONFIG = ElmoConfig.from_file(TINY / "options.json")
# An ELMoForManyLangs-style model: 127 code-point ids, a word branch of 33 word ids.
CODEPOINT_CONFIG = dataclasses.replace(
    TINY_CONFIG,
    character_scheme="codepoints",
    n_characters=127,
    special_characters=tuple(range(121, 127)),
    word_embedding_dim=3,
    n_words=33,
    special_words=(1, 2, 3, 4),
)
HINT = (
    "; this signature takes whole sentences, one string each: send token lists to the "
    '\'tokens\' signature ("signature_name": "tokens", inputs tokens and sequence_len)'
)


def _specs(config):
    """``{signature: SignatureSpec}`` of the export of a model of ``config``, as served."""
    bounds, utf8_text = input_rules(config)
    return {
        name: SignatureSpec(name, signature_def, bounds, utf8_text)
        for name, signature_def in signature_defs(config).items()
    }


SPECS = _specs(TINY_CONFIG)


def _info(dtype, dims):
    """A ``TensorInfo`` of ``dtype``, of shape ``dims`` (-1 unknown), unknown rank if None."""
    info = meta_graph_pb2.TensorInfo(dtype=dtype)
    if dims is None:
        info.tensor_shape.unknown_rank = True
    else:
        for size in dims:
            info.tensor_shape.dim.add(size=size)
    return info


def _spec(name, inputs, outputs=None):
    """A ``SignatureSpec`` of ``{alias: (dtype, dims)}`` inputs and outputs."""
    signature_def = meta_graph_pb2.SignatureDef()
    for key, tensors in (("inputs", inputs), ("outputs", outputs or {})):
        for alias, (dtype, dims) in tensors.items():
            getattr(signature_def, key)[alias].CopyFrom(_info(dtype, dims))
    return SignatureSpec(name, signature_def)


def _refused(call, *args, **kwargs):
    """``(code, message)`` of the ``ServingError`` that ``call`` raises."""
    with pytest.raises(ServingError) as error:
        call(*args, **kwargs)
    return error.value.code, error.value.message


def _strings(*rows):
    return np.array(rows, dtype=object)


def test_a_tensor_spec_keeps_the_alias_dtype_and_every_dimension():
    assert TensorSpec.from_tensor_info("char_ids", _info(INT32, [-1, -1, 50])) == TensorSpec(
        "char_ids", INT32, (None, None, 50)
    )
    # 0 and 1 are sizes, only a negative size is unknown
    assert TensorSpec.from_tensor_info("x", _info(FLOAT, [-1, 0, 1])) == TensorSpec(
        "x", FLOAT, (None, 0, 1)
    )
    assert TensorSpec.from_tensor_info("x", _info(INT32, [])) == TensorSpec("x", INT32, ())
    assert TensorSpec.from_tensor_info("any", _info(STRING, None)) == TensorSpec(
        "any", STRING, None
    )


def test_a_tensor_spec_describes_its_dtype_and_shape():
    assert TensorSpec("char_ids", INT32, (None, None, 50)).describe() == "int32 [?, ?, 50]"
    assert TensorSpec("sentences", STRING, (None,)).describe() == "string [?]"
    assert TensorSpec("x", FLOAT, ()).describe() == "float32 []"
    assert TensorSpec("any", STRING, None).describe() == "string of any shape"


def test_a_signature_spec_holds_its_signature_def_and_tensors():
    signature_def = signature_defs(TINY_CONFIG)["tokens"]
    spec = SignatureSpec("tokens", signature_def)
    assert spec.name == "tokens" and spec.signature_def is signature_def
    assert (spec.id_bounds, spec.utf8_text) == ((262, None), False)
    assert spec.inputs == {
        "tokens": TensorSpec("tokens", STRING, (None, None)),
        "sequence_len": TensorSpec("sequence_len", INT32, (None,)),
    }
    assert spec.outputs["elmo"] == TensorSpec("elmo", FLOAT, (None, None, 32))
    assert spec.outputs["default"] == TensorSpec("default", FLOAT, (None, 32))
    assert all(alias == tensor.alias for alias, tensor in spec.outputs.items())


def test_the_padded_inputs_and_outputs_are_those_of_a_variable_second_dimension():
    assert SPECS["tokens"].padded_inputs() == ["tokens"]
    assert SPECS["char_ids"].padded_inputs() == ["char_ids"]
    assert SPECS["default"].padded_inputs() == []
    assert sorted(SPECS["default"].padded_outputs()) == [
        "elmo",
        "lstm_outputs1",
        "lstm_outputs2",
        "word_emb",
    ]
    fixed = _spec("fixed", {"a": (INT32, [-1, 5]), "b": (INT32, [-1, -1]), "c": (INT32, None)})
    assert fixed.padded_inputs() == ["b"]


def test_the_output_filter_names_outputs_in_order_once_or_all():
    spec = SPECS["tokens"]
    everything = ["default", "elmo", "lstm_outputs1", "lstm_outputs2", "sequence_len", "word_emb"]
    assert spec.check_output_filter([]) == everything
    assert spec.check_output_filter(["elmo", "default", "elmo"]) == ["elmo", "default"]
    assert _refused(spec.check_output_filter, ["elmo", "vectors", "words"]) == (
        INVALID,
        "output 'vectors' is not an output of signature 'tokens' (outputs: default, elmo, "
        "lstm_outputs1, lstm_outputs2, sequence_len, word_emb)",
    )


def test_an_unknown_input_is_refused_with_the_inputs_expected():
    assert SPECS["tokens"].check_names(["sequence_len", "tokens"]) is None
    assert _refused(SPECS["default"].check_names, ["words"]) == (
        INVALID,
        "input 'words' is not an input of signature 'default' (inputs: 'sentences' string [?])",
    )
    assert _refused(SPECS["char_ids"].check_names, ["char_ids", "tokens"]) == (
        INVALID,
        "input 'tokens' is not an input of signature 'char_ids' (inputs: 'char_ids' int32 "
        "[?, ?, 50])",
    )


def test_the_tokens_inputs_sent_to_the_sentence_signature_are_pointed_to_tokens():
    for alias in ("tokens", "sequence_len"):
        assert _refused(SPECS["default"].check_names, [alias]) == (
            INVALID,
            f"input '{alias}' is not an input of signature 'default' (inputs: 'sentences' "
            f"string [?]){HINT}",
        )


@pytest.mark.parametrize(
    "inputs",
    [
        {"n": (INT32, [-1])},  # one input of [batch], not strings
        {"s": (STRING, [-1, -1])},  # one string input, not of sentences
        {"s": (STRING, None)},
        {"s": (STRING, [-1]), "n": (INT32, [-1])},  # a string [batch] and another input
    ],
    ids=["int32 [?]", "string [?, ?]", "string of any shape", "two inputs"],
)
def test_only_a_sentence_signature_points_to_the_tokens_signature(inputs):
    spec = _spec("other", inputs)
    code, message = _refused(spec.check_names, ["tokens"])
    assert code == INVALID and message.endswith(f"(inputs: {spec._expected()})"), message
    assert "whole sentences" not in message


def test_a_missing_input_is_refused_with_the_inputs_expected():
    assert _refused(SPECS["tokens"].check_names, ["tokens"]) == (
        INVALID,
        "input 'sequence_len' is missing: signature 'tokens' expects 'sequence_len' int32 [?], "
        "'tokens' string [?, ?]",
    )


def test_a_declared_shape_is_checked_against_the_signature_then_the_limits():
    assert SPECS["tokens"].check_declared_shape("tokens", [16, 4], LIMITS) is None
    assert SPECS["char_ids"].check_declared_shape("char_ids", (1, 12, 50), LIMITS) is None
    assert _refused(SPECS["char_ids"].check_declared_shape, "char_ids", [1, 2, 49], LIMITS) == (
        INVALID,
        "input 'char_ids' must have size 50 in dimension 2, got shape [1, 2, 49]",
    )
    assert _refused(SPECS["default"].check_declared_shape, "sentences", [1, 2, 3], LIMITS) == (
        INVALID,
        "input 'sentences' must have rank 1, got shape [1, 2, 3]",
    )
    # token lists of rank 2 to the sentence signature: pointed to the tokens signature
    assert _refused(SPECS["default"].check_declared_shape, "sentences", [1, 2], LIMITS) == (
        INVALID,
        f"input 'sentences' must have rank 1, got shape [1, 2]{HINT}",
    )
    # a limit of a rank-2 input stays RESOURCE_EXHAUSTED, without the hint
    assert _refused(SPECS["tokens"].check_declared_shape, "tokens", [1, 13], LIMITS) == (
        EXHAUSTED,
        "input 'tokens' has 13 tokens per row, over the limit of 12 (max_tokens_per_row); "
        "send a smaller request",
    )
    assert _refused(SPECS["default"].check_declared_shape, "sentences", [17], LIMITS) == (
        EXHAUSTED,
        "input 'sentences' has 17 rows, over the limit of 16 (max_request_rows); send a smaller "
        "request",
    )


def test_a_request_of_the_declared_shapes_gives_its_batch_size():
    tokens = _strings([b"a", b"b", b"c"], [b"d", b"", b""])
    lengths = np.array([3, 1], np.int32)
    assert SPECS["tokens"].validate({"tokens": tokens, "sequence_len": lengths}) == 2
    assert SPECS["tokens"].validate({"tokens": tokens, "sequence_len": lengths}, LIMITS) == 2
    assert SPECS["char_ids"].validate({"char_ids": np.zeros((1, 2, 50), np.int32)}) == 1
    assert SPECS["default"].validate({"sentences": _strings(b"a b", b"c")}, LIMITS) == 2
    assert _spec("any", {"x": (INT32, None)}).validate({"x": np.zeros((3, 4, 5, 6))}) == 3


@pytest.mark.parametrize(
    ("signature", "inputs", "message"),
    [
        (
            "default",
            {"sentences": _strings([b"the", b"cat"])},
            f"input 'sentences' must have rank 1 (string [?]), got shape [1, 2]{HINT}",
        ),
        (
            "default",
            {"sentences": _strings([[b"the"]])},
            "input 'sentences' must have rank 1 (string [?]), got shape [1, 1, 1]",
        ),
        (
            "tokens",
            {"tokens": _strings(b"a"), "sequence_len": np.array([1], np.int32)},
            "input 'tokens' must have rank 2 (string [?, ?]), got shape [1]",
        ),
        (
            "char_ids",
            {"char_ids": np.zeros((1, 2, 49), np.int32)},
            "input 'char_ids' must have size 50 in dimension 2 (int32 [?, ?, 50]), got shape "
            "[1, 2, 49]",
        ),
        (
            "default",
            {"sentences": np.zeros([0], object)},
            "input 'sentences' has an empty batch; send at least one row",
        ),
        (
            "tokens",  # sequence_len comes first: the batch size is its
            {"tokens": _strings([b"a", b"b", b"c", b"d"]), "sequence_len": np.ones(2, np.int32)},
            "input 'tokens' has batch size 1 but input 'sequence_len' has 2",
        ),
    ],
    ids=["token lists", "rank 3", "tokens of rank 1", "char width", "empty batch", "batches"],
)
def test_a_request_of_other_shapes_is_refused_naming_the_input(signature, inputs, message):
    assert _refused(SPECS[signature].validate, inputs) == (INVALID, message)


def test_an_input_without_a_batch_dimension_is_refused():
    for dims in ([], None):
        spec = _spec("scalar", {"x": (INT32, dims)})
        assert _refused(spec.validate, {"x": np.array(3, np.int32)}) == (
            INVALID,
            "input 'x' must have a batch dimension",
        )


def test_the_limits_name_the_string_input_over_them():
    sentence = " ".join(["w"] * 13)
    assert _refused(SPECS["default"].validate, {"sentences": _strings(sentence)}, LIMITS) == (
        EXHAUSTED,
        "input 'sentences' has a row of 13 tokens, over the limit of 12 (max_tokens_per_row); "
        "send a smaller request",
    )
    tokens = {"tokens": _strings([b"x" * 41]), "sequence_len": np.array([1], np.int32)}
    assert _refused(SPECS["tokens"].validate, tokens, LIMITS) == (
        EXHAUSTED,
        "input 'tokens' has a 41-byte token, over the limit of 40 (max_token_bytes); send a "
        "smaller request",
    )
    assert SPECS["default"].validate({"sentences": _strings(sentence)}) == 1  # no limits


def test_the_input_rules_of_a_model_follow_its_character_scheme():
    assert input_rules(TINY_CONFIG) == ((262, None), False)
    assert input_rules(CODEPOINT_CONFIG) == ((127, 33), True)


BILM = (262, None)
TOKENS = _strings([b"a", b"b"])


@pytest.mark.parametrize(
    "lengths",
    [[0], [2], [1, 2], np.array([-1], object)],
    ids=["0", "the row's length", "two rows", "not numbers"],
)
def test_sequence_len_from_0_to_the_row_length_is_taken(lengths):
    lengths = np.asarray(lengths) if isinstance(lengths, list) else lengths
    tokens = np.repeat(TOKENS, len(lengths), axis=0)
    assert _check_elmo_values({"tokens": tokens, "sequence_len": lengths}, BILM) is None


def test_sequence_len_out_of_its_rows_is_refused():
    lengths = np.array([-1], np.int32)
    assert _refused(_check_elmo_values, {"tokens": TOKENS, "sequence_len": lengths}, BILM) == (
        INVALID,
        "input 'sequence_len' must not be negative",
    )
    lengths = np.array([1, 3], np.int32)
    tokens = np.repeat(TOKENS, 2, axis=0)
    assert _refused(_check_elmo_values, {"tokens": tokens, "sequence_len": lengths}, BILM) == (
        INVALID,
        "input 'sequence_len' holds 3, longer than the rows of 'tokens' (2)",
    )


@pytest.mark.parametrize(
    "inputs",
    [
        {"sequence_len": np.array([-1, 5])},  # no tokens beside it
        {"tokens": TOKENS},
        {"sequence_len": np.array([[5]]), "tokens": TOKENS},  # ranks the signature refuses
        {"sequence_len": np.array([5]), "tokens": _strings(b"a", b"b", b"c")},
    ],
    ids=["sequence_len alone", "tokens alone", "sequence_len of rank 2", "tokens of rank 1"],
)
def test_sequence_len_is_compared_only_with_rows_of_tokens(inputs):
    assert _check_elmo_values(inputs, BILM) is None


def _ids(shape, **columns):
    """Character ids of ``shape``, 0 but for ``{column: value}`` (``c3=9``: column 3 is 9)."""
    ids = np.zeros(shape, np.int32)
    for name, value in columns.items():
        ids[..., int(name[1:])] = value
    return ids


@pytest.mark.parametrize(
    ("ids", "bounds"),
    [
        (_ids((1, 2, 50)), BILM),
        (_ids((1, 2, 50), c0=261, c49=261), BILM),
        (np.zeros((1, 0, 50), np.int32), BILM),
        (_ids((1, 2, 51)), (127, 33)),
        (_ids((2, 3, 51), c0=126, c1=100, c49=100, c50=32), (127, 33)),  # words: last column
        (_ids((1, 1, 51), c50=599), (127, 600)),  # more words than characters
        (np.array([[126, 100]], np.int32), (127, 33)),  # rank 2: no column of words
        (np.full((1, 1, 50), 300, object), BILM),  # not numbers: not read
    ],
    ids=[
        "zeros",
        "261",
        "no tokens",
        "code point zeros",
        "code points",
        "600 words",
        "rank 2",
        "objects",
    ],
)
def test_char_ids_within_the_models_bounds_are_taken(ids, bounds):
    assert _check_elmo_values({"char_ids": ids}, bounds) is None


BILM_IDS = "input 'char_ids' must hold ids in [0, 261]"
CODEPOINT_IDS = "input 'char_ids' must hold ids in [0, 126]"
WORD_IDS = "input 'char_ids' must hold word ids in [0, 32] in its last column"


@pytest.mark.parametrize(
    ("ids", "bounds", "message"),
    [
        (_ids((1, 2, 50), c3=262), BILM, BILM_IDS),
        (_ids((1, 2, 50), c3=-1), BILM, BILM_IDS),
        (_ids((1, 2, 50), c49=300), BILM, BILM_IDS),  # the last column is a character's
        (_ids((1, 2, 51), c1=127), (127, 33), CODEPOINT_IDS),
        (_ids((1, 2, 51), c49=200), (127, 33), CODEPOINT_IDS),
        (_ids((1, 2, 51), c50=33), (127, 33), WORD_IDS),
        (_ids((1, 2, 51), c50=-1), (127, 33), WORD_IDS),
    ],
    ids=["262", "-1", "last column", "column 1", "column 49", "word 33", "word -1"],
)
def test_char_ids_out_of_the_models_bounds_are_refused(ids, bounds, message):
    assert _refused(_check_elmo_values, {"char_ids": ids}, bounds) == (INVALID, message)


def test_a_code_point_signature_checks_its_own_ids():
    specs = _specs(CODEPOINT_CONFIG)
    ids = _ids((1, 2, 51), c0=126, c50=32)
    assert specs["char_ids"].validate({"char_ids": ids}) == 1
    ids[..., 50] = 33
    assert _refused(specs["char_ids"].validate, {"char_ids": ids}) == (INVALID, WORD_IDS)


class _Recorder:
    """The measurements handed to a ``RequestLimits``."""

    def __init__(self):
        self.calls = []

    def check_token_lists(self, alias, token_counts, token_bytes):
        self.calls.append(("token lists", alias, token_counts, token_bytes))

    def check(self, name, value, what):
        self.calls.append(("check", name, value, what))


@pytest.mark.parametrize(
    ("array", "call"),
    [
        # split as the model splits them; a token's bytes as sent, str or not UTF-8
        (
            _strings(b"the  cat", b"", b"caf\xc3\xa9 \xff\xfe\xfd\xfc\xfb\xfa", "a b c"),
            ("token lists", "sentences", [2, 0, 2, 3], 6),
        ),
        (_strings(b"", b"  "), ("token lists", "sentences", [0, 0], 0)),
        (
            _strings([b"ab", b"\xff\xfe\xfd"], [b"", b"x"]),
            ("check", "max_token_bytes", 3, "input 'sentences' has a 3-byte token"),
        ),
        (
            np.zeros((2, 0), object),
            ("check", "max_token_bytes", 0, "input 'sentences' has a 0-byte token"),
        ),
    ],
    ids=["sentences", "no tokens", "token lists", "no token lists"],
)
def test_strings_are_measured_as_the_model_splits_them(array, call):
    limits = _Recorder()
    _check_strings("sentences", array, limits)
    assert limits.calls == [call]
