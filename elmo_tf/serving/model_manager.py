"""The served model: its newest version under a base path, swapped when the versions change.

TF Serving's layout and default version policy: ``BASE/N/saved_model.pb`` is version N, and the
highest N is served; ``BASE/N/model.onnx`` (Triton's layout: an ONNX export, float32 or int8) is
a version too, run in ONNX Runtime (``onnx_servable``), and a directory holding both is refused
when it loads. A version directory's name is read by ``elmo_tf.export.versions`` (ASCII digits
whose value fits in int64, leading zeros allowed: ``0007/`` is version 7 and is read from
``0007/``); any other name is not a version, and a number that is no version is ignored with
one log line saying why. ``ModelManager`` polls ``BASE`` every ``poll_seconds``:

- when the highest version changes (a new export, or the served one deleted) it loads that
  version, warms it up, swaps it in, and unloads the old one once its in-flight requests have
  finished;
- a removed version is unloaded (its status goes to END) even when no other version can take
  its place: when no version is left, the model is unavailable (requests answer NOT_FOUND, as
  TF Serving's do) until a version is exported again;
- versions are immutable, as in TF Serving: a different model copied in under the number
  already served is not reloaded; export it as a new version.

A version that fails to load is reported in the model status (without the server's paths) and
retried at later polls with exponential backoff (from ``poll_seconds`` up to
``RETRY_MAX_SECONDS``), or at once when its directory changes; the old version keeps serving
meanwhile, unless it was removed.
"""

import contextlib
import gc
import json
import logging
import os
import re
import threading
import time

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis.get_model_status_pb2 import ModelVersionStatus

from elmo_tf import checks
from elmo_tf.config import ElmoConfig
from elmo_tf.export.saved_model_warmup import WARMUP_FILE
from elmo_tf.export.versions import MAX_VERSION, versions_in
from elmo_tf.serving.errors import (
    invalid_argument,
    not_found,
    resource_exhausted,
)
from elmo_tf.serving.onnx_servable import ONNX_FILE, OnnxServable
from elmo_tf.serving.servable import ServableBase
from elmo_tf.serving.signature import SignatureSpec, input_rules
from elmo_tf.tokens.characters import NUM_CHAR_IDS

log = logging.getLogger("serving")

State = ModelVersionStatus.State
RETRY_MAX_SECONDS = 300.0


def _input_rules(loaded):
    """``signature.input_rules`` of a loaded SavedModel's model (its ``elmo_config()``);
    bilm-tf's for a SavedModel elmo-tf did not write (its graph checks its own inputs)."""
    try:
        options = json.loads(loaded.elmo_config().numpy().decode("utf-8"))["options"]
        config = ElmoConfig.from_options(options, source="the SavedModel's elmo_config()")
    except (AttributeError, TypeError, KeyError, ValueError, tf.errors.OpError):
        return (NUM_CHAR_IDS, None), False
    return input_rules(config)


class Servable(ServableBase):
    """One version held as a SavedModel, run in TensorFlow (``ServableBase``'s interface).

    Args:
        name: the model name.
        version: the version number.
        path: the SavedModel directory.
        batching: ``BatchingOptions``, or ``None`` to run every request on its own.
    """

    def __init__(self, name, version, path, batching=None):
        super().__init__(name, version, path, batching)
        self.signature_defs = read_signature_defs(path)
        self._loaded = tf.saved_model.load(path)
        self._functions = dict(self._loaded.signatures)
        bounds, utf8_text = _input_rules(self._loaded)
        self.specs = {
            key: SignatureSpec(key, self.signature_defs[key], bounds, utf8_text)
            for key in self._functions
            if key in self.signature_defs
        }
        self.start_batchers()

    def run(self, key, inputs):
        """Runs signature ``key`` on validated inputs, turning TF errors into ``ServingError``."""
        spec = self.specs[key]
        tensors = {
            alias: tf.constant(value, dtype=tf.dtypes.as_dtype(spec.inputs[alias].dtype))
            for alias, value in inputs.items()
        }
        try:
            outputs = self._functions[key](**tensors)
        except tf.errors.InvalidArgumentError as e:
            raise invalid_argument(checks.first_line(e.message)) from None
        except tf.errors.ResourceExhaustedError as e:
            raise resource_exhausted(checks.first_line(e.message)) from None
        return {alias: value.numpy() for alias, value in outputs.items()}

    def release_model(self):
        self._functions.clear()
        self._loaded = None
        gc.collect()


SAVED_MODEL_FILE = "saved_model.pb"


def version_files(path):
    """The files that make the directory ``path`` a version: ``saved_model.pb`` (a
    SavedModel), ``model.onnx`` (an ONNX export), of those it holds."""
    return [f for f in (SAVED_MODEL_FILE, ONNX_FILE) if os.path.isfile(os.path.join(path, f))]


