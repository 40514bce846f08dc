"""Picking the ``tf.distribute`` strategy of a training run.

One machine: ``MirroredStrategy`` over its GPUs (all of them, or the first ``devices``), or,
without GPUs, over ``devices`` logical CPU devices (``devices > 1``; useful for testing the
distributed path). Each replica runs its share of the batch rows; the gradients are summed
across replicas, clipped by their global norm and applied identically everywhere.

Several machines: ``MultiWorkerMirroredStrategy``, configured by the ``TF_CONFIG``
environment variable on every worker, for example on the first of two machines::

    TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},
                "task": {"type": "worker", "index": 0}}' \\
        elmo-tf train corpus/ --checkpoint-dir ckpt --multi-worker ...

and the same command with ``"index": 1`` on the second. Every worker reads the same corpus
(a shared or copied directory) and builds the streams of its own batch rows only; the
chief (worker 0) writes the checkpoints and the TensorBoard logs to ``--checkpoint-dir``
and ``--logdir`` (the other workers write theirs to temporary directories, as
``tf.distribute`` requires). ``--batch-size`` is the global batch over all replicas of all
workers and must be divisible by their number.
"""

import os
import tempfile

from elmo_tf import backend

backend.require_tensorflow("biLM training")  # one line, before TensorFlow

import tensorflow as tf

from elmo_tf.errors import DistributionError


def make_strategy(devices=None, multi_worker=False):
    """Returns a ``tf.distribute.Strategy`` for ``devices`` replicas on this machine.

    Must run before TensorFlow initialises its devices when ``devices > 1`` on a machine
    without GPUs (logical CPU devices are configured then).
    """
    if multi_worker:
        if "TF_CONFIG" not in os.environ:
            raise DistributionError("multi_worker needs the TF_CONFIG environment variable")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if devices is not None and devices < 1:
        raise DistributionError(f"devices must be at least 1, got {devices}")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        n = len(gpus) if devices is None else devices
        if n > len(gpus):
            raise DistributionError(f"devices {n} asked for, but this machine has {len(gpus)} GPUs")
        if n == 1:
            return tf.distribute.OneDeviceStrategy("/gpu:0")
        return tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(n)])
    n = devices or 1
    if n == 1:
        return tf.distribute.get_strategy()
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
    except RuntimeError:
        logical = tf.config.list_logical_devices("CPU")
        if len(logical) < n:
            raise DistributionError(
                f"devices {n}: TensorFlow has already started with {len(logical)} CPU "
                "device(s); logical devices must be configured before it starts"
            ) from None
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def is_chief(strategy):
    """Whether this process writes checkpoints and logs (always, on one machine)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker"
        and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict()
    )


def write_directory(directory, strategy):
    """``directory`` on the chief; a private temporary directory on the other workers."""
    if is_chief(strategy):
        return directory
    return tempfile.mkdtemp(prefix="elmo-tf-worker-")
