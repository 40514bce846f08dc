"""The word-sense probe (elmo_tf.probes.word_senses, `elmo-tf senses`) on the bundled model."""

import re

import numpy as np
import pytest

from elmo_tf.errors import InputFileError
from elmo_tf.probes import word_senses


def test_bundled_probe_set_is_balanced():
    examples = word_senses.load_examples()
    by_word = {}
    for e in examples:
        assert e.tokens[e.position] == e.word
        by_word.setdefault(e.word, []).append(e.sense)
    assert len(by_word) == 6 and len(examples) == 72
    for senses in by_word.values():
        assert all(senses.count(s) == 6 for s in set(senses))
        assert len(set(senses)) == 2


@pytest.mark.parametrize(
    "line, message",
    [
        ("bank\tmoney\tthe bank and the bank", "use 'bank' exactly once (found 2)"),
        ("bank\tmoney", "expected WORD<TAB>SENSE<TAB>sentence"),
    ],
)
def test_bad_probe_lines_are_named(tmp_path, line, message):
    path = tmp_path / "probe.tsv"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=f"probe.tsv:1: .*{re.escape(message)}"):
        word_senses.load_examples(str(path))


def test_one_sense_is_refused(tmp_path):
    path = tmp_path / "probe.tsv"
    path.write_text("bank\tmoney\tthe bank\nbank\tmoney\ta bank\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="'bank' needs two senses"):
        word_senses.load_examples(str(path))


def test_accuracy_counts_ties_as_chance():
    words = np.array(["w"] * 4)
    labels = [("w", "a"), ("w", "a"), ("w", "b"), ("w", "b")]
    same = np.ones([4, 3])
    assert word_senses._accuracy(same, words, labels) == pytest.approx(1 / 3)
    separated = np.array([[1, 0, 0], [1, 0.1, 0], [0, 1, 0], [0, 1, 0.1]])
    assert word_senses._accuracy(separated, words, labels) == 1.0
