"""Fuzz target: an ELMoForManyLangs model's two JSON configs, ``config.json`` (the trainer's
arguments: ``efml_folder.parse_train_config``, its ``config_path``) and the model config
(``parse_model_config``: the encoder's and the token embedder's hyper-parameters); and the
places inside a folder ``config_path`` leads to (``config_candidates``).

The input: its first byte picks the file (even: ``config.json``, odd: the model config), the
rest is the file's bytes. The seed corpus: the tiny model's two files, as EFML wrote them, and
EFML's bundled standard model config.

The contract: a ``config_path`` whose candidates all stay inside the folder, or a
``ModelConfig`` with positive sizes; or a ``ForeignModelError`` of one line; never another
exception, nor more memory than ``MEMORY_FACTOR`` times the input.
"""

import json
import os
import pathlib

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import efml_folder
from elmo_tf.testing.memory import check_bounded, peak_bytes

ROOT = pathlib.Path(__file__).resolve().parents[1]
EFML = ROOT / "tests/fixtures/efml/tiny"
MEMORY_FACTOR = 64  # JSON's objects cost many times their text
DICTIONARY = [b'"config_path"', b'"encoder"', b'"token_embedder"', b'"filters"', b'"elmo"',
              b'"cnn"', b"../", b"/", b"\\\\", b"[[", b"null", b"1e999"]  # fmt: skip


def _parse(data):
    if data[0] % 2 == 0:
        path = efml_folder.parse_train_config(data[1:], "config.json")
        return path, efml_folder.config_candidates(path)
    return efml_folder.parse_model_config(data[1:], "model.json"), None


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    if not data:
        return
    outcome, peak = peak_bytes(_parse, data)
    check_bounded(data, peak, MEMORY_FACTOR)
    if isinstance(outcome, ForeignModelError):
        message = str(outcome)
        assert message.startswith(("config.json: ", "model.json: ")), repr(message)
        assert "\n" not in message and len(message) < 1000, repr(message)
        return
    if isinstance(outcome, Exception):
        raise outcome
    parsed, candidates = outcome
    if candidates is not None:  # every place tried lies inside the folder
        for candidate in candidates:
            assert not os.path.isabs(candidate), candidate
            assert os.path.normpath(candidate).split(os.sep)[0] != os.pardir, candidate
        return
    assert parsed.filters and all(w >= 1 and n >= 1 for w, n in parsed.filters)
    assert min(parsed.char_dim, parsed.projection_dim, parsed.dim, parsed.n_layers) >= 1


def seed_corpus():
    standard = json.dumps(efml_folder.STANDARD_CONFIG).encode()
    return [b"\x00" + (EFML / "config.json").read_bytes(),
            b"\x01" + (EFML / "cnn_tiny.json").read_bytes(), b"\x01" + standard]  # fmt: skip
