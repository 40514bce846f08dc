"""What every served version does, whatever runs it: ``ServableBase``.

A version is served through one interface, which the protocol layers (gRPC, REST) and the
model manager use and nothing else: ``signature(key)``, ``predict(...)``, ``warm_up(limits)``,
``acquire``/``release``/``unload``, ``batch_stats()``, and ``signature_defs`` (what
``GetModelMetadata`` lists). A subclass loads its version and runs validated inputs
(``run``): ``model_manager.Servable`` a SavedModel in TensorFlow, ``onnx_servable.OnnxServable``
an ONNX export in ONNX Runtime. Validation (``SignatureSpec.validate``), batching
(``Batcher``) and the version's life (requests in flight counted, waited for at unload) are
here, once.
"""

import threading
import time

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc
import numpy as np
import tensorflow as tf

from elmo_tf.checks import shown
from elmo_tf.export.saved_model_warmup import read_warmup_requests
from elmo_tf.serving.errors import ServingError, not_found
from elmo_tf.serving.request_batching import CLIENT_GONE, Batcher
from elmo_tf.serving.request_limits import RequestLimits
from elmo_tf.serving.signature import is_string
from elmo_tf.serving.tensors import from_tensor_proto


class ServableBase:
    """One loaded version: its signatures (``specs``: ``{key: SignatureSpec}``, and
    ``signature_defs``), their batchers, and a count of the requests using it.

    A subclass sets ``specs`` and ``signature_defs``, then calls ``start_batchers``, and
    implements ``run(key, inputs)`` (validated inputs to outputs, its errors as
    ``ServingError``) and ``release_model()`` (frees what it loaded).
    """

    def __init__(self, name, version, path, batching=None):
        self.name = name
        self.version = version
        self.path = path
        self.batching = batching
        self.specs = {}
        self.signature_defs = {}
        self._batchers = {}
        self._users = 0
        self._idle = threading.Condition()

    def start_batchers(self):
        """A ``Batcher`` per signature, where the version batches requests."""
        if self.batching is not None:
            self._batchers = {
                key: Batcher(lambda inputs, key=key: self.run(key, inputs), spec, self.batching)
                for key, spec in self.specs.items()
            }

    def signature(self, key):
        """The ``SignatureSpec`` of ``key``; NOT_FOUND if the model has no such signature."""
        spec = self.specs.get(key)
        if spec is None:
            raise not_found(
                f"signature {shown(key)} not found in model '{self.name}' version {self.version} "
                f"(signatures: {', '.join(sorted(self.specs))})"
            )
        return spec

    def predict(self, key, inputs, output_filter=(), limits=None, alive=None):
        """Validates ``inputs`` (alias -> numpy; against ``limits``, a ``RequestLimits``) and
        runs them, unless ``alive()`` says the client has gone; returns the outputs asked for."""
        spec = self.signature(key)
        aliases = spec.check_output_filter(output_filter)
        batch_size = spec.validate(inputs, limits)
        batcher = self._batchers.get(key)
        if batcher is not None:
            outputs = batcher.submit(inputs, batch_size, alive)
        elif alive is not None and not alive():
            raise ServingError(grpc.StatusCode.CANCELLED, CLIENT_GONE)
        else:
            outputs = self.run(key, inputs)
        return {alias: outputs[alias] for alias in aliases}

    def run(self, key, inputs):
        raise NotImplementedError

    def release_model(self):
        raise NotImplementedError

    def warm_up_records(self, limits):
        """Yields the version's warm-up records (``assets.extra/tf_serving_warmup_requests`` in
        its directory, whatever runs it: ``elmo_tf.export.saved_model_warmup``), each checked
        as a client's request is, against ``limits``, its declared shapes before its values
        are read."""
        for key, protos in read_warmup_requests(self.path):
            spec = self.signature(key)
            spec.check_names(protos)
            inputs = {
                alias: from_tensor_proto(
                    proto,
                    alias,
                    spec.inputs[alias].dtype,
                    lambda shape, alias=alias, spec=spec: spec.check_declared_shape(
                        alias, shape, limits
                    ),
                )
                for alias, proto in protos.items()
            }
            spec.validate(inputs, limits)
            yield key, inputs

    def warm_up(self, limits=None):
        """Runs the version's warm-up records (``warm_up_records``) as TF Serving does, so the
        first request is not slow; a record that fails fails the load. Without records, every
        signature once on a one-row input. Returns the number of records run (0 without)."""
        limits = RequestLimits() if limits is None else limits
        replayed = 0
        for key, inputs in self.warm_up_records(limits):
            self.run(key, inputs)
            replayed += 1
        if replayed:
            return replayed
        for key, spec in self.specs.items():
            inputs = {}
            for alias, tensor in spec.inputs.items():
                shape = [1 if d is None else d for d in tensor.shape or (1,)]
                if is_string(tensor):
                    inputs[alias] = np.full(shape, b"", dtype=object)
                else:
                    inputs[alias] = np.zeros(shape, tf.dtypes.as_dtype(tensor.dtype).as_numpy_dtype)
            self.run(key, inputs)
        return 0

    def acquire(self):
        """Counts one more request using this version (``unload`` waits for them)."""
        with self._idle:
            self._users += 1

    def release(self):
        with self._idle:
            self._users -= 1
            self._idle.notify_all()

    def unload(self, timeout=None):
        """Waits for the requests using this version (up to ``timeout`` s), stops its batchers
        (failing what is still queued then), frees the model."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._users:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._idle.wait(left)
        for batcher in self._batchers.values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            batcher.close(left)
        self.release_model()

    def batch_stats(self):
        """``{"batches", "requests", "queued_rows"}`` summed over the signatures' batchers."""
        batchers = self._batchers.values()
        return {
            "batches": sum(b.batches_run for b in batchers),
            "requests": sum(b.tasks_run for b in batchers),
            "queued_rows": sum(b.queued_rows for b in batchers),
        }