def load_servable(name, version, path, batching=None):
    """The servable of the version at ``path``: a SavedModel's (``Servable``) or an ONNX
    export's (``OnnxServable``); ``ValueError`` for a directory that holds both."""
    found = version_files(path)
    if len(found) > 1:
        raise ValueError(
            f"version {version} holds both a SavedModel ({SAVED_MODEL_FILE}) and an ONNX export "
            f"({ONNX_FILE}); a version is one of them"
        )
    if found == [ONNX_FILE]:
        return OnnxServable(name, version, path, batching)
    return Servable(name, version, path, batching)


class ModelManager:
    """Serves the newest version of the model under ``base_path``.

    Args:
        name: the model name clients ask for.
        base_path: the directory holding version directories ``N/``.
        poll_seconds: how often to look for a new version (0: only at ``start``).
        batching: ``BatchingOptions``, or ``None`` for no batching.
        limits: the ``RequestLimits`` each warm-up record is checked against (its defaults if
            ``None``), as the server checks a client's request.
        load: makes a version's servable, ``load(name, version, path, batching)``:
            ``load_servable`` (a test's stand-in needs its ``version``, ``warm_up``,
            ``acquire``, ``release`` and ``unload``).
    """

    def __init__(
        self, name, base_path, poll_seconds=2.0, batching=None, limits=None, load=load_servable
    ):
        self.name = name
        self._make_servable = load
        self.base_path = base_path
        self.poll_seconds = poll_seconds
        self.batching = batching
        self.limits = limits
        self._current = None
        self._states = {}  # version -> (State, error message)
        self._failed = {}  # version -> (directory mtime, time of the next try, backoff seconds)
        self._ignored = set()  # names of digits that are no version, logged once each
        self._empty_logged = False  # "no version" is logged once, not at every poll
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poller = None
        self._unloaders = []

    def start(self):
        """Loads the newest version now, then polls in the background."""
        self.poll()
        if self.poll_seconds > 0:
            self._poller = threading.Thread(target=self._poll_loop, name="poll", daemon=True)
            self._poller.start()

    def stop(self, timeout=None):
        """Stops polling and unloads the served version once its requests are done, waiting
        for them at most ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout)
        with self._lock:
            current, self._current = self._current, None
        if current is not None:
            self._retire(current, timeout)
        for thread in list(self._unloaders):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def version_directories(self):
        """``{version: directory name}`` of the versions (a ``saved_model.pb`` or a
        ``model.onnx``) under the base path (``elmo_tf.export.versions`` reads the names)."""
        try:
            names = os.listdir(self.base_path)
        except (FileNotFoundError, NotADirectoryError):  # moved away, or a file put there
            return {}
        versions = []
        for name in names:
            if not (name.isascii() and name.isdigit()):
                continue
            path = os.path.join(self.base_path, name)
            if int(name) > MAX_VERSION:
                why = "not a version, which must be at most 2**63 - 1 (int64)"
            elif not os.path.isdir(path):
                why = "a file, not a version directory"
            elif not version_files(path):
                why = (
                    f"holds no {SAVED_MODEL_FILE} or {ONNX_FILE} (a version is a SavedModel or "
                    "an ONNX export: elmo-tf export saved-model, elmo-tf export onnx)"
                )
            else:
                versions.append(name)
                self._ignored.discard(name)
                continue
            if name not in self._ignored:  # once, not at every poll
                self._ignored.add(name)
                log.warning("ignoring %s: %s", path, why)
        return versions_in(versions)

    def versions_on_disk(self):
        """Version numbers under the base path, ascending."""
        return sorted(self.version_directories())

    def poll(self):
        """Serves the highest version on disk: loads and swaps it in if it is not the one
        served; unloads the served version if its directory is gone and nothing replaces it."""
        directories = self.version_directories()
        current = self._current
        if not directories:
            if current is not None:
                self._withdraw(current)
            elif not self._empty_logged:
                log.warning("no version of model '%s' under %s yet", self.name, self.base_path)
            self._empty_logged = True
            return
        self._empty_logged = False
        target = max(directories)
        if current is not None and current.version == target:
            return  # versions are immutable: what is under the same number is not reloaded
        servable = self._load(target, os.path.join(self.base_path, directories[target]))
        if servable is None:  # failed, or backing off: the old version serves if it is there
            if current is not None and current.version not in directories:
                self._withdraw(current)
            return
        with self._lock:
            old, self._current = self._current, servable
            self._states[target] = (State.AVAILABLE, "")
        log.info("serving model '%s' version %d", self.name, target)
        if old is not None:
            self._retire(old)

    def _load(self, version, path):
        """The warmed-up ``Servable`` of ``version`` at ``path``, or ``None`` if it failed to
        load (reported in the status, retried with backoff) or is still backing off."""
        mtime = os.stat(path).st_mtime
        failed = self._failed.get(version)
        if failed is not None and failed[0] == mtime and time.monotonic() < failed[1]:
            return None  # backing off; a changed directory is tried at once
        self._set_state(version, State.LOADING)
        log.info("loading model '%s' version %d from %s", self.name, version, path)
        servable = None
        try:
            servable = self._make_servable(self.name, version, path, self.batching)
            if replayed := servable.warm_up(self.limits):
                log.info(
                    "warmed up model '%s' version %d: %d requests of %s",
                    self.name,
                    version,
                    replayed,
                    WARMUP_FILE,
                )
        except Exception as e:  # noqa: BLE001 - any load failure leaves the old version serving
            if servable is not None:
                servable.unload()
            if failed is None or failed[0] != mtime:
                backoff = max(1.0, self.poll_seconds)
            else:
                backoff = min(RETRY_MAX_SECONDS, 2 * failed[2])
            self._failed[version] = (mtime, time.monotonic() + backoff, backoff)
            message = self._without_paths(checks.first_line(e))
            self._set_state(version, State.END, f"failed to load: {message}")
            log.error(
                "model '%s' version %d failed to load (retrying in %.0f s): %s",
                self.name,
                version,
                backoff,
                e,
            )
            return None
        self._failed.pop(version, None)
        return servable

    def _withdraw(self, current):
        """Unloads ``current``, whose directory is gone, leaving no version served."""
        with self._lock:
            if self._current is current:
                self._current = None
        log.warning(
            "model '%s' version %d was removed from %s and no other version loads: the model "
            "is unavailable until a version is exported",
            self.name,
            current.version,
            self.base_path,
        )
        self._retire(current)

    @contextlib.contextmanager
    def servable(self, version=None):
        """The served ``Servable`` (held until the block ends); NOT_FOUND unless it matches.

        With no version loaded (none exported yet, none that loads, or the last one removed)
        this is NOT_FOUND, not UNAVAILABLE: TF Serving answers "Servable not found for
        request" then, so a client written for it sees the same code; and nothing changes by
        retrying until a version is exported.
        """
        with self._lock:
            current = self._current
            if current is None or (version is not None and version != current.version):
                wanted = "Latest" if version is None else f"Specific({self.name}, {version})"
                reason = ""
                if current is None:
                    reason = ": no version of it is loaded (see its status)"
                raise not_found(
                    f"Servable not found for request: {wanted} of model '{self.name}'{reason}"
                )
            # Counted before the lock is released, so a swap cannot unload it under the request.
            current.acquire()
        try:
            yield current
        finally:
            current.release()

    def status(self, version=None):
        """``[(version, State, error message)]``, newest first; NOT_FOUND for an unknown one."""
        with self._lock:
            states = dict(self._states)
        if version is not None:
            if version not in states:
                raise not_found(f"Could not find version {version} of model '{self.name}'")
            states = {version: states[version]}
        if not states:
            raise not_found(f"Could not find any versions of model '{self.name}'")
        return [(v, *states[v]) for v in sorted(states, reverse=True)]

    def _without_paths(self, message):
        """``message`` without the server's directories: clients see version numbers only."""
        for base in sorted({self.base_path, os.path.abspath(self.base_path),
                            os.path.realpath(self.base_path)}, key=len, reverse=True):  # fmt: skip
            message = message.replace(base.rstrip(os.sep), "<model base path>")
        return _ABSOLUTE_PATH.sub("<path>", message)

    def _retire(self, servable, timeout=None):
        self._set_state(servable.version, State.UNLOADING)

        def unload():
            servable.unload(timeout)
            with self._lock:
                current = self._current
                if current is None or current.version != servable.version:  # not loaded again
                    self._states[servable.version] = (State.END, "")
            log.info("unloaded model '%s' version %d", self.name, servable.version)

        thread = threading.Thread(target=unload, name=f"unload-{servable.version}", daemon=True)
        self._unloaders = [t for t in self._unloaders if t.is_alive()] + [thread]
        thread.start()

    def _set_state(self, version, state, message=""):
        with self._lock:
            self._states[version] = (state, message)

    def _poll_loop(self):
        while not self._stop.wait(self.poll_seconds):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a failed poll must not end polling
                log.exception("polling %s failed", self.base_path)


def read_signature_defs(path):
    """The ``SignatureDef`` map of the SavedModel's ``serve`` MetaGraph (what TF Serving lists)."""
    saved_model = saved_model_pb2.SavedModel()
    pb_path = os.path.join(path, SAVED_MODEL_FILE)
    with open(pb_path, "rb") as f:
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return dict(meta_graph.signature_def)
    raise ValueError(f"{pb_path} has no MetaGraph tagged 'serve'")


_ABSOLUTE_PATH = re.compile(r"(?<![\w<>])/[^\s'\"(){}\[\],;]+")
