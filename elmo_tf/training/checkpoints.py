"""The files of a training directory, and reading a trained biLM back from them.

A checkpoint directory holds:

==========================  ===========================================================
``options.json``            the architecture (bilm-tf's options schema)
``vocab.txt``               the softmax vocabulary (bilm-tf's format)
``training_options.json``   ``TrainingOptions``, vocabulary size, corpus summary, origin
``checkpoint``, ``ckpt-N``  ``tf.train.Checkpoint`` files: ``model`` (the
                            ``BidirectionalLanguageModel``), ``optimizer``, ``step``, and
                            the carried LSTM state of every batch row (``lstm_cell``,
                            ``lstm_hidden``). The data position and every random draw are
                            functions of ``step`` and the seed, so these make resumption
                            exact.
``logs/``                   TensorBoard summaries (default ``--logdir``)
==========================  ===========================================================
"""

import dataclasses
import json
import os

import h5py
import numpy as np

from elmo_tf import files
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import CheckpointError
from elmo_tf.training.vocabulary import Vocabulary
from elmo_tf.weight_file import open_untrusted, save_weights

OPTIONS_FILE = "options.json"
VOCAB_FILE = "vocab.txt"
TRAINING_OPTIONS_FILE = "training_options.json"
SOFTMAX_FILE = "softmax.hdf5"
WEIGHTS_FILE = "weights.hdf5"


def variable_map(variables):
    """A ``tf.train.Checkpoint`` holding ``variables`` under their Keras paths.

    Checkpoints name every variable by its path (``elmo/bilstm/forward_0/kernel``,
    ``adagrad/..._accumulator``) rather than through Keras' object graph, which does not
    reach every sublayer's variables (Keras 3 tracks layers, not lists of weights).
    """
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    named = {}
    for variable in variables:
        key = variable.path.replace("/", ".")
        if key in named:
            raise ValueError(f"two variables share the path {variable.path!r}")
        named[key] = variable
    return tf.train.Checkpoint(**named)


def find_checkpoint(path):
    """``(directory, checkpoint prefix)`` for a checkpoint directory or a ``ckpt-N`` prefix."""
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    path = os.fspath(path)
    if os.path.isdir(path):
        prefix = tf.train.latest_checkpoint(path)
        if prefix is None:
            raise CheckpointError(f"{path}: no checkpoint in this directory")
        return path, prefix
    if os.path.exists(path + ".index"):
        return os.path.dirname(os.path.abspath(path)), path
    raise CheckpointError(f"{path}: neither a checkpoint directory nor a checkpoint prefix")


def read_training_options(directory):
    """The parsed ``training_options.json`` of a checkpoint directory."""
    path = os.path.join(directory, TRAINING_OPTIONS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; not a training directory") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot read training options ({e})") from None


def restore_language_model(path):
    """Rebuilds the biLM of a checkpoint (directory: its newest) and restores its weights.

    Returns ``(model, vocabulary, step)``.
    """
    # lazy: plan_training reads a run's files before TensorFlow starts
    import tensorflow as tf

    # lazy: plan_training reads a run's files before TensorFlow starts
    from elmo_tf.training.bidirectional_language_model import BidirectionalLanguageModel

    directory, prefix = find_checkpoint(path)
    saved = read_training_options(directory)
    config = ElmoConfig.from_file(os.path.join(directory, OPTIONS_FILE))
    vocabulary = Vocabulary.from_file(os.path.join(directory, VOCAB_FILE))
    training = saved["training"]
    model = BidirectionalLanguageModel(
        config,
        len(vocabulary),
        dropout=training["dropout"],
        num_sampled=training["num_sampled"],
        reset_state_per_sentence=training.get("reset_state_per_sentence", False),
    )
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=variable_map(model.weights), step=step)
    checkpoint.restore(prefix).expect_partial().assert_existing_objects_matched()
    return model, vocabulary, int(step.numpy())


def save_softmax(model, path, dtype="float32"):
    """Writes the softmax ``softmax/W`` ``(V, P)`` and ``softmax/b`` ``(V,)`` to HDF5,
    replacing ``path`` atomically. ``dtype`` ``"float16"`` halves the file (the weights are
    rounded to float16; :func:`load_softmax` reads them back as float32). The file's
    ``reset_state_per_sentence`` attribute records how the biLM reads text, so that
    ``elmo-tf evaluate`` reads it the same way."""
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype must be 'float32' or 'float16', got {dtype!r}")
    with files.atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.create_dataset("softmax/W", data=np.asarray(model.softmax_weights.numpy(), dtype))
        f.create_dataset("softmax/b", data=np.asarray(model.softmax_bias.numpy(), np.float32))
        f.attrs["reset_state_per_sentence"] = bool(model.reset_state_per_sentence)


def softmax_reads_per_sentence(path):
    """The ``reset_state_per_sentence`` recorded in a softmax file (``False`` if absent)."""
    with open_untrusted(path) as f:
        return bool(f.attrs.get("reset_state_per_sentence", False))


def load_softmax(model, path):
    """Loads a file written by :func:`save_softmax`; raises ``CheckpointError`` on a misfit."""
    expected = {
        "softmax/W": tuple(model.softmax_weights.shape),
        "softmax/b": tuple(model.softmax_bias.shape),
    }

    try:
        with open_untrusted(path) as f:
            values = {}
            for name, shape in expected.items():
                if name not in f:
                    raise CheckpointError(f"{path}: missing dataset '{name}'")
                if tuple(f[name].shape) != shape:
                    raise CheckpointError(
                        f"{path}: dataset '{name}' has shape {tuple(f[name].shape)}, expected "
                        f"{shape} for this vocabulary"
                    )
                if f[name].dtype not in (np.float16, np.float32):
                    raise CheckpointError(
                        f"{path}: dataset '{name}' has dtype {f[name].dtype}, expected float32 "
                        "or float16"
                    )
                values[name] = f[name][...].astype(np.float32)
                if not np.isfinite(values[name]).all():
                    raise CheckpointError(f"{path}: dataset '{name}' holds NaN or infinity")
    except OSError as e:
        raise CheckpointError(f"{path}: not a readable HDF5 file ({e})") from None
    model.softmax_weights.assign(values["softmax/W"])
    model.softmax_bias.assign(values["softmax/b"])


def dump_weights(checkpoint, outdir, softmax_dtype="float32"):
    """Writes a checkpoint's biLM as official files: ``options.json`` (``n_characters``
    262, the inference value), ``weights.hdf5`` (bilm-tf's layout), ``vocab.txt`` and
    ``softmax.hdf5`` (in ``softmax_dtype``, see :func:`save_softmax`), each replaced
    atomically. Returns ``(outdir, step)``.
    """
    model, vocabulary, step = restore_language_model(checkpoint)
    os.makedirs(outdir, exist_ok=True)
    config = dataclasses.replace(model.config, n_characters=262)
    config.save(os.path.join(outdir, OPTIONS_FILE))
    save_weights(model.elmo, os.path.join(outdir, WEIGHTS_FILE))
    vocabulary.save(os.path.join(outdir, VOCAB_FILE))
    save_softmax(model, os.path.join(outdir, SOFTMAX_FILE), softmax_dtype)
    return outdir, step
