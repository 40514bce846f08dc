"""Fuzz target: an ``options.json``, as every loader reads one (``ElmoConfig.from_file``: the
bounded read, strict JSON with no key given twice, the structure, each value's rule, the typo
check and the size limits).

The contract: an ``ElmoConfig`` whose options write back and read again as the same config, or
an ``OptionsError`` of one line naming the file, short (a value is shown cut); nothing else,
whatever the bytes.
"""

import atexit
import json
import os
import pathlib
import shutil
import tempfile

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import OptionsError

ROOT = pathlib.Path(__file__).resolve().parents[1]
_DIRECTORY = tempfile.mkdtemp(prefix="fuzz-options-")
atexit.register(shutil.rmtree, _DIRECTORY, ignore_errors=True)
_PATH = os.path.join(_DIRECTORY, "options.json")
# the format's keys and JSON's edge values
DICTIONARY = [
    b'"lstm"', b'"char_cnn"', b'"filters"', b'"projection_dim"', b'"dim"', b'"n_layers"',
    b'"cell_clip"', b'"proj_clip"', b'"use_skip_connections"', b'"activation"', b'"relu"',
    b'"n_highway"', b'"embedding"', b'"n_characters"', b'"max_characters_per_token"',
    b"NaN", b"Infinity", b"1e400", b"true", b"null", b"262", b"261", b"50", b"[[", b"]]",
]  # fmt: skip


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    with open(_PATH, "wb") as f:
        f.write(data)
    try:
        config = ElmoConfig.from_file(_PATH)
    except OptionsError as e:
        message = str(e)
        assert message.startswith(f"{_PATH}: ") and "\n" not in message, repr(message)
        assert len(message) < 1000, len(message)
        return
    written = os.path.join(_DIRECTORY, "written.json")
    config.save(written)
    assert ElmoConfig.from_file(written) == config


def seed_corpus():
    """Every options file in the tree: the tiny fixtures, bilm-tf's, the published shapes',
    the bundled model's; and one giving only the required keys."""
    paths = [
        ROOT / "tests/fixtures/tiny/options.json",
        ROOT / "tests/fixtures/bilm_fixture/options.json",
        ROOT / "elmo_tf/presets/sotu/options.json",
        *sorted((ROOT / "tests/fixtures/official_options").glob("*.json")),
    ]
    minimal = {
        "lstm": {"projection_dim": 4, "dim": 8},
        "char_cnn": {"filters": [[1, 4]], "activation": "tanh", "n_highway": 0,
                     "embedding": {"dim": 4}},
    }  # fmt: skip
    return [p.read_bytes() for p in paths if p.is_file()] + [json.dumps(minimal).encode()]
