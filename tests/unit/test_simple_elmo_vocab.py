"""The first tokens of simple_elmo's vocabulary file (``elmo_tf.foreign.simple_elmo_vocab``):
plain and gzip'ed, blank lines and bilm-tf's marker skipped, the read bounded, and each file
that cannot be read refused in one line naming it."""

import gzip

import pytest

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import simple_elmo_vocab

VOCABULARY = b"<S>\n</S>\n<UNK>\n!!!MAXTERMID\n the \n\nNew York\n,\n"


def _refusal(path):
    with pytest.raises(ForeignModelError) as error:
        simple_elmo_vocab.read_head(path)
    return str(error.value)


@pytest.mark.parametrize("name", ["vocab.txt", "vocab.txt.gz"])
def test_the_tokens_are_the_lines_stripped_without_blanks_and_the_marker(tmp_path, name):
    path = tmp_path / name
    data = gzip.compress(VOCABULARY) if name.endswith(".gz") else VOCABULARY
    path.write_bytes(data)
    tokens = ["<S>", "</S>", "<UNK>", "the", "New York", ","]
    assert simple_elmo_vocab.read_head(path) == tokens  # a Path, or a str
    assert simple_elmo_vocab.read_head(str(path)) == tokens


def test_count_counts_lines_blank_ones_and_the_marker_included(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(VOCABULARY)
    assert simple_elmo_vocab.read_head(path, 3) == ["<S>", "</S>", "<UNK>"]
    assert simple_elmo_vocab.read_head(path, 6) == ["<S>", "</S>", "<UNK>", "the"]
    path.write_bytes(b"a\n\nb\nc\n")
    assert simple_elmo_vocab.read_head(path, 3) == ["a", "b"]


def test_no_more_than_max_head_bytes_are_read(tmp_path, monkeypatch):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"ab\ncd\nef\ngh\n")
    monkeypatch.setattr(simple_elmo_vocab, "MAX_HEAD_BYTES", 8)
    assert simple_elmo_vocab.read_head(path) == ["ab", "cd", "ef"]
    gz = tmp_path / "vocab.txt.gz"
    gz.write_bytes(gzip.compress(b"ab\ncd\nef\ngh\n"))
    assert simple_elmo_vocab.read_head(gz) == ["ab", "cd", "ef"]  # 8 bytes decompressed


def test_a_file_that_is_not_there_or_empty_is_refused_naming_it(tmp_path):
    path = tmp_path / "vocab.txt"
    assert _refusal(path) == f"{path}: vocabulary not found"
    path.write_bytes(b"")
    assert _refusal(path) == f"{path}: vocabulary is empty"


def test_a_gz_name_on_a_file_that_is_not_gzip_is_refused(tmp_path):
    path = tmp_path / "vocab.txt.gz"
    path.write_bytes(b"<S>\n</S>\n")
    assert _refusal(path) == (f"{path}: not a readable vocabulary (Not a gzipped file (b'<S'))")
    path.write_bytes(gzip.compress(b"<S>\n</S>\n")[:12])  # cut short
    assert _refusal(path) == (
        f"{path}: not a readable vocabulary (Compressed file ended before the end-of-stream "
        "marker was reached)"
    )


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"<S>\nab\xffc\n")
    assert _refusal(path) == f"{path}: not UTF-8 text (invalid start byte)"
    gz = tmp_path / "vocab.txt.gz"
    gz.write_bytes(gzip.compress(b"<S>\nab\xffc\n"))
    assert _refusal(gz) == f"{gz}: not UTF-8 text (invalid start byte)"
