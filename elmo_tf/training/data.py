"""The input pipelines of the biLM: endless shuffled sentence streams for training, one
ordered pass for evaluation.

Both cut each batch row's stream of sentences into windows of ``unroll_steps`` positions; a
sentence ``w1 .. wn`` gives ``n + 1`` positions in each direction (see
:func:`frame_sentences`), the same positions in both, so one mask serves both directions.

Training (bilm-tf's ``_get_batch``): batch row ``r`` of every batch continues the stream of
row ``r`` of the previous batch, so the LSTM state carried between windows belongs to the
text that follows. In epoch ``e`` the sentences are shuffled with seed ``(seed, e)`` and
dealt out to the rows (row ``r`` gets every ``B``-th sentence of the shuffled order); a
row's stream runs on into its share of the next epoch without a break. Everything is a pure
function of ``(seed, step)``: a run resumed at step ``s`` starts every row ``s * T``
positions into its stream, which :func:`start_positions` finds without replaying the data.
"""

import numpy as np

from elmo_tf import backend

backend.require_tensorflow("biLM training")  # one line, before TensorFlow

import tensorflow as tf

from elmo_tf.training.corpus import BOS_TYPE, EOS_TYPE

_MAX_EPOCHS = 2**62


def frame_sentences(sentences):
    """Forward and backward positions of sentences given as a ragged ``(k, None)`` tensor.

    For each sentence ``w1 .. wn`` (type ids) the forward stream reads ``<S> w1 .. wn`` and
    predicts ``w1 .. wn </S>``; the backward stream reads ``</S> wn .. w1`` and predicts
    ``wn .. w1 <S>`` (bilm-tf: each LM's last input is the token before the final boundary).

    Returns a dict of flat int32 tensors ``forward_inputs``, ``forward_targets``,
    ``backward_inputs``, ``backward_targets``, each ``(sum(n) + k,)``, sentence after
    sentence.
    """
    starts = tf.gather(sentences.row_splits, sentences.value_rowids())
    limits = tf.gather(sentences.row_splits[1:], sentences.value_rowids())
    position = tf.range(tf.shape(sentences.values, out_type=tf.int64)[0])
    reversed_values = tf.gather(sentences.values, starts + limits - 1 - position)
    reversed_sentences = sentences.with_values(reversed_values)
    bos = tf.fill([sentences.nrows(), 1], tf.constant(BOS_TYPE, sentences.dtype))
    eos = tf.fill([sentences.nrows(), 1], tf.constant(EOS_TYPE, sentences.dtype))

    def flat(*parts):
        return tf.concat(parts, axis=1).flat_values

    return {
        "forward_inputs": flat(bos, sentences),
        "forward_targets": flat(sentences, eos),
        "backward_inputs": flat(eos, reversed_sentences),
        "backward_targets": flat(reversed_sentences, bos),
    }


class StreamTables:
    """The corpus and its lookup tables as tensors, shared by the pipelines.

    Args:
        corpus: a ``Corpus``.
        type_targets: int32 ``(n_types,)`` vocabulary id of each type.
    """

    def __init__(self, corpus, type_targets):
        self.n_sentences = corpus.n_sentences
        self.token_types = tf.constant(corpus.token_types, tf.int32)
        self.row_splits = tf.constant(corpus.row_splits, tf.int64)
        self.positions = tf.constant(np.diff(corpus.row_splits) + 1, tf.int64)
        self.type_chars = tf.constant(corpus.type_char_ids(), tf.int32)  # (n_types, 50)
        self.type_targets = tf.constant(type_targets, tf.int32)

    def sentences(self, indices):
        """The ragged ``(k, None)`` type ids of sentences ``indices``."""
        corpus = tf.RaggedTensor.from_row_splits(self.token_types, self.row_splits)
        return tf.gather(corpus, indices)

    def model_inputs(self, windows):
        """Type-id windows -> the model's character ids and the vocabulary targets."""
        out = {
            "forward_char_ids": tf.gather(self.type_chars, windows["forward_inputs"]),
            "backward_char_ids": tf.gather(self.type_chars, windows["backward_inputs"]),
            "forward_targets": tf.gather(self.type_targets, windows["forward_targets"]),
            "backward_targets": tf.gather(self.type_targets, windows["backward_targets"]),
        }
        if "mask" in windows:
            out["mask"] = windows["mask"]
        return out


def epoch_order(n_sentences, seed, epoch):
    """The shuffled sentence order of ``epoch``: int64 ``(n_sentences,)``."""
    seed = tf.stack([tf.cast(seed, tf.int64), tf.cast(epoch, tf.int64)])
    return tf.random.experimental.stateless_shuffle(tf.range(n_sentences, dtype=tf.int64), seed)


