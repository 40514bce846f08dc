"""Fuzz target: a SavedModel's TF Serving warm-up records (``assets.extra/
tf_serving_warmup_requests``), as ``elmo-tf serve`` reads them before a version is AVAILABLE:
``check_record_lengths`` walks the TFRecord headers, then TensorFlow reads the records and each
is parsed as a ``PredictionLog``.

The contract (``elmo_tf.export.saved_model_warmup.read_warmup_requests``): a list of at most
1,000 ``(signature, {alias: TensorProto})``, or a ``ValueError`` of one line naming the file
(``assets.extra/tf_serving_warmup_requests: ...``); nothing else, whatever the bytes.
"""

import atexit
import os
import shutil
import tempfile

from elmo_tf import extras

extras.require("serving", "fuzz/warmup_records.py")  # PredictionLog, TensorFlow's reader

from elmo_tf.export.saved_model_warmup import (
    MAX_RECORDS,
    WARMUP_FILE,
    masked_crc32c,
    read_warmup_requests,
    write_warmup_requests,
)

_DIRECTORY = tempfile.mkdtemp(prefix="fuzz-warmup-")
atexit.register(shutil.rmtree, _DIRECTORY, ignore_errors=True)
os.makedirs(os.path.join(_DIRECTORY, os.path.dirname(WARMUP_FILE)))
_PATH = os.path.join(_DIRECTORY, WARMUP_FILE)


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    with open(_PATH, "wb") as f:
        f.write(data)
    try:
        requests = read_warmup_requests(_DIRECTORY)
    except ValueError as e:
        message = str(e)
        assert message.startswith(f"{WARMUP_FILE}: ") and "\n" not in message, repr(message)
        return
    assert len(requests) <= MAX_RECORDS
    for signature, inputs in requests:
        assert isinstance(signature, str) and all(isinstance(a, str) for a in inputs)


def _record(data):
    """``data`` framed as one TFRecord (length, its CRC, data, its CRC)."""
    length = len(data).to_bytes(8, "little")
    crc = masked_crc32c(length).to_bytes(4, "little")
    return length + crc + data + masked_crc32c(data).to_bytes(4, "little")


def seed_corpus():
    """The file ``elmo-tf export saved-model`` writes (three requests), one record of it, an
    empty file, and records of a few bytes."""
    directory = tempfile.mkdtemp(prefix="fuzz-warmup-seed-")
    try:
        with open(write_warmup_requests(directory), "rb") as f:
            exported = f.read()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    first = exported[: 12 + int.from_bytes(exported[:8], "little") + 4]
    return [exported, first, b"", _record(b""), _record(b"\x0a\x00") + _record(b"\x12\x00")]
