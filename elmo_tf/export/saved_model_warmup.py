"""TF Serving's warm-up records of an ELMo SavedModel: ``assets.extra/tf_serving_warmup_requests``.

TF Serving reads this file when it loads a version and runs each record's request before it
reports the version AVAILABLE, so that the first client request does not pay the graph's
initialisation (its optimisation passes, the kernels' first runs); ``elmo-tf serve``
(``elmo_tf.serving.model_manager``) does the same. The file is a TFRecord file of
``tensorflow.serving.PredictionLog`` protos, each holding a ``PredictRequest``: one per
signature of ``elmo_tf.export.saved_model_module`` (``default``, ``tokens``, ``char_ids``),
each on ``WARMUP_SENTENCE``. As in TF Serving, a record that does not parse or whose request
fails makes the load fail, and a file of more than ``MAX_RECORDS`` records is refused.
"""

import os
import re
import struct

import numpy as np

from elmo_tf.system import files
from elmo_tf.tokens import characters

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# TF Serving's limit (WarmupConsts::kMaxNumRecords): a longer file fails the load.
MAX_RECORDS = 1000
# A short sentence: the first request's cost is the graph's, whatever its length.
WARMUP_SENTENCE = ("The", "bank", "closed", ".")
SIGNATURES = ("default", "tokens", "char_ids")
# A TFRecord: a little-endian uint64 length and its 4-byte CRC, the data, the data's 4-byte CRC.
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER_BYTES = _LENGTH.size + _CRC.size
_FOOTER_BYTES = _CRC.size
# CRC32C (Castagnoli; reflected polynomial 0x82F63B78) and TFRecord's mask of it.
_CRC32C_POLYNOMIAL = 0x82F63B78
_MASK_DELTA = 0xA282EAD8


def warmup_inputs(token_mapper=None):
    """``{signature: {input alias: numpy array}}``: the request of each record (``char_ids``
    from ``token_mapper``, the model's: ``ELMo.token_mapper``; default bilm-tf's)."""
    to_ids = characters.batch_to_ids if token_mapper is None else token_mapper.batch_to_ids
    tokens = np.array([list(WARMUP_SENTENCE)], dtype=object)
    return {
        "default": {"sentences": np.array([" ".join(WARMUP_SENTENCE)], dtype=object)},
        "tokens": {"tokens": tokens, "sequence_len": np.array([len(WARMUP_SENTENCE)], np.int32)},
        "char_ids": {"char_ids": to_ids([list(WARMUP_SENTENCE)])},
    }


def write_warmup_requests(saved_model_dir, model_name="elmo", token_mapper=None):
    """Writes the warm-up records into the SavedModel directory ``saved_model_dir``; returns
    the file's path. ``model_name`` goes into each request's ``model_spec`` (TF Serving runs a
    record on the version it is loading, whatever name it holds)."""
    import tensorflow as tf  # lazy: the export runs on TensorFlow; the reader's caller too
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2  # lazy: same

    path = os.path.join(saved_model_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for signature, inputs in warmup_inputs(token_mapper).items():
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature)
            )
            for alias, value in inputs.items():
                request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir):
    """``[(signature name, {input alias: TensorProto})]`` of the SavedModel's warm-up records,
    in file order; ``[]`` when it has no warm-up file. ``ValueError`` for a record that is not
    a ``PredictionLog`` of a ``PredictRequest``, or more than ``MAX_RECORDS`` records
    (``check_record_lengths``). The tensors stay protos: a proto may declare ``[10**7]`` and
    hold one value, so the caller checks each declared shape before it makes an array
    (``elmo_tf.serving.tensors.from_tensor_proto``)."""
    import tensorflow as tf  # lazy: the reader runs in the server, on TensorFlow
    from tensorflow_serving.apis import prediction_log_pb2  # lazy: the [serving] extra

    path = os.path.join(saved_model_dir, WARMUP_FILE)
    if not os.path.lexists(path):
        return []
    check_record_lengths(path)
    requests = []
    records = tf.data.TFRecordDataset(path).as_numpy_iterator()
    for number in range(1, MAX_RECORDS + 1):  # check_record_lengths counted them
        try:
            record = next(records)
        except StopIteration:
            break
        except tf.errors.OpError as e:  # the lengths fit (checked above): a CRC that does not
            reason = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", e.message).strip()
            raise ValueError(f"{WARMUP_FILE}: record {number} is corrupt ({reason})") from None
        log = prediction_log_pb2.PredictionLog()
        try:
            log.ParseFromString(record)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, whichever implementation
            raise ValueError(f"{WARMUP_FILE}: record {number} is not a PredictionLog") from None
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{WARMUP_FILE}: record {number} holds no PredictRequest")
        request = log.predict_log.request
        inputs = dict(request.inputs.items())
        requests.append((request.model_spec.signature_name or "serving_default", inputs))
    return requests


def check_record_lengths(path):
    """Walks the TFRecord headers of the warm-up file ``path``; ``ValueError`` (one line) for a
    path that is not a regular file, a record whose declared length runs past the end of the
    file, or more than ``MAX_RECORDS`` records. Bytes after the last record too few for a
    header end the file, as they do for TensorFlow's reader.

    The smallest guard of our own (the rule: check declared sizes before allocating):
    ``tf.data.TFRecordDataset`` allocates a record's declared length before it reads it, and a
    header declaring 2**40 bytes kills the process (a segmentation fault, no exception), so
    every length is checked against the file's size first; TensorFlow then reads the records
    and checks their CRCs.

    Each length is trusted only once its own CRC matches (``masked_crc32c``): a file of zeros,
    or a length with a flipped bit, is a corrupt record, not a count of empty records.
    """
    if os.path.isdir(path):
        raise ValueError(f"{WARMUP_FILE}: is a directory, not a file of TFRecords")
    if kind := files.special_kind(path):
        raise ValueError(f"{WARMUP_FILE}: is a {kind}, not a file of TFRecords")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset = number = 0
        while offset < size:
            number += 1
            if number > MAX_RECORDS:
                raise ValueError(f"{WARMUP_FILE}: more than {MAX_RECORDS} warm-up records")
            f.seek(offset)
            header = f.read(_HEADER_BYTES)
            if len(header) < _HEADER_BYTES:
                return  # TensorFlow's reader (and TF Serving) end the file at a partial header
            (length,) = _LENGTH.unpack_from(header)
            (crc,) = _CRC.unpack_from(header, _LENGTH.size)
            if crc != masked_crc32c(header[: _LENGTH.size]):
                raise ValueError(
                    f"{WARMUP_FILE}: record {number} is corrupt (its length's checksum does not "
                    "match)"
                )
            left = size - offset - _HEADER_BYTES - _FOOTER_BYTES
            if length > left:
                raise ValueError(
                    f"{WARMUP_FILE}: record {number} declares {length:,} bytes, more than the "
                    f"{max(left, 0):,} left in the file"
                )
            offset += _HEADER_BYTES + length + _FOOTER_BYTES


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLYNOMIAL if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE = _crc32c_table()


def masked_crc32c(data):
    """TFRecord's checksum of ``data``: its CRC32C, rotated right by 15 bits plus
    ``0xa282ead8`` (mod 2**32).

    Our own, table-driven and in Python: the reader checks 8 bytes per record header, at most
    ``MAX_RECORDS`` of them, and no package of the base install computes CRC32C
    (``google-crc32c`` comes with the ``[beam]`` extra only).

    >>> hex(masked_crc32c(bytes(8)))  # a header's length of zero
    '0x7980329'
    """
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
