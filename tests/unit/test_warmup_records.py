"""Warm-up records read before TensorFlow: bad lengths refused, a length trusted only once its
checksum matches, a short tail ends the file as in TensorFlow, a path that is no file refused,
TF Serving's limit of 1,000 records at its edge."""

import re
import struct

import pytest
from support.special_files import special_file

from elmo_tf.export.saved_model_warmup import (
    MAX_RECORDS,
    WARMUP_FILE,
    masked_crc32c,
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
        # the length's CRC right, the data's wrong: TensorFlow's reader finds it
        (
            bytes.fromhex("0500000000000000eab2043e") + b"hello\0\0\0\0",
            "record 1 is corrupt (corrupted record at 12",
        ),
    ],
    ids=["length past the end", "bad data CRC"],
)
def test_records_with_bad_lengths_are_refused_before_tensorflow_reads_them(tmp_path, data, message):
    with pytest.raises(ValueError, match="^" + re.escape(f"{WARMUP_FILE}: {message}")):
        read_warmup_requests(_warmup_file(tmp_path, data))


def test_the_checksum_is_tfrecords_masked_crc32c():
    # CRC32C's check value (of "123456789") is 0xe3069283; TFRecord masks it.
    crc = 0xE3069283
    assert masked_crc32c(b"123456789") == ((crc >> 15 | crc << 17) + 0xA282EAD8) % 2**32
    assert masked_crc32c(struct.pack("<Q", 2**40)) == 0xE46B3DAA  # HUGE_RECORD's header


def test_a_file_of_zeros_is_a_corrupt_first_record(tmp_path):
    # Read as 1,001 empty records, it was refused as "more than 1000 warm-up records".
    path = _warmup_file(tmp_path, bytes(16 * (MAX_RECORDS + 1)))
    with pytest.raises(
        ValueError,
        match="^" + re.escape(f"{WARMUP_FILE}: record 1 is corrupt (its length's checksum does"),
    ):
        read_warmup_requests(path)


def test_a_length_with_a_flipped_byte_is_corrupt_not_trusted(tmp_path):
    # The second record's length, its top byte flipped: refused as corrupt, not as a record
    # running past the end of the file.
    path = _predict_logs(tmp_path, 3) / WARMUP_FILE
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack_from("<Q", data)
    data[12 + length + 4 + 7] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(
        ValueError,
        match="^" + re.escape(f"{WARMUP_FILE}: record 2 is corrupt (its length's checksum does"),
    ):
        read_warmup_requests(tmp_path)


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


def _predict_logs(tmp_path, count):
    """A warm-up file of ``count`` records, each a ``default`` request of one sentence."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name="elmo", signature_name="default")
    )
    request.inputs["sentences"].CopyFrom(tf.make_tensor_proto([b"a b"]))
    log = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    ).SerializeToString()
    path = tmp_path / WARMUP_FILE
    path.parent.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            writer.write(log)
    return tmp_path


def test_exactly_the_record_limit_is_read_whole(tmp_path):
    requests = read_warmup_requests(_predict_logs(tmp_path, MAX_RECORDS))
    assert len(requests) == MAX_RECORDS and requests[-1][0] == "default"


def test_one_record_past_the_limit_is_refused(tmp_path):
    with pytest.raises(ValueError, match=f"more than {MAX_RECORDS} warm-up records"):
        read_warmup_requests(_predict_logs(tmp_path, MAX_RECORDS + 1))
