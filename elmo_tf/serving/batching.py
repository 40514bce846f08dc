"""Dynamic batching: concurrent requests to one signature run as one batch.

A ``Batcher`` queues validated requests and its threads run them in batches of up to
``max_batch_size`` rows, waiting at most ``batch_timeout_micros`` after the oldest queued
request for a batch to fill (TF Serving's parameters of the same names). Requests are
concatenated along the batch axis; an input with a variable second dimension (``tokens``
``[batch, max_len]``, ``char_ids`` ``[batch, max_len, 50]``) is padded to the longest
``max_len`` of the batch with ``""`` / 0, which the ELMo contract defines as padding. The
outputs are split back by rows and each request's per-token outputs (``[batch, T, ...]``) are
trimmed to the ``T`` it would get alone: its own ``max_len``, or, for ``sentences`` (padded
inside the graph), its longest ``sequence_len``. So a request's answer does not depend on its
batch (the model is stateless and masks padding).

A request larger than ``max_batch_size`` runs as a batch of its own. A request that would take
the queue past ``max_enqueued_batches`` full batches fails with RESOURCE_EXHAUSTED.
"""

import collections
import concurrent.futures
import dataclasses
import math
import re
import threading
import time

import grpc
import numpy as np

from elmo_tf import files
from elmo_tf.serving.errors import ServingError, resource_exhausted
from elmo_tf.serving.signature import is_string


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """TF Serving's batching parameters (``batching_parameters.txt``) that this server uses."""

    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    max_enqueued_batches: int = 100
    num_batch_threads: int = 2

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            minimum = 0 if field.name == "batch_timeout_micros" else 1
            if not isinstance(value, int) or value < minimum:
                raise ValueError(f"{field.name} must be an integer >= {minimum}, got {value!r}")


@dataclasses.dataclass
class _Task:
    inputs: dict
    size: int
    own_length: int | None
    enqueued: float
    future: concurrent.futures.Future


class Batcher:
    """Runs the requests to one signature in dynamic batches.

    Args:
        run: ``run(inputs) -> outputs``, numpy dicts keyed by alias, for one batch; raises
            ``ServingError`` for a request error.
        spec: the signature's ``SignatureSpec``.
        options: ``BatchingOptions``.
    """

    def __init__(self, run, spec, options):
        self.run = run
        self.spec = spec
        self.options = options
        self.batches_run = 0  # counters, for tests and the load test
        self.tasks_run = 0
        self._padded_inputs = spec.padded_inputs()
        self._padded_outputs = spec.padded_outputs()
        self._queue = collections.deque()
        self._queued_rows = 0
        self._closing = False
        self._cond = threading.Condition()
        self._threads = [
            threading.Thread(target=self._loop, name=f"batch-{spec.name}-{i}", daemon=True)
            for i in range(options.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, inputs, batch_size):
        """Queues one validated request; blocks until its outputs (numpy dict) are ready."""
        own_length = max((inputs[a].shape[1] for a in self._padded_inputs), default=None)
        task = _Task(inputs, batch_size, own_length, time.monotonic(), concurrent.futures.Future())
        max_size = self.options.max_batch_size
        with self._cond:
            if self._closing:
                raise ServingError(grpc.StatusCode.UNAVAILABLE, "the model is being unloaded")
            batches = math.ceil((self._queued_rows + batch_size) / max_size)
            if batches > self.options.max_enqueued_batches:
                raise resource_exhausted(
                    f"the batch queue of signature '{self.spec.name}' is full "
                    f"({self.options.max_enqueued_batches} batches of up to {max_size} rows); "
                    "retry later"
                )
            self._queue.append(task)
            self._queued_rows += batch_size
            self._cond.notify_all()
        return task.future.result()

    @property
    def queued_rows(self):
        """Rows waiting for a batch thread."""
        return self._queued_rows

    def close(self):
        """Runs what is queued, then stops the threads."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()

    def _loop(self):
        timeout = self.options.batch_timeout_micros / 1e6
        max_size = self.options.max_batch_size
        while True:
            with self._cond:
                while True:
                    if not self._queue:
                        if self._closing:
                            return
                        self._cond.wait()
                        continue
                    wait = self._queue[0].enqueued + timeout - time.monotonic()
                    if self._queued_rows >= max_size or wait <= 0 or self._closing:
                        break
                    self._cond.wait(wait)
                tasks = [self._queue.popleft()]
                rows = tasks[0].size
                while self._queue and rows + self._queue[0].size <= max_size:
                    tasks.append(self._queue.popleft())
                    rows += tasks[-1].size
                self._queued_rows -= rows
                self._cond.notify_all()
            self._run_batch(tasks)

    def _run_batch(self, tasks):
        try:
            outputs = self.run(self._merge(tasks))
        except ServingError as e:
            if len(tasks) > 1 and e.code == grpc.StatusCode.INVALID_ARGUMENT:
                for task in tasks:  # find the request at fault; the others still succeed
                    self._run_batch([task])
                return
            for task in tasks:
                task.future.set_exception(e)
            return
        except Exception as e:  # noqa: BLE001 - handed to every waiting request
            for task in tasks:
                task.future.set_exception(e)
            return
        with self._cond:
            self.batches_run += 1
            self.tasks_run += len(tasks)
        offset = 0
        for task in tasks:
            rows = slice(offset, offset + task.size)
            offset += task.size
            own = {alias: value[rows] for alias, value in outputs.items()}
            length = task.own_length
            if length is None and "sequence_len" in own:
                length = int(own["sequence_len"].max())
            if length is not None:
                for alias in self._padded_outputs:
                    if alias in own:
                        own[alias] = own[alias][:, :length]
            task.future.set_result(own)

    def _merge(self, tasks):
        if len(tasks) == 1:
            return tasks[0].inputs
        merged = {}
        for alias, spec in self.spec.inputs.items():
            arrays = [task.inputs[alias] for task in tasks]
            if alias in self._padded_inputs:
                width = max(a.shape[1] for a in arrays)
                arrays = [_pad_axis1(a, width, b"" if is_string(spec) else 0) for a in arrays]
            merged[alias] = np.concatenate(arrays)
        return merged


def _pad_axis1(array, width, value):
    if array.shape[1] == width:
        return array
    padded = np.full((array.shape[0], width, *array.shape[2:]), value, dtype=array.dtype)
    padded[:, : array.shape[1]] = array
    return padded


_PARAMETER = re.compile(r"(\w+)\s*\{\s*value\s*:\s*(\d+)\s*\}")


def read_batching_parameters(path):
    """The fields this server uses from TF Serving's ``batching_parameters.txt`` (a text proto
    of ``BatchingParameters``), as keyword arguments of ``BatchingOptions``; others are ignored.
    """
    text = "\n".join(files.read_text_lines(path, what="batching parameters"))
    names = {field.name for field in dataclasses.fields(BatchingOptions)}
    return {name: int(value) for name, value in _PARAMETER.findall(text) if name in names}
