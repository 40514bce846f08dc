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
batch (the model is stateless and masks padding, so padded positions are zeros).

Bounded work and fairness:

- A request larger than ``max_batch_size`` rows is split into chunks of ``max_batch_size``
  rows. Each batch takes at most one chunk from each waiting request, in turn (round robin),
  so a one-sentence request waits for about one batch per large request ahead of it, not for
  the large requests to finish.
- Before a chunk runs, ``alive()`` of its request is asked; a request whose client has gone
  (deadline passed, call cancelled) is dropped there, so it is not computed, or stops at the
  next chunk.
- A request with more rows than the queue holds (``max_enqueued_batches`` x
  ``max_batch_size``) can never be queued: INVALID_ARGUMENT naming the limit. One that does
  not fit *now* fails with RESOURCE_EXHAUSTED ("retry later"), which clears as the queue drains.
"""

import collections
import concurrent.futures
import dataclasses
import threading
import time

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc
import numpy as np

from elmo_tf.serving.errors import ServingError, invalid_argument, resource_exhausted
from elmo_tf.serving.signature import is_string

CLIENT_GONE = "the client is gone (deadline passed or call cancelled); not computed"


@dataclasses.dataclass
class _Request:
    """One submitted request: its chunks not yet run, and the outputs of those that ran."""

    chunks: collections.deque  # (index, inputs, rows) of the chunks not yet taken
    rows: int
    own_length: int | None
    enqueued: float
    alive: object  # () -> bool, or None
    results: list  # outputs of each chunk, by index
    pending: int  # chunks not finished
    future: concurrent.futures.Future

    def queued_rows(self):
        return sum(rows for _, _, rows in self.chunks)


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
        self.tasks_run = 0  # requests answered
        self.dropped = 0  # requests dropped because their client had gone
        self._padded_inputs = spec.padded_inputs()
        self._padded_outputs = spec.padded_outputs()
        self._queue = collections.deque()  # _Request with chunks left, in turn
        self._queued_rows = 0
        self._closing = False
        self._cond = threading.Condition()
        self._threads = [
            threading.Thread(target=self._loop, name=f"batch-{spec.name}-{i}", daemon=True)
            for i in range(options.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, inputs, batch_size, alive=None):
        """Queues one validated request; blocks until its outputs (numpy dict) are ready.

        ``alive()``, if given, says whether the client still waits; it is asked before each
        chunk of the request runs.
        """
        own_length = max((inputs[a].shape[1] for a in self._padded_inputs), default=None)
        size = self.options.max_batch_size
        capacity = self.options.max_queued_rows
        if batch_size > capacity:
            raise invalid_argument(
                f"the request has {batch_size} rows, more than the batch queue of signature "
                f"'{self.spec.name}' holds ({capacity} rows: max_enqueued_batches "
                f"{self.options.max_enqueued_batches} x max_batch_size {size}); "
                f"send at most {capacity} rows per request"
            )
        chunks = collections.deque()
        for index, start in enumerate(range(0, batch_size, size)):
            rows = min(size, batch_size - start)
            chunks.append((index, {a: v[start : start + rows] for a, v in inputs.items()}, rows))
        request = _Request(
            chunks, batch_size, own_length, time.monotonic(), alive, [None] * len(chunks),
            len(chunks), concurrent.futures.Future(),
        )  # fmt: skip
        with self._cond:
            if self._closing:
                raise ServingError(grpc.StatusCode.UNAVAILABLE, "the model is being unloaded")
            if self._queued_rows + batch_size > capacity:
                raise resource_exhausted(
                    f"the batch queue of signature '{self.spec.name}' is full "
                    f"({self.options.max_enqueued_batches} batches of up to {size} rows); "
                    "retry later"
                )
            self._queue.append(request)
            self._queued_rows += batch_size
            self._cond.notify_all()
        return request.future.result()

    @property
    def queued_rows(self):
        """Rows waiting for a batch thread."""
        return self._queued_rows

    def close(self, timeout=None):
        """Runs what is queued (for up to ``timeout`` s), then stops the threads; requests
        still queued after ``timeout`` fail with UNAVAILABLE."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        with self._cond:
            while self._queue:
                request = self._queue.popleft()
                self._queued_rows -= request.queued_rows()
                request.chunks.clear()
                _fail(request, ServingError(grpc.StatusCode.UNAVAILABLE, "the server stopped"))
            self._cond.notify_all()

    def _loop(self):
        while True:
            with self._cond:
                tasks = self._take()
                if tasks is None:
                    return
            self._run_batch(tasks)

    def _take(self):
        """The next batch, ``[(request, chunk)]``, waiting for it to fill; ``None`` to stop.

        Called with the lock held. One chunk per request, in turn; a request whose client has
        gone is dropped here.
        """
        timeout = self.options.batch_timeout_micros / 1e6
        max_size = self.options.max_batch_size
        while True:
            if not self._queue:
                if self._closing:
                    return None
                self._cond.wait()
                continue
            wait = self._queue[0].enqueued + timeout - time.monotonic()
            if self._queued_rows >= max_size or wait <= 0 or self._closing:
                break
            self._cond.wait(wait)
        tasks, rows = [], 0
        for _ in range(len(self._queue)):
            request = self._queue[0]
            if request.future.done() or (request.alive is not None and not request.alive()):
                self._queue.popleft()
                self._queued_rows -= request.queued_rows()
                request.chunks.clear()
                if not request.future.done():
                    self.dropped += 1
                    _fail(request, ServingError(grpc.StatusCode.CANCELLED, CLIENT_GONE))
                continue
            chunk = request.chunks[0]
            if tasks and rows + chunk[2] > max_size:
                break
            self._queue.popleft()
            request.chunks.popleft()
            tasks.append((request, chunk))
            rows += chunk[2]
            self._queued_rows -= chunk[2]
            if request.chunks:
                request.enqueued = time.monotonic()
                self._queue.append(request)  # its next chunk waits for the others' turn
        self._cond.notify_all()
        return tasks

    def _run_batch(self, tasks):
        if not tasks:
            return
        try:
            outputs = self.run(self._merge([chunk for _, chunk in tasks]))
        except ServingError as e:
            if len(tasks) > 1 and e.code == grpc.StatusCode.INVALID_ARGUMENT:
                for task in tasks:  # find the request at fault; the others still succeed
                    self._run_batch([task])
                return
            self._fail_all(tasks, e)
            return
        except Exception as e:  # noqa: BLE001 - handed to every waiting request
            self._fail_all(tasks, e)
            return
        with self._cond:
            self.batches_run += 1
        offset = 0
        for request, (index, _, rows) in tasks:
            request.results[index] = {
                alias: value[offset : offset + rows] for alias, value in outputs.items()
            }
            offset += rows
            with self._cond:
                request.pending -= 1
                finished = request.pending == 0 and not request.future.done()
                if finished:
                    self.tasks_run += 1
            if finished:
                try:
                    request.future.set_result(self._assemble(request))
                except concurrent.futures.InvalidStateError:  # failed meanwhile in another batch
                    pass

    def _fail_all(self, tasks, error):
        with self._cond:
            for request, _ in tasks:
                if request.chunks:  # its other chunks need not run
                    self._queued_rows -= request.queued_rows()
                    request.chunks.clear()
                    if request in self._queue:
                        self._queue.remove(request)
                _fail(request, error)

    def _assemble(self, request):
        """The outputs of a request from those of its chunks, per-token ones at its own length."""
        results = request.results
        length = request.own_length
        if length is None and "sequence_len" in results[0]:
            length = max(int(r["sequence_len"].max()) for r in results)
        own = {}
        for alias in results[0]:
            parts = [r[alias] for r in results]
            if length is not None and alias in self._padded_outputs:
                parts = [_fit_axis1(part, length) for part in parts]
            own[alias] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return own

    def _merge(self, chunks):
        if len(chunks) == 1:
            return chunks[0][1]
        merged = {}
        for alias, spec in self.spec.inputs.items():
            arrays = [inputs[alias] for _, inputs, _ in chunks]
            if alias in self._padded_inputs:
                width = max(a.shape[1] for a in arrays)
                arrays = [_pad_axis1(a, width, b"" if is_string(spec) else 0) for a in arrays]
            merged[alias] = np.concatenate(arrays)
        return merged


def _fail(request, error):
    try:
        request.future.set_exception(error)
    except concurrent.futures.InvalidStateError:  # already answered
        pass


def _fit_axis1(array, width):
    """``array`` trimmed or zero-padded to ``width`` along axis 1 (padded positions are zeros)."""
    if array.shape[1] >= width:
        return array[:, :width]
    return _pad_axis1(array, width, 0)


def _pad_axis1(array, width, value):
    if array.shape[1] == width:
        return array
    padded = np.full((array.shape[0], width, *array.shape[2:]), value, dtype=array.dtype)
    padded[:, : array.shape[1]] = array
    return padded
