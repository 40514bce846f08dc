"""Trainer: the biLM training loop (bilm-tf's ``train``) in TensorFlow 2."""

import dataclasses
import math
import os
import re
import time

import keras

from elmo_tf import backend

backend.require_tensorflow("biLM training")  # one line, before TensorFlow

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from elmo_tf.errors import CheckpointError, TrainingPlanError
from elmo_tf.formats.weight_file import load_weights
from elmo_tf.models.elmo import LSTMState
from elmo_tf.system import files
from elmo_tf.training import checkpoints, data, distribution, run_directory, softmax_file
from elmo_tf.training.bidirectional_language_model import BidirectionalLanguageModel
from elmo_tf.training.training_options import write_json


class Trainer:
    """Trains a ``BidirectionalLanguageModel`` with truncated back-propagation through time.

    Every step reads one window of ``unroll_steps`` positions per batch row, starts each row
    from the LSTM state it ended the previous window with (``tf.stop_gradient``: no gradient
    flows into earlier windows), and minimises the mean of the forward and backward
    sampled-softmax losses with Adagrad (bilm-tf's) or Adam. The gradients of all replicas
    are summed (each replica's loss is divided by the number of replicas, so the sum is the
    gradient of the global mean), clipped by their global norm, and then applied: clipping the
    summed gradient is bilm-tf's ``clip_grads`` after ``average_gradients``. Keras' optimizer sums
    the replicas' gradients once more, so each replica hands it ``1 / replicas`` of the
    clipped sum.

    Randomness is stateless: dropout masks and sampled candidates are drawn from seeds made
    of ``(seed, step)``, and the data stream is a function of ``(seed, step)`` (see
    ``elmo_tf.training.data``). A checkpoint therefore holds all that resumption needs: the
    model, the optimizer, the step and the carried LSTM state of every row.

    Args:
        model: a ``BidirectionalLanguageModel`` built under ``strategy.scope()``, or a
            function that builds one (called under the scope).
        tables: ``data.StreamTables`` of the training corpus.
        options: ``TrainingOptions``.
        checkpoint_dir: where checkpoints go (created).
        strategy: a ``tf.distribute.Strategy`` (default: the current one).
        logdir: TensorBoard directory (default ``checkpoint_dir/logs``; ``""``: no
            summaries).
    """

    def __init__(self, model, tables, options, checkpoint_dir, strategy=None, logdir=None):
        self.strategy = strategy or tf.distribute.get_strategy()
        self.options = options
        self.tables = tables
        self.checkpoint_dir = checkpoint_dir
        replicas = self.strategy.num_replicas_in_sync
        if options.batch_size % replicas:
            raise TrainingPlanError(
                f"the batch size {options.batch_size} is not divisible by the number of "
                f"replicas ({replicas})"
            )
        with self.strategy.scope():
            keras.utils.set_random_seed(options.seed)
            self.model = (
                model() if callable(model) and not isinstance(model, keras.Model) else model
            )
            self.optimizer = make_optimizer(options)
            self.optimizer.build(self.model.lm_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        # The rows of this worker's replicas; their carried state is kept on the host for
        # checkpoints.
        self.local_replicas = _local_replicas(self.strategy)
        self.local_rows = options.batch_size // replicas * self.local_replicas
        zero = self.model.zero_state(self.local_rows)
        self.lstm_cell = tf.Variable(zero.cell, trainable=False, name="lstm_cell")
        self.lstm_hidden = tf.Variable(zero.hidden, trainable=False, name="lstm_hidden")
        # What a checkpoint holds: {name: variable, or {key: variable}}.
        self._checkpointed = {
            "model": checkpoints.variable_names(self.model.weights),
            "optimizer": checkpoints.variable_names(self.optimizer.variables),
            "step": self.step,
            "lstm_cell": self.lstm_cell,
            "lstm_hidden": self.lstm_hidden,
        }
        self.checkpoint = tf.train.Checkpoint(
            **{
                name: tf.train.Checkpoint(**value) if isinstance(value, dict) else value
                for name, value in self._checkpointed.items()
            }
        )
        os.makedirs(checkpoint_dir, exist_ok=True)
        self.is_chief = distribution.is_chief(self.strategy)
        if self.is_chief:
            remove_partial_checkpoints(checkpoint_dir)  # of a run killed while saving
        # Non-chief workers write to private temporary directories, removed by close().
        self._private_dirs = []
        # Made at the first save: it reads the state file, which restore() may rewrite.
        self.manager = None
        self.restored = None
        if logdir is None:
            logdir = os.path.join(checkpoint_dir, "logs")
        self.writer = None
        if logdir:
            self.writer = tf.summary.create_file_writer(self._write_directory(logdir))
        self._train_step = tf.function(self._distributed_step)

    @classmethod
    def from_plan(cls, plan, checkpoint_dir, strategy=None, logdir=None):
        """The ``Trainer`` of a ``TrainingPlan`` (``elmo_tf.training.plan``), ready to train.

        Builds the model (from ``plan.init_from``'s weights when given); when
        ``plan.resume``, restores the newest checkpoint that restores completely (``restore``;
        which one, and what was skipped, is in ``trainer.restored``; none raises
        ``CheckpointError`` and writes nothing); then writes the run's files to
        ``checkpoint_dir`` (``write_training_files``; the chief worker only). ``strategy``
        and ``logdir`` are as in ``Trainer``.
        """
        tables = data.StreamTables(plan.corpus, plan.corpus.type_targets(plan.vocabulary))
        builder = new_model(plan.config, len(plan.vocabulary), plan.options, plan.init_from)
        trainer = cls(builder, tables, plan.options, checkpoint_dir, strategy, logdir)
        if plan.resume and trainer.restore() is None:
            # the plan saw checkpoint files; they went away since
            raise CheckpointError(f"{checkpoint_dir}: no checkpoint to resume from")
        if trainer.is_chief:
            write_training_files(
                checkpoint_dir,
                plan.config,
                plan.vocabulary,
                plan.options,
                plan.corpus,
                plan.init_from,
            )
        return trainer

    def _write_directory(self, directory):
        path = distribution.write_directory(directory, self.strategy)
        if path != directory:
            self._private_dirs.append(path)
        return path

    def close(self):
        """Flushes the logs and removes what this run leaves behind: a non-chief worker's
        private directories, and a checkpoint interrupted while it was being written."""
        if self.writer is not None:
            self.writer.flush()
        for path in self._private_dirs:
            files.remove(path)
        self._private_dirs = []
        if self.is_chief:
            remove_partial_checkpoints(self.checkpoint_dir)

    # ------------------------------------------------------------------ state

    def restore(self):
        """Restores the newest checkpoint of ``checkpoint_dir`` that restores completely.

        The ``ckpt-N`` files present are tried, largest ``N`` first, whatever the state file
        says (``checkpoints.newest_restorable``); each is first read into fresh host
        variables (``checkpoints.fresh_copy``), so one failing halfway leaves this trainer's
        variables untouched. On the chief worker, the files of newer checkpoints that did not
        restore are moved to ``checkpoint_dir/damaged/`` (continuing from an older step would
        otherwise overwrite them at their step, or the checkpoint manager delete them), and
        the state file is rewritten to list the checkpoints left.

        Returns a ``checkpoints.Restored`` (also kept as ``self.restored``), or ``None`` when
        the directory holds no checkpoint files. Raises ``CheckpointError`` naming every
        checkpoint and why it failed when none restores; nothing is then changed.
        """
        found = checkpoints.newest_restorable(self.checkpoint_dir, self._try_restore)
        if found is None:
            return None
        if self.is_chief:
            moved = {
                name: checkpoints.set_aside(self.checkpoint_dir, name) for name, _ in found.skipped
            }
            fault = checkpoints.state_file_fault(self.checkpoint_dir, found.name)
            if fault in {f"named {name}" for name, _ in found.skipped}:
                fault = None  # it named a newer checkpoint, whose fault has been told
            checkpoints.write_state_file(self.checkpoint_dir)
            found = dataclasses.replace(found, set_aside=moved, state_file=fault)
            self.manager = None  # the next save reads the state file as it is now
        self.checkpoint.restore(found.prefix).expect_partial().assert_existing_objects_matched()
        self.restored = found
        return found

    def _try_restore(self, prefix):
        """Restores ``prefix`` into a fresh copy of this trainer's variables; its step."""
        # The copy lives in host memory for the attempt: as much again as the model and
        # the optimizer's slots, freed when it returns.
        copy = checkpoints.fresh_copy(self._checkpointed)
        copy.restore(prefix).expect_partial().assert_existing_objects_matched()
        return int(copy.step.numpy())

    def save(self):
        """Writes a checkpoint of the current step; returns its path."""
        return self._checkpoint_manager().save(checkpoint_number=int(self.step.numpy()))

    def _checkpoint_manager(self):
        if self.manager is None:
            self.manager = tf.train.CheckpointManager(
                self.checkpoint,
                self._write_directory(self.checkpoint_dir),
                max_to_keep=self.options.keep_checkpoints,
                step_counter=self.step,
            )
        return self.manager

    def _distribute_state(self):
        rows = self.options.batch_size // self.strategy.num_replicas_in_sync

        def local(context):
            index = context.replica_id_in_sync_group % self.local_replicas
            return LSTMState(
                self.lstm_cell[index * rows : (index + 1) * rows],
                self.lstm_hidden[index * rows : (index + 1) * rows],
            )

        return self.strategy.experimental_distribute_values_from_function(local)

    def _keep_state(self, state):
        self.lstm_cell.assign(tf.concat(self.strategy.experimental_local_results(state.cell), 0))
        self.lstm_hidden.assign(
            tf.concat(self.strategy.experimental_local_results(state.hidden), 0)
        )

    # ------------------------------------------------------------------ steps

    def dataset(self, start_step):
        """The distributed training batches from ``start_step`` on."""
        options = self.options

        def make(context):
            per_pipeline = options.batch_size // context.num_input_pipelines
            first = context.input_pipeline_id * per_pipeline
            return data.training_dataset(
                self.tables,
                options.batch_size,
                options.unroll_steps,
                options.seed,
                start_step=start_step,
                rows=(first, first + per_pipeline),
                per_replica_batch_size=context.get_per_replica_batch_size(options.batch_size),
            )

        return self.strategy.distribute_datasets_from_function(make)

    def _distributed_step(self, iterator, state):
        batch = next(iterator)
        step = self.step.read_value()
        forward, backward, norm, state = self.strategy.run(
            self._replica_step, args=(batch, state, step)
        )
        mean = tf.distribute.ReduceOp.MEAN
        forward = self.strategy.reduce(mean, forward, axis=None)
        backward = self.strategy.reduce(mean, backward, axis=None)
        norm = self.strategy.reduce(mean, norm, axis=None)
        self.step.assign_add(1)
        return forward, backward, norm, state

    def _replica_step(self, batch, state, step):
        context = tf.distribute.get_replica_context()
        replicas = context.num_replicas_in_sync
        base = tf.stack([tf.constant(self.options.seed, tf.int64), step])
        fold = tf.random.experimental.stateless_fold_in
        # Dropout differs between replicas (their rows differ); the candidates are shared.
        dropout_seed = fold(fold(base, 1), tf.cast(context.replica_id_in_sync_group, tf.int64))
        variables = self.model.lm_variables
        mask = tf.ones_like(batch["forward_targets"], tf.bool)
        with tf.GradientTape() as tape:
            out = self.model(batch, initial_state=state, training=True, seed=dropout_seed)
            forward = self.model.sampled_loss(
                out["forward"], batch["forward_targets"], mask, fold(base, 2)
            )
            backward = self.model.sampled_loss(
                out["backward"], batch["backward_targets"], mask, fold(base, 3)
            )
            loss = 0.5 * (forward + backward) / replicas
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        grads, norm = tf.clip_by_global_norm(grads, self.options.clip_norm)
        self.optimizer.apply_gradients(zip([g / replicas for g in grads], variables))
        state = LSTMState(*(tf.stop_gradient(s) for s in out["state"]))
        return forward, backward, norm, state

    # ------------------------------------------------------------------ loop

    def train(self, total_steps, callback=None, should_stop=None):
        """Trains until ``step == total_steps``, checkpointing every ``checkpoint_every``
        steps and at the end; or until ``should_stop()`` (asked after every step) is true,
        when the step just finished is checkpointed and training ends there.

        ``callback(metrics)`` is called after every step with a dict: ``step``, ``loss``,
        ``forward_loss``, ``backward_loss``, ``tokens`` (positions per direction in the
        step), ``checkpoint`` (a path when one was written), ``stopped`` (whether
        ``should_stop`` ended training). Returns the last metrics (or ``None`` when there was
        nothing to do).
        """
        options = self.options
        start = int(self.step.numpy())
        metrics = None
        if start >= total_steps:
            if self._checkpoint_manager().latest_checkpoint is None or (
                start > self._latest_step()
            ):
                self.save()
            return metrics
        iterator = iter(self.dataset(start))
        state = self._distribute_state()
        tokens_per_step = options.batch_size * options.unroll_steps
        interval_start, interval_steps = time.monotonic(), 0
        while int(self.step.numpy()) < total_steps:
            forward, backward, norm, state = self._train_step(iterator, state)
            step = int(self.step.numpy())
            forward, backward = float(forward), float(backward)
            loss = 0.5 * (forward + backward)
            if not math.isfinite(loss):
                raise FloatingPointError(f"the loss is {loss} at step {step}")
            interval_steps += 1
            metrics = {
                "step": step,
                "loss": loss,
                "forward_loss": forward,
                "backward_loss": backward,
                "gradient_norm": float(norm),
                "tokens": tokens_per_step,
                "checkpoint": None,
                "stopped": False,
            }
            if self.writer is not None and (step % options.log_every == 0 or step == total_steps):
                elapsed = max(time.monotonic() - interval_start, 1e-9)
                with self.writer.as_default(step=step):
                    for name, value in [
                        ("loss", loss),
                        ("forward_loss", forward),
                        ("backward_loss", backward),
                        ("perplexity", math.exp(min(loss, 700.0))),
                        ("tokens_per_second", interval_steps * tokens_per_step / elapsed),
                        ("learning_rate", float(options.learning_rate)),
                        ("gradient_norm", metrics["gradient_norm"]),
                    ]:
                        write_scalar(name, value, step)
                self.writer.flush()
                interval_start, interval_steps = time.monotonic(), 0
            metrics["stopped"] = should_stop is not None and bool(should_stop())
            if metrics["stopped"] or step % options.checkpoint_every == 0 or step == total_steps:
                self._keep_state(state)
                metrics["checkpoint"] = self.save()
            if callback is not None:
                callback(metrics)
            if metrics["stopped"]:
                break
        return metrics

    def _latest_step(self):
        latest = self._checkpoint_manager().latest_checkpoint
        return int(latest.rsplit("-", 1)[1]) if latest else -1


def make_optimizer(options):
    """The Keras optimizer of ``options.optimizer`` (its name is fixed: its variable paths are
    checkpoint keys)."""
    if options.optimizer == "adam":
        return keras.optimizers.Adam(learning_rate=options.learning_rate, name="adam")
    return keras.optimizers.Adagrad(
        learning_rate=options.learning_rate,
        initial_accumulator_value=options.initial_accumulator_value,
        name="adagrad",
    )


def new_model(config, vocab_size, options, init_from=None):
    """A function building the ``BidirectionalLanguageModel`` to train (for ``Trainer``).

    ``init_from``: ``(options_file, weight_file)`` of official-format weights to start from;
    the softmax is loaded from ``softmax.hdf5`` beside the weights when that file exists and
    fits the vocabulary, and freshly initialised otherwise.
    """

    def build():
        model = BidirectionalLanguageModel(
            config,
            vocab_size,
            dropout=options.dropout,
            num_sampled=options.num_sampled,
            reset_state_per_sentence=options.reset_state_per_sentence,
        )
        if init_from is not None:
            load_weights(model.elmo, init_from[1])
            softmax = os.path.join(os.path.dirname(os.path.abspath(init_from[1])), "softmax.hdf5")
            if os.path.exists(softmax):
                try:
                    softmax_file.load_softmax(model, softmax)
                except checkpoints.CheckpointError:
                    pass  # another vocabulary: start the softmax afresh
        return model

    return build


def write_training_files(directory, config, vocabulary, options, corpus, init_from=None):
    """Writes ``options.json``, ``vocab.txt`` and ``training_options.json`` to ``directory``."""
    os.makedirs(directory, exist_ok=True)
    config.save(os.path.join(directory, run_directory.OPTIONS_FILE))
    vocabulary.save(os.path.join(directory, run_directory.VOCAB_FILE))
    record = {
        "training": options.to_dict(),
        "vocab_size": len(vocabulary),
        "corpus": {
            "files": [os.path.abspath(f) for f in corpus.files],
            "sentences": corpus.n_sentences,
            "tokens": corpus.n_tokens,
            "oov_rate": corpus.oov_rate(vocabulary),
        },
        "init_from": None if init_from is None else [os.path.abspath(p) for p in init_from],
    }
    write_json(os.path.join(directory, run_directory.TRAINING_OPTIONS_FILE), record)
    return record


def write_scalar(name, value, step):
    """``tf.summary.scalar`` without needing the ``tensorboard`` package installed.

    Writes the same event (a float32 scalar tensor tagged for TensorBoard's scalars plugin)
    with core TensorFlow's ``tf.summary.write``.
    """
    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"
    tf.summary.write(name, tf.constant(value, tf.float32), step=step, metadata=metadata)


def _local_replicas(strategy):
    try:
        return len(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy has one replica and no device list
        return 1


# tf.train.Checkpoint writes ``ckpt-N_temp/`` and renames it into place when complete.
_PARTIAL_CHECKPOINT = re.compile(r"ckpt-\d+_temp(?:_[0-9a-f]+)?")


def remove_partial_checkpoints(checkpoint_dir):
    """Removes checkpoint directories a killed run was still writing (``ckpt-N_temp``)."""
    for entry in os.listdir(checkpoint_dir):
        if _PARTIAL_CHECKPOINT.fullmatch(entry):
            files.remove(os.path.join(checkpoint_dir, entry))
