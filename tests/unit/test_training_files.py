"""The files training reads and writes go through elmo_tf.system.files: atomic writes, one
reader."""

import json
import os

import numpy as np
import pytest

from elmo_tf import presets
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import CorpusError, InputFileError
from elmo_tf.formats import weight_file
from elmo_tf.training import softmax_file
from elmo_tf.training.corpus import read_corpus
from elmo_tf.training.training_options import write_json
from elmo_tf.training.vocabulary import Vocabulary


def test_writers_replace_their_file_and_leave_nothing_else(tmp_path):
    for name in ("vocab.txt", "training_options.json", "options.json"):
        (tmp_path / name).write_text("old\n", encoding="utf-8")
    Vocabulary.from_counts({"cat": 2}).save(tmp_path / "vocab.txt")
    write_json(tmp_path / "training_options.json", {"a": [1, 2]})
    presets.TRAINING_DEFAULT.save(tmp_path / "options.json")
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\ncat\n"
    assert json.loads((tmp_path / "training_options.json").read_text()) == {"a": [1, 2]}
    assert ElmoConfig.from_file(tmp_path / "options.json") == presets.TRAINING_DEFAULT
    assert sorted(os.listdir(tmp_path)) == ["options.json", "training_options.json", "vocab.txt"]


class _Broken:
    def numpy(self):
        raise RuntimeError("interrupted")


class _Softmax:
    softmax_weights = type("W", (), {"numpy": lambda self: np.ones([3, 2], np.float32)})()
    softmax_bias = _Broken()


def test_interrupted_hdf5_writes_keep_the_old_file(tmp_path, monkeypatch):
    softmax, weights = tmp_path / "softmax.hdf5", tmp_path / "weights.hdf5"
    softmax.write_bytes(b"old")
    weights.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="interrupted"):
        softmax_file.save_softmax(_Softmax(), softmax)

    def broken_table(model):
        yield from ()
        raise RuntimeError("interrupted")

    monkeypatch.setattr(weight_file, "weight_table", broken_table)
    with pytest.raises(RuntimeError, match="interrupted"):
        weight_file.save_weights(None, weights)
    assert softmax.read_bytes() == weights.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["softmax.hdf5", "weights.hdf5"]


def test_corpus_and_vocabulary_read_with_the_shared_reader(tmp_path):
    text = tmp_path / "text.txt"
    text.write_bytes("\ufeffthe cat\r\nsat\rcaf\u00e9\n\n".encode())
    assert read_corpus([text]).types == ["<S>", "</S>", "the", "cat", "sat", "caf\u00e9"]
    # A binary file is named by its first NUL byte, even after an undecodable line.
    text.write_bytes(b"caf\xe9\nab\x00\n")
    with pytest.raises(CorpusError, match="binary file \\(NUL byte at byte offset 7\\)"):
        read_corpus([text])
    text.write_bytes(b"the\ncaf\xe9\n")
    with pytest.raises(InputFileError, match="text.txt: line 2 is not valid UTF-8"):
        read_corpus([text])
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"<S>\n</S>\n<UNK>\nthe\x00\n")
    with pytest.raises(InputFileError, match="vocab.txt: line 4 holds a NUL byte"):
        Vocabulary.from_file(vocab)
    with pytest.raises(InputFileError, match="missing.txt: vocabulary file not found"):
        Vocabulary.from_file(tmp_path / "missing.txt")
