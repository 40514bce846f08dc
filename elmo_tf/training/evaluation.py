"""Held-out perplexity of a biLM with the full softmax (bilm-tf's ``test``)."""

import os

import numpy as np

from elmo_tf import backend

backend.require_tensorflow("biLM training")  # one line, before TensorFlow

import tensorflow as tf

from elmo_tf.config import ElmoConfig
from elmo_tf.formats.weight_file import load_weights
from elmo_tf.training import checkpoints, data, run_directory, softmax_file
from elmo_tf.training.bidirectional_language_model import BidirectionalLanguageModel
from elmo_tf.training.perplexity import perplexities
from elmo_tf.training.vocabulary import Vocabulary


def evaluate(model, corpus, vocabulary, batch_size=64, unroll_steps=20):
    """Perplexity of ``model`` on ``corpus``.

    The text is read once in file order, cut into ``batch_size`` contiguous blocks read side
    by side, each in windows of ``unroll_steps`` with the LSTM state carried from window to
    window (as bilm-tf evaluates: stateful, full softmax). Each direction's loss is the mean
    cross-entropy per predicted position (tokens and one sentence boundary per sentence);
    its perplexity is ``exp(loss)``, and the biLM's perplexity is
    ``exp((forward_loss + backward_loss) / 2)``.

    Returns a dict: ``perplexity``, ``forward_perplexity``, ``backward_perplexity``,
    ``forward_loss``, ``backward_loss``, ``sentences``, ``tokens``, ``predictions``
    (positions per direction), ``oov_rate`` (the fraction of tokens that are not in the
    vocabulary and are predicted as ``<UNK>``).
    """
    tables = data.StreamTables(corpus, corpus.type_targets(vocabulary))
    windows = data.evaluation_windows(tables, batch_size, unroll_steps)
    rows = windows[0]["mask"].shape[0]

    @tf.function(reduce_retracing=True)
    def step(window, state):
        inputs = tables.model_inputs(window)
        out = model(inputs, initial_state=state, training=False)
        forward = model.full_loss(out["forward"], inputs["forward_targets"], inputs["mask"])
        backward = model.full_loss(out["backward"], inputs["backward_targets"], inputs["mask"])
        return forward, backward, out["state"]

    state = model.zero_state(rows)
    totals = np.zeros([2], np.float64)
    count = 0.0
    for window in windows:
        (f_sum, f_count), (b_sum, _), state = step(window, state)
        totals += [float(f_sum), float(b_sum)]
        count += float(f_count)
    forward, backward = (float(x) for x in totals / max(count, 1.0))
    return {
        **perplexities(forward, backward),
        "sentences": corpus.n_sentences,
        "tokens": corpus.n_tokens,
        "predictions": int(count),
        "oov_rate": corpus.oov_rate(vocabulary),
    }


def load_for_evaluation(path):
    """A biLM with its softmax, from a checkpoint (directory or prefix) or from the output
    directory of ``elmo-tf dump-weights`` (``options.json``, ``weights.hdf5``,
    ``vocab.txt``, ``softmax.hdf5``). Returns ``(model, vocabulary)``.
    """
    path = os.fspath(path)
    run_directory.check_run_files(path)
    weights = os.path.join(path, run_directory.WEIGHTS_FILE)
    if os.path.isdir(path) and os.path.exists(weights):
        if run_directory.holds_checkpoints(path):
            raise checkpoints.CheckpointError(
                f"{path}: holds both training checkpoints and a dump-weights output "
                f"({run_directory.WEIGHTS_FILE}); name the one to evaluate: {path}/ckpt-N, or "
                "the dump moved to a directory of its own"
            )
        softmax = os.path.join(path, run_directory.SOFTMAX_FILE)
        if not os.path.exists(softmax):
            raise checkpoints.CheckpointError(
                f"{path}: no {run_directory.SOFTMAX_FILE}; perplexity needs the softmax weights "
                "(the official weight files do not hold them)"
            )
        vocabulary = Vocabulary.from_file(os.path.join(path, run_directory.VOCAB_FILE))
        config = ElmoConfig.from_file(os.path.join(path, run_directory.OPTIONS_FILE))
        model = BidirectionalLanguageModel(
            config,
            len(vocabulary),
            dropout=0.0,
            num_sampled=1,
            reset_state_per_sentence=softmax_file.softmax_reads_per_sentence(softmax),
        )
        load_weights(model.elmo, weights)
        softmax_file.load_softmax(model, softmax)
        return model, vocabulary
    model, vocabulary, _ = checkpoints.restore_language_model(path)
    return model, vocabulary
