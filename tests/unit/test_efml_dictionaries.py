"""ELMoForManyLangs' char.dic and word.dic read as EFML reads them
(``elmo_tf.foreign.efml_dictionaries``): each refusal one exact line naming the file and the
line, the bounds on ids, lines and bytes at their limits. The tiny model's dictionaries and the
fuzzing of the parser: tests/unit/test_efml_folders.py."""

import pytest

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import efml_dictionaries


def _refusal(data, source="char.dic", **options):
    with pytest.raises(ForeignModelError) as error:
        efml_dictionaries.parse_dictionary(data, source, **options)
    return str(error.value)


def test_a_file_is_read_with_its_path_in_every_error(tmp_path):
    path = tmp_path / "char.dic"
    path.write_bytes(b"a\t0\nb\t1\n")
    assert efml_dictionaries.read_dictionary(path) == {"a": 0, "b": 1}
    assert efml_dictionaries.read_dictionary(path, max_bytes=8) == {"a": 0, "b": 1}
    with pytest.raises(ForeignModelError) as error:
        efml_dictionaries.read_dictionary(path, max_bytes=7)
    assert str(error.value) == (
        f"{path}: larger than 7 bytes, not a dictionary (a char.dic or word.dic)"
    )
    path.write_bytes(b"a\t0\nb\t1\nb\t2\n")
    with pytest.raises(ForeignModelError) as error:
        efml_dictionaries.read_dictionary(path)
    assert str(error.value).startswith(f"{path}: line 3 gives 'b' again")


def test_a_missing_or_empty_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "word.dic"
    with pytest.raises(ForeignModelError) as error:
        efml_dictionaries.read_dictionary(path)
    assert str(error.value) == f"{path}: dictionary not found"
    path.write_bytes(b"\n \n")
    with pytest.raises(ForeignModelError) as error:
        efml_dictionaries.read_dictionary(path)
    assert str(error.value) == f"{path}: dictionary is empty"


def test_bytes_without_a_line_are_refused_naming_the_dictionary():
    with pytest.raises(ForeignModelError) as error:
        efml_dictionaries.parse_dictionary(b"")
    assert str(error.value) == "dictionary: holds no token<TAB>id line"
    with pytest.raises(ForeignModelError) as error:
        efml_dictionaries.parse_dictionary(b"a\tx")
    assert str(error.value) == "dictionary: line 1: the id 'x' is not a decimal number"


def test_as_many_lines_as_the_table_has_rows_are_read_one_more_refused():
    data = b"a\t0\nb\t1\nc\t2\n"
    assert efml_dictionaries.parse_dictionary(data, "char.dic", 3) == {"a": 0, "b": 1, "c": 2}
    assert _refusal(data, max_entries=2) == (
        "char.dic: holds 3 lines, more than the 2 entries its table can have"
    )
    assert _refusal(b"a\t0\n" * 1500, max_entries=1000) == (
        "char.dic: holds 1,500 lines, more than the 1,000 entries its table can have"
    )


def test_an_empty_line_is_refused_saying_what_a_line_holds():
    assert _refusal(b"a\t0\n\t\nb\t1\n") == (
        "char.dic: line 2 is empty (or holds only a line break EFML splits at); each line is "
        "token<TAB>id"
    )


def test_a_line_of_three_fields_is_quoted_to_60_characters():
    line = "a" * 70 + "\tb\t1"
    assert _refusal(f"x\t0\n{line}\n".encode()) == (
        "char.dic: line 2 has 3 tab-separated fields, expected token<TAB>id: "
        f"'{'a' * 60}... (74 characters)'"
    )


def test_an_id_of_18_digits_is_read_one_of_19_refused():
    assert efml_dictionaries.parse_dictionary(b"a\t000000000000000007") == {"a": 7}
    assert _refusal(b"a\t0000000000000000007") == (
        "char.dic: line 1: the id '0000000000000000007' is not a decimal number"
    )


def test_an_id_that_is_no_decimal_number_is_quoted_to_30_characters():
    assert _refusal(("a\t" + "x" * 40).encode()) == (
        f"char.dic: line 1: the id '{'x' * 30}... (40 characters)' is not a decimal number"
    )
    assert _refusal("a\t١".encode()) == (  # an Arabic-Indic digit: a digit, not ASCII
        "char.dic: line 1: the id '١' is not a decimal number"
    )


def test_a_token_given_twice_is_quoted_to_30_characters():
    token = "t" * 40
    assert _refusal(f"{token}\t0\nb\t1\n{token}\t2\n".encode()) == (
        f"char.dic: line 3 gives '{'t' * 30}... (40 characters)' again (first on line 1; EFML "
        "would keep this line's id)"
    )
