"""Fuzz target: the files of a training run directory that ``train --resume``, ``evaluate`` and
``dump-weights`` read before TensorFlow starts: ``training_options.json`` (the run's settings,
corpus and vocabulary size, ``run_directory.read_training_options``), the checkpoint state file
(``checkpoints.state_file_fault``) and ``vocab.txt`` (``Vocabulary.from_file``).

The input: its first byte picks the file (its value modulo 3), the rest is the file's bytes.

The contract: the parsed settings, a state file's fault in words, or a vocabulary; else one
error of ours (``CheckpointError``, ``VocabularyError``, ``InputFileError``) of one line naming
the file; nothing else, whatever the bytes.
"""

import atexit
import json
import os
import shutil
import tempfile

from elmo_tf.errors import CheckpointError, InputFileError, VocabularyError
from elmo_tf.training import checkpoints, run_directory
from elmo_tf.training.vocabulary import Vocabulary

_DIRECTORY = tempfile.mkdtemp(prefix="fuzz-run-")
atexit.register(shutil.rmtree, _DIRECTORY, ignore_errors=True)
FILES = (run_directory.TRAINING_OPTIONS_FILE, checkpoints.STATE_FILE, run_directory.VOCAB_FILE)
DICTIONARY = [
    b'"training"', b'"corpus"', b'"files"', b'"sentences"', b'"tokens"', b'"vocab_size"',
    b'"init_from"', b'"batch_size"', b'"dropout"', b'"optimizer"', b'"adagrad"',
    b'model_checkpoint_path: "', b'all_model_checkpoint_paths: "', b"ckpt-", b"<S>", b"</S>",
    b"<UNK>", b"\n",
]  # fmt: skip


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    if not data:
        return
    name = FILES[data[0] % len(FILES)]
    path = os.path.join(_DIRECTORY, name)
    with open(path, "wb") as f:
        f.write(data[1:])
    try:
        if name == run_directory.TRAINING_OPTIONS_FILE:
            saved = run_directory.read_training_options(_DIRECTORY)
            assert isinstance(saved, dict) and isinstance(saved["training"], dict)
        elif name == checkpoints.STATE_FILE:
            fault = checkpoints.state_file_fault(_DIRECTORY, "ckpt-6")
            assert fault in (None, "was missing", "was unreadable") or fault.startswith("named ")
        else:
            vocabulary = Vocabulary.from_file(path)
            assert len(vocabulary) >= 3  # <S>, </S>, <UNK> at least
    except (CheckpointError, VocabularyError, InputFileError) as e:
        message = str(e)
        assert message.startswith(f"{path}") and "\n" not in message, repr(message)
        assert len(message) < 1000, len(message)
    finally:
        os.remove(path)


def seed_corpus():
    """A run's files as ``elmo-tf train`` writes them."""
    options = {
        "training": {"batch_size": 4, "unroll_steps": 5, "num_sampled": 8},
        "corpus": {"files": ["train.txt"], "sentences": 50, "tokens": 250},
        "vocab_size": 18,
        "init_from": None,
    }
    state = b'model_checkpoint_path: "ckpt-6"\nall_model_checkpoint_paths: "ckpt-2"\n'
    return [
        b"\x00" + json.dumps(options).encode(),
        b"\x01" + state,
        b"\x02<S>\n</S>\n<UNK>\nthe\ncat\n",
    ]
