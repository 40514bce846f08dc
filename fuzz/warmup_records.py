"""Fuzz target: a SavedModel's TF Serving warm-up records (``assets.extra/
tf_serving_warmup_requests``), as ``elmo-tf serve`` reads them before a version is AVAILABLE:
``check_record_lengths`` walks the TFRecord headers, then TensorFlow reads the records and each
is parsed as a ``PredictionLog``.

The input: its first byte says what the rest is (its value mod 3): the file as it is; the data
of one record, framed with right checksums; or the data of several records, split where
``SEPARATOR`` stands and framed so (random checksums are refused at the first header, so the
fuzzer would not reach TensorFlow's reader or the ``PredictionLog`` parse without them).

The contract (``elmo_tf.export.saved_model_warmup.read_warmup_requests``): a list of at most
1,000 ``(signature, {alias: TensorProto})``, or a ``ValueError`` of one line naming the file
(``assets.extra/tf_serving_warmup_requests: ...``); nothing else, whatever the bytes.
"""

import atexit
import os
import shutil
import tempfile

from elmo_tf.system import extras

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
SEPARATOR = b"\xff\xfe\xfd"  # between records' data, where the harness frames them
DICTIONARY = [SEPARATOR]


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    if not data:
        return
    if data[0] % 3 == 0:  # the file as it is
        contents = data[1:]
    else:  # records of the data, framed with right checksums (random ones are all refused)
        payloads = [data[1:]] if data[0] % 3 == 1 else data[1:].split(SEPARATOR)
        contents = b"".join(_record(payload) for payload in payloads)
    with open(_PATH, "wb") as f:
        f.write(contents)
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
    """The file ``elmo-tf export saved-model`` writes (three requests) as it is, each of its
    records' data to be framed, all of them, and an empty file."""
    directory = tempfile.mkdtemp(prefix="fuzz-warmup-seed-")
    try:
        with open(write_warmup_requests(directory), "rb") as f:
            exported = f.read()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    payloads, offset = [], 0
    while offset < len(exported):
        length = int.from_bytes(exported[offset : offset + 8], "little")
        payloads.append(exported[offset + 12 : offset + 12 + length])
        offset += 12 + length + 4
    return [
        b"\0" + exported,
        *(b"\1" + payload for payload in payloads),
        b"\2" + SEPARATOR.join(payloads),
        b"\0",
    ]
