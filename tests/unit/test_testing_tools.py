"""The helpers the benchmarks and the load test share (``elmo_tf.testing``): the State of the
Union text's splitting and tokenising, and the servers' tables and percentiles."""

import pytest

from elmo_tf.testing import processes, sotu_text


def test_speeches_split_into_sentences_without_annotations():
    text = (
        "We won [Applause] the day [the vote; White House correction].\n\n"
        "Mrs. Jones came. Then J. Doe left."
    )
    # a title or an initial ends no sentence; a paragraph break always does
    assert list(sotu_text.sentences_of(text)) == [
        "We won the day the vote.",
        "Mrs. Jones came.",
        "Then J. Doe left.",
    ]


def test_a_sentence_is_tokenised_the_bundled_models_way():
    assert sotu_text.tokenise("The Union is strong, isn't it?") == [
        "The", "Union", "is", "strong", ",", "isn't", "it", "?",
    ]  # fmt: skip


def test_percentiles_interpolate_between_ranks():
    assert processes.percentile([4, 1, 3, 2], 50) == 2.0
    assert processes.percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)
    assert processes.percentile([], 50) is None


def test_tables_in_both_styles():
    columns = [("name", "n", "{}"), ("rate", "r", "{:,.1f}")]
    rows = [{"n": "tf", "r": 1234.56}, {"n": "jax", "r": None}]
    assert processes.format_table(columns, rows) == "name     rate\n  tf  1,234.6\n jax      n/a"
    assert processes.format_table(columns, rows[:1], style="markdown") == (
        "| name | rate |\n|---|---:|\n| tf | 1,234.6 |"
    )
    with pytest.raises(ValueError, match="style must be 'plain' or 'markdown'"):
        processes.format_table(columns, rows, style="html")