def start_positions(tables, batch_size, unroll_steps, seed, step):
    """Where every row's stream stands after ``step`` batches.

    Returns int64 arrays ``(epoch (B,), offset (B,))``: row ``r`` continues at position
    ``offset[r]`` of its share of epoch ``epoch[r]``.
    """
    remaining = np.full([batch_size], int(step) * unroll_steps, np.int64)
    epoch = np.zeros([batch_size], np.int64)
    done = remaining == 0
    e = 0
    row_of = tf.range(tables.n_sentences, dtype=tf.int64) % batch_size
    while not done.all():
        order = epoch_order(tables.n_sentences, seed, e)
        share = tf.math.unsorted_segment_sum(
            tf.gather(tables.positions, order), row_of, batch_size
        ).numpy()
        finishing = ~done & (remaining < share)
        epoch[finishing] = e
        passing = ~done & ~finishing
        remaining[passing] -= share[passing]
        done |= finishing
        e += 1
    return epoch, np.where(remaining > 0, remaining, 0)


def training_dataset(
    tables,
    batch_size,
    unroll_steps,
    seed,
    start_step=0,
    rows=None,
    per_replica_batch_size=None,
):
    """The endless training batches from step ``start_step`` on.

    Args:
        tables: ``StreamTables``.
        batch_size: B, rows (streams) of the global batch; needs ``n_sentences >= B``.
        unroll_steps: T, positions per window.
        seed: shuffling seed.
        start_step: batches already trained on.
        rows: ``(first, end)``, the global rows this pipeline produces (default all): an
            input pipeline of a multi-worker run makes only its own workers' rows.
        per_replica_batch_size: rows per element (default ``end - first``). With several
            replicas per pipeline, consecutive elements go to consecutive replicas, each
            with the same rows at every step.

    Yields:
        dicts of ``forward_char_ids``/``backward_char_ids`` ``(b, T, 50)`` int32 and
        ``forward_targets``/``backward_targets`` ``(b, T)`` int32.
    """
    first, end = (0, batch_size) if rows is None else rows
    per_replica_batch_size = per_replica_batch_size or end - first
    if tables.n_sentences < batch_size:
        raise ValueError(
            f"the corpus has {tables.n_sentences} sentences, fewer than the batch size "
            f"{batch_size} (each batch row needs its own sentences)"
        )
    start_epoch, start_offset = start_positions(tables, batch_size, unroll_steps, seed, start_step)
    start_epoch = tf.constant(start_epoch, tf.int64)
    start_offset = tf.constant(start_offset, tf.int64)

    def row_stream(row):
        e0 = start_epoch[row]

        def load(epoch):
            order = epoch_order(tables.n_sentences, seed, epoch)
            streams = frame_sentences(tables.sentences(order[row::batch_size]))
            skip = tf.where(epoch == e0, start_offset[row], 0)
            return {key: value[skip:] for key, value in streams.items()}

        epochs = tf.data.Dataset.range(e0, _MAX_EPOCHS)
        return epochs.map(load).rebatch(unroll_steps, drop_remainder=True)

    dataset = tf.data.Dataset.range(first, end).interleave(
        row_stream,
        cycle_length=end - first,
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    dataset = dataset.batch(per_replica_batch_size, drop_remainder=True)
    dataset = dataset.map(tables.model_inputs, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def evaluation_windows(tables, batch_size, unroll_steps):
    """One pass over the corpus in file order, as type-id windows with masks.

    Row ``r`` reads the ``r``-th of ``batch_size`` contiguous blocks of sentences (blocks of
    about equal size); rows that end early are padded (mask false). Returns a list of dicts
    of numpy arrays ``(B, T)``: the keys of :func:`frame_sentences` and ``mask``.
    """
    n = tables.n_sentences
    positions = tables.positions.numpy()
    batch_size = max(1, min(batch_size, n))
    # Sentence i goes to the row in which its first position falls.
    starts = np.concatenate([[0], np.cumsum(positions)[:-1]])
    row_of = np.minimum(starts * batch_size // max(positions.sum(), 1), batch_size - 1)
    bounds = np.searchsorted(row_of, np.arange(batch_size + 1), side="left")
    streams = []
    for r in range(batch_size):
        indices = tf.range(bounds[r], bounds[r + 1], dtype=tf.int64)
        streams.append(
            {k: v.numpy() for k, v in frame_sentences(tables.sentences(indices)).items()}
        )
    longest = max(len(s["forward_inputs"]) for s in streams)
    n_windows = -(-longest // unroll_steps)
    width = n_windows * unroll_steps
    arrays = {k: np.zeros([batch_size, width], np.int32) for k in streams[0]}
    mask = np.zeros([batch_size, width], bool)
    for r, stream in enumerate(streams):
        length = len(stream["forward_inputs"])
        for key, value in stream.items():
            arrays[key][r, :length] = value
        mask[r, :length] = True
    arrays["mask"] = mask
    return [
        {k: v[:, w * unroll_steps : (w + 1) * unroll_steps] for k, v in arrays.items()}
        for w in range(n_windows)
    ]
