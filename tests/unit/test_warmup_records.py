"""Warm-up records read before TensorFlow: bad lengths refused, a short tail ends the file as in
TensorFlow, a path that is no file refused."""

import re

import pytest
from support.special_files import special_file

from elmo_tf.export.saved_model_warmup import (
    WARMUP_FILE,
    read_warmup_requests,
)


def _warmup_file(tmp_path, data):
    path = tmp_path / WARMUP_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return tmp_path


# A record header declaring 2**40 bytes, its length CRC correct (TensorFlow's reader allocated
# the declared length and the process died of a segmentation fault), then 64 bytes.
HUGE_RECORD = bytes.fromhex("0000000000010000aa3d6be4") + b"\0" * 64


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (HUGE_RECORD, "record 1 declares 1,099,511,627,776 bytes, more than the 60 left"),
        (b"\x05\0\0\0\0\0\0\0\0\0\0\0hello\0\0\0\0", "record 1 is corrupt (corrupted record at 0"),
    ],
    ids=["length past the end", "bad CRC"],
)
def test_records_with_bad_lengths_are_refused_before_tensorflow_reads_them(tmp_path, data, message):
    with pytest.raises(ValueError, match="^" + re.escape(f"{WARMUP_FILE}: {message}")):
        read_warmup_requests(_warmup_file(tmp_path, data))


def test_bytes_too_few_for_a_header_end_the_file_as_in_tensorflow(tmp_path):
    # TF Serving loads a file with a partial header at its end (its reader stops there).
    assert read_warmup_requests(_warmup_file(tmp_path, b"\x05" + b"\0" * 10)) == []


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_records_path_that_is_no_file_is_refused(tmp_path, kind):
    path = tmp_path / WARMUP_FILE
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        special_file(path, "fifo")
        expected = "is a named pipe, not a file of TFRecords"
    else:
        path.mkdir()
        expected = "is a directory, not a file of TFRecords"
    with pytest.raises(ValueError, match=re.escape(f"{WARMUP_FILE}: {expected}")):
        read_warmup_requests(tmp_path)
