"""The records the Beam pipeline writes: one per input line, and one per dead letter.

A line's record (both formats hold the same fields):

===============  =======================  ==================================================
field            type                     meaning
===============  =======================  ==================================================
``source``       string                   the input file's path, as the glob matched it
``line``         int64                    the line's 0-based number in that file
``tokens``       list of string           the line split on whitespace (``[]``: blank line)
``shape``        list of int32 (int64 in  ``[L + 1, n, 2P]`` (``--layers all``) or
                 TFRecord)                ``[n, 2P]`` (``top``, ``average``); ``n`` tokens
``embeddings``   list of float32          the vectors, flattened in C order; reshape with
                 (TFRecord: bytes)        ``shape``. The numbers ``elmo-tf embed`` writes
===============  =======================  ==================================================

Parquet (``PARQUET_SCHEMA``): ``embeddings`` is ``list<float32>``, so
``np.asarray(row["embeddings"], np.float32).reshape(row["shape"])`` restores the array.

TFRecord: one ``tf.train.Example`` per line; ``embeddings`` is one ``bytes_list`` value
holding the float32 array little-endian in C order (a ``float_list`` would cost a Python
float per number to write and read), so in a ``tf.data`` pipeline::

    features = tf.io.parse_single_example(serialized, tfrecord_features())
    shape = tf.sparse.to_dense(features["shape"])
    vectors = tf.reshape(tf.io.decode_raw(features["embeddings"], tf.float32), shape)

A dead letter (``PREFIX-dead-letters-SSSSS-of-NNNNN.jsonl``, one JSON object a line):
``{"source": ..., "line": ..., "reason": ...}``.
"""

import json

import numpy as np


def parquet_schema():
    """The pyarrow schema of the Parquet files (see the module docstring)."""
    # lazy: the Parquet format only
    import pyarrow as pa

    return pa.schema(
        [
            ("source", pa.string()),
            ("line", pa.int64()),
            ("tokens", pa.list_(pa.string())),
            ("shape", pa.list_(pa.int32())),
            ("embeddings", pa.list_(pa.float32())),
        ]
    )


def tfrecord_features():
    """``tf.io.parse_single_example``'s feature spec for the TFRecord Examples."""
    # lazy: the TFRecord format only (a Parquet job or reader needs no TensorFlow)
    import tensorflow as tf

    return {
        "source": tf.io.FixedLenFeature([], tf.string),
        "line": tf.io.FixedLenFeature([], tf.int64),
        "tokens": tf.io.VarLenFeature(tf.string),
        "shape": tf.io.VarLenFeature(tf.int64),
        "embeddings": tf.io.FixedLenFeature([], tf.string),
    }


def line_record(source, line, tokens, embeddings):
    """A line's record as a dict; ``embeddings`` stays a float32 numpy array."""
    embeddings = np.asarray(embeddings, dtype=np.float32)
    return {
        "source": source,
        "line": int(line),
        "tokens": list(tokens),
        "shape": list(embeddings.shape),
        "embeddings": embeddings,
    }


def parquet_row(record):
    """``record`` with its embeddings flattened, as ``WriteToParquet`` takes it."""
    return {**record, "embeddings": record["embeddings"].reshape(-1)}


def tf_example(record):
    """``record`` as a serialised ``tf.train.Example``."""
    # lazy: the TFRecord format only (a Parquet job or reader needs no TensorFlow)
    from tensorflow.core.example import example_pb2, feature_pb2

    def bytes_feature(values):
        return feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=values))

    def int_feature(values):
        return feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=values))

    vectors = np.ascontiguousarray(record["embeddings"], dtype="<f4")
    features = {
        "source": bytes_feature([record["source"].encode("utf-8")]),
        "line": int_feature([record["line"]]),
        "tokens": bytes_feature([t.encode("utf-8") for t in record["tokens"]]),
        "shape": int_feature(record["shape"]),
        "embeddings": bytes_feature([vectors.tobytes()]),
    }
    example = example_pb2.Example(features=feature_pb2.Features(feature=features))
    return example.SerializeToString()


def dead_letter(source, line, reason):
    """A dead letter as one JSON line."""
    return json.dumps({"source": source, "line": int(line), "reason": reason}, ensure_ascii=False)
