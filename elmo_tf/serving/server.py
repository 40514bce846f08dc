"""``ModelServer``: the model manager behind a gRPC and a REST front end (``elmo-tf serve``).

Both front ends call ``predict``, ``metadata`` and ``status`` here, so they answer alike.
``stop`` is graceful: new requests are refused, requests in flight (queued in a batch
included) finish, then the model is unloaded.
"""

import concurrent.futures
import logging
import time

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc

from elmo_tf.checks import shown
from elmo_tf.errors import ListenError
from elmo_tf.serving import grpc_api
from elmo_tf.serving.addresses import cannot_listen
from elmo_tf.serving.errors import not_found
from elmo_tf.serving.model_manager import ModelManager
from elmo_tf.serving.options import BatchingOptions, ServerOptions  # noqa: F401 (re-exported)
from elmo_tf.serving.rest_api import RestServer
from elmo_tf.serving.rest_protocol import RestProtocol

log = logging.getLogger("serving")


class ModelServer:
    """Serves one model over TF Serving's gRPC and REST APIs.

    >>> server = ModelServer(ServerOptions("models/elmo", port=0, rest_port=0))
    >>> server.start()  # loads the newest version; server.port, server.rest_port are bound
    >>> server.stop()

    Also a context manager (``start`` / ``stop``).
    """

    def __init__(self, options):
        self.options = options
        self.limits = options.limits()
        self.manager = ModelManager(
            options.model_name,
            options.model_base_path,
            options.poll_seconds,
            options.batching,
            self.limits,
        )
        self.port = None
        self.rest_port = None
        self._grpc = None
        self._rest = None

    def start(self):
        """Loads the model, then listens; ``port`` and ``rest_port`` hold the bound ports."""
        options = self.options
        self.manager.start()
        try:
            self._listen()
        except BaseException:
            self.stop(0)
            raise
        log.info(
            "serving model '%s' from %s: gRPC %s:%d%s",
            options.model_name,
            options.model_base_path,
            options.host,
            self.port,
            f", REST {options.host}:{self.rest_port}" if self._rest else "",
        )
        return self

    def _listen(self):
        options = self.options
        self._grpc = grpc.server(
            concurrent.futures.ThreadPoolExecutor(
                max_workers=options.grpc_max_threads, thread_name_prefix="grpc"
            ),
            options=[
                ("grpc.max_receive_message_length", options.max_request_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.so_reuseport", 0),
            ],
        )
        grpc_api.add_to_server(self, self._grpc)
        try:
            self.port = self._grpc.add_insecure_port(f"{_host(options.host)}:{options.port}")
        except RuntimeError:  # grpc's "Failed to bind to address"
            self.port = 0
        if self.port == 0:
            raise ListenError(cannot_listen(options.host, options.port, "gRPC", "port"))
        self._grpc.start()
        if options.rest_port is not None:
            try:
                protocol = RestProtocol(
                    self,
                    grpc_api.PredictionServicer(self),
                    grpc_api.ModelServicer(self),
                    parse_timeout=options.rest_timeout_seconds,
                )
                self._rest = RestServer(
                    (options.host, options.rest_port),
                    protocol,
                    options.max_request_bytes,
                    options.rest_timeout_seconds,
                )
            except OSError as e:
                message = cannot_listen(options.host, options.rest_port, "REST", "rest_port")
                raise ListenError(f"{message} ({e.strerror or e})") from None
            self.rest_port = self._rest.server_address[1]

    def stop(self, grace=30.0):
        """Refuses new requests, lets those in flight finish for up to ``grace`` seconds, then
        closes every connection still open and unloads the model; returns within about
        ``grace`` seconds (plus the batch running at that moment)."""
        deadline = time.monotonic() + grace
        done = self._grpc.stop(grace) if self._grpc is not None else None
        if self._rest is not None:
            self._rest.stop(deadline)  # idle keep-alive connections close now
            self._rest = None
        if done is not None:
            done.wait(max(0.0, deadline - time.monotonic()))
            self._grpc = None
        self.manager.stop(max(0.0, deadline - time.monotonic()))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def predict(self, name, version, signature, read_inputs, output_filter, alive=None):
        """``(version served, outputs)``; ``read_inputs(spec)`` turns the wire inputs to numpy,
        checking their declared shapes against ``spec`` and ``self.limits`` first;
        ``alive()``, if given, says whether the client still waits for the answer."""
        with self._servable(name, version) as servable:
            spec = servable.signature(signature)
            inputs = read_inputs(spec)
            outputs = servable.predict(signature, inputs, output_filter, self.limits, alive)
            return servable.version, outputs

    def metadata(self, name, version):
        """``(version served, {signature key: SignatureDef})``."""
        with self._servable(name, version) as servable:
            return servable.version, servable.signature_defs

    def status(self, name, version):
        """``[(version, state, error message)]``, newest first."""
        self._check_name(name, version)
        return self.manager.status(version)

    def batch_stats(self):
        """The served version's batching counters (``Servable.batch_stats``; zeros if off)."""
        with self.manager.servable() as servable:
            return servable.batch_stats()

    def _servable(self, name, version):
        self._check_name(name, version)
        return self.manager.servable(version)

    def _check_name(self, name, version):
        if name != self.options.model_name:
            wanted = (
                "Latest" if version is None else f"Specific({shown(name, quote=False)}, {version})"
            )
            raise not_found(f"Servable not found for request: {wanted}: no model {shown(name)}")


def _host(host):
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
