"""``elmo_tf.checks.shown``: the one way an error message quotes a value it was given."""

from elmo_tf.checks import SHOWN_CHARS, shown


def test_a_short_value_is_its_repr():
    assert shown("sigmoid") == "'sigmoid'"
    assert shown(3.5) == "3.5"
    assert shown([4096]) == "[4096]"
    assert shown(None) == "None"
    assert shown("a\nb") == "'a\\nb'"  # one line
    assert shown("a\nb", quote=False) == "a\\nb"


def test_a_long_string_is_cut_and_says_its_length():
    text = "x" * 100_000
    assert shown(text) == "'" + "x" * SHOWN_CHARS + "... (100000 characters)'"
    assert shown(text, quote=False) == "x" * SHOWN_CHARS + "... (100000 characters)"
    assert shown(text, 10, quote=False) == "x" * 10 + "... (100000 characters)"


def test_large_and_deep_values_stay_short():
    assert shown(10**5000) == "<a very large integer>"  # str() refuses it
    assert len(shown(10**60)) < 50
    listed = shown(list(range(1000)))
    assert listed.startswith("[0, 1, 2,") and listed.endswith("...]") and len(listed) < 60
    nested = 1
    for _ in range(500):
        nested = [nested]
    assert shown(nested) == "[[[[...]]]]"
    assert len(shown({"k" * 1000: ["v" * 1000] * 1000})) <= SHOWN_CHARS
