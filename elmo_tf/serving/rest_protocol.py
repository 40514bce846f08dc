"""TF Serving's REST API (its "V1" protocol), without a transport: a method, a path and body
bytes in; a status and a JSON value (with NumPy arrays in it) out.

=========================================================  ====================================
request                                                    answer
=========================================================  ====================================
``GET /v1/models/NAME[/versions/N]``                       model status
``GET /v1/models/NAME[/versions/N]/metadata``              ``model_spec`` and ``signature_def``
``POST /v1/models/NAME[/versions/N]:predict``              ``{"predictions": ...}`` (row form,
                                                           ``"instances"``) or ``{"outputs":
                                                           ...}`` (columnar form, ``"inputs"``)
=========================================================  ====================================

``HEAD`` is answered as ``GET``, without the body. A path is read as it was sent, as TF Serving
reads it: a percent-encoded ``/`` or ``:`` (``%2F``, ``%3A``) is part of a name, never a
separator. ``/labels/LABEL`` in place of ``/versions/N`` is answered as gRPC answers a
``version_label``: this server has none (404).

The body may name ``"signature_name"`` (default ``serving_default``). Strings are JSON strings
or ``{"b64": "..."}``. In the row form a signature with one input takes the values themselves
(``{"instances": ["a sentence", ...]}``), one with several takes objects (``{"instances":
[{"tokens": [...], "sequence_len": 2}, ...]}``). Errors are ``ServingError``s, answered
``{"error": "..."}`` with 400 (bad request: not JSON, a key given twice, a URL version beyond
int64), 404 (unknown path, model, version or signature, or no version loaded), 413 (a body or
request over a limit), 429 (batch queue full), 501 (a method not served), 503 (no room to parse
the body within the timeout). The answers are those of the gRPC API, converted the way TF
Serving does.

Parsing is bounded before it starts: a body holding more JSON arrays, objects or strings than
any request within the limits needs is refused from its bytes (413), and at most
``PARSE_BUDGET_BYTES`` of bodies are parsed at once across requests (``BodyBudget``); a body
waits its turn, holding its bytes only, until its inputs are read into arrays.

``elmo_tf.serving.rest_api`` carries this over HTTP.
"""

import dataclasses
import json
import re

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc
from google.protobuf import json_format
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2

from elmo_tf.checks import shown
from elmo_tf.export.versions import parse_version
from elmo_tf.serving.errors import (
    ServingError,
    invalid_argument,
    not_found,
    resource_exhausted,
    unavailable,
    version_label_not_found,
)
from elmo_tf.serving.request_limits import BodyBudget
from elmo_tf.serving.tensors import from_json

_MODEL = (
    r"/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[0-9]+)|/labels/(?P<label>[^/:]+))?"
)
GET_PATH = re.compile(_MODEL + r"(?P<metadata>/metadata)?/?")
POST_PATH = re.compile(_MODEL + r":(?P<method>[a-z]+)")
# Bytes of bodies parsed (and read into arrays) at once, across requests. JSON parses into
# Python objects up to ~25 times its size (docs/robustness.md): at the default
# max_request_bytes one body at the limit parses alone while many small ones parse side by
# side. A constant, not a ServerOptions field: it bounds the server's memory whatever one
# request may be.
PARSE_BUDGET_BYTES = 16 * 1024 * 1024
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED  # REST 501


@dataclasses.dataclass(frozen=True)
class Route:
    """What a request asks: ``kind`` (``"status"``, ``"metadata"`` or ``"predict"``), of model
    ``name``, ``version`` (``None``: the newest)."""

    kind: str
    name: str
    version: int | None
    label: str | None = None


def route(method, path):
    """The ``Route`` of ``method`` and ``path`` (as sent: percent-escapes not decoded, without
    its query); a ``ServingError`` (404, 400 or 501) naming what is wrong otherwise."""
    if method in ("GET", "HEAD"):
        match = GET_PATH.fullmatch(path)
        if match is None:
            raise not_found(f"Malformed request: {method} {shown(path, quote=False)}")
        kind = "metadata" if match["metadata"] else "status"
        return Route(kind, match["name"], _version(match), match["label"])
    if method == "POST":
        match = POST_PATH.fullmatch(path)
        if match is None:
            raise not_found(f"Malformed request: POST {shown(path, quote=False)}")
        if match["method"] != "predict":
            raise ServingError(UNIMPLEMENTED, f"method {shown(match['method'])} is not served")
        return Route("predict", match["name"], _version(match), match["label"])
    raise ServingError(
        UNIMPLEMENTED, f"Unsupported method ({shown(method)}): the REST API takes GET, HEAD, POST"
    )


def _version(match):
    """The version a URL names (``None`` for the newest); 400 for one beyond int64."""
    text = match["version"]
    if text is None:
        return None
    version = parse_version(text)
    if version is None:
        raise invalid_argument(
            f"version {shown(text)} in the URL is not a version: at most 2**63 - 1 (int64)"
        )
    return version


class RestProtocol:
    """Answers ``Route``s for a ``ModelServer`` (and its gRPC servicers, whose answers the REST
    ones are converted from).

    Args:
        model_server: the ``ModelServer``.
        prediction_service, model_service: its gRPC servicers.
        parse_budget: bytes of bodies parsed at once (``BodyBudget``).
        parse_timeout: seconds a body may wait for room to parse (then 503).
    """

    def __init__(
        self,
        model_server,
        prediction_service,
        model_service,
        parse_budget=PARSE_BUDGET_BYTES,
        parse_timeout=30.0,
    ):
        self.model_server = model_server
        self.prediction_service = prediction_service
        self.model_service = model_service
        self.body_budget = BodyBudget(parse_budget)
        self.parse_timeout = parse_timeout

    def answer(self, route, body=b"", alive=None):
        """The JSON answer (a dict, NumPy arrays in it) to ``route`` with ``body`` (the bytes of
        a POST's body); ``alive()``, if given, says whether the client still waits."""
        if route.label is not None:
            raise version_label_not_found(route.name, route.label)
        if route.kind == "status":
            return self.status(route.name, route.version)
        if route.kind == "metadata":
            return self.metadata(route.name, route.version)
        return self.predict(route.name, route.version, body, alive)

    def status(self, name, version):
        request = get_model_status_pb2.GetModelStatusRequest()
        _set_model_spec(request.model_spec, name, version)
        response = self.model_service.status(request)
        return json_format.MessageToDict(
            response, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )

    def metadata(self, name, version):
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        _set_model_spec(request.model_spec, name, version)
        response = self.prediction_service.metadata(request)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        return {
            "model_spec": {
                "name": name,
                "signature_name": "",
                "version": str(response.model_spec.version.value),
            },
            "metadata": {
                "signature_def": json_format.MessageToDict(
                    signature_map,
                    always_print_fields_with_no_presence=True,
                    preserving_proto_field_name=True,
                )
            },
        }

    def predict(self, name, version, body, alive=None):
        limits = self.model_server.limits
        check_structure(body, limits)
        reservation = self.body_budget.reserve(len(body), self.parse_timeout)
        if reservation is None:
            raise unavailable("the server is busy parsing other large requests; retry later")
        with reservation:  # released once the inputs are arrays, or on any error
            parsed = [parse_json_body(body)]
            del body
            signature, row_format = _predict_form(parsed[0])

            def read_inputs(spec):
                payload = parsed.pop()["instances" if row_format else "inputs"]
                reader = _row_inputs if row_format else _columnar_inputs
                inputs, error = None, None
                try:
                    inputs = reader(payload, spec, limits)
                except ServingError as e:
                    # Raised again without its traceback: the frames it holds hold the parsed
                    # body, which must be freed before its room in the budget is.
                    error = ServingError(e.code, e.message, e.http_status)
                del payload
                reservation.release()  # the JSON objects are gone; the arrays are small
                if error is not None:
                    raise error
                return inputs

            _, outputs = self.model_server.predict(
                name, version, signature, read_inputs, [], alive=alive
            )
        # Arrays stay arrays: the transport encodes them a row at a time (tensors.json_pieces).
        if not row_format:
            return {"outputs": next(iter(outputs.values())) if len(outputs) == 1 else outputs}
        if len(outputs) == 1:
            return {"predictions": next(iter(outputs.values()))}
        rows = len(next(iter(outputs.values())))
        return {"predictions": [{a: v[i] for a, v in outputs.items()} for i in range(rows)]}


def check_structure(data, limits):
    """413 for a body holding more JSON arrays, objects or strings than any request within
    ``limits`` needs, counted in its bytes before it is parsed: each costs a Python object, so
    a body of empty lists (``[[],[],...]``) or short strings parses to 20-30 times its size.
    A request needs an array or object per row and per token at most (``char_ids`` rows,
    ``{"b64": ...}`` tokens), two strings per token or row (a key and its value), and a few
    around them; a bracket or an escaped quote inside a string counts too, which can only
    overcount."""
    tokens, rows = limits.max_request_tokens, limits.max_request_rows
    counts = {
        "JSON arrays and objects": (data.count(b"[") + data.count(b"{"), tokens + rows + 64),
        "JSON strings": (data.count(b'"') // 2, 2 * (tokens + rows) + 64),
    }
    for what, (count, most) in counts.items():
        if count > most:
            raise resource_exhausted(
                f"the body holds {count:,} {what}, more than the {most:,} a request of at most "
                f"max_request_tokens ({tokens:,}) tokens and max_request_rows ({rows:,}) rows "
                "needs; send a smaller request",
                http_status=413,
            )


def parse_json_body(data):
    """The JSON object of a request body; ``INVALID_ARGUMENT`` (400) naming what is wrong.

    A key given twice in one object is refused, naming it: JSON parsers disagree on which
    value wins, so a filter in front of the server could check one and the model run the
    other.
    """
    try:
        body = json.loads(data, object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise invalid_argument(f"the body is not valid JSON: {e}") from None
    except RecursionError:
        raise invalid_argument("the body's JSON is nested too deeply") from None
    except _DuplicateKey as e:
        raise invalid_argument(
            f"the body gives the key {shown(e.key)} twice in one object; give each key once"
        ) from None
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        raise invalid_argument(f"the body's JSON has a value out of range: {e}") from None
    if not isinstance(body, dict):
        raise invalid_argument("the body must be a JSON object")
    return body


class _DuplicateKey(ValueError):
    def __init__(self, key):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs):
    body = {}
    for key, value in pairs:
        if key in body:
            raise _DuplicateKey(key)
        body[key] = value
    return body


def _predict_form(body):
    """``(signature name, row format?)`` of a parsed ``:predict`` body."""
    signature = body.get("signature_name") or "serving_default"
    if not isinstance(signature, str):
        raise invalid_argument("'signature_name' must be a string")
    if ("instances" in body) == ("inputs" in body):
        raise invalid_argument("the body must hold exactly one of 'instances' or 'inputs'")
    return signature, "instances" in body


def _set_model_spec(model_spec, name, version):
    model_spec.name = name
    if version is not None:
        model_spec.version.value = version


def _is_value(item):
    """A JSON value of one input, as opposed to an object of named inputs."""
    return not isinstance(item, dict) or set(item) == {"b64"}


def _row_inputs(instances, spec, limits):
    if not isinstance(instances, list):
        raise invalid_argument("'instances' must be a list (one entry per row)")
    aliases = sorted(spec.inputs)
    if not instances:
        raise invalid_argument(f"input '{aliases[0]}' has an empty batch: 'instances' is empty")
    if all(_is_value(item) for item in instances):
        if len(aliases) != 1:
            raise invalid_argument(
                f"signature '{spec.name}' has inputs {aliases}: each instance must be an object "
                "naming them"
            )
        columns = {aliases[0]: instances}
    else:
        columns = {}
        for index, item in enumerate(instances):
            if _is_value(item):
                raise invalid_argument(f"instance {index} must be an object naming the inputs")
            spec.check_names(item)
            for alias in aliases:
                columns.setdefault(alias, []).append(item[alias])
    return _read(columns, spec, limits)


def _columnar_inputs(inputs, spec, limits):
    if _is_value(inputs):
        if len(spec.inputs) != 1:
            raise invalid_argument(
                f"signature '{spec.name}' has inputs {sorted(spec.inputs)}: 'inputs' must be an "
                "object naming them"
            )
        inputs = {next(iter(spec.inputs)): inputs}
    spec.check_names(inputs)
    return _read(inputs, spec, limits)


def _read(columns, spec, limits):
    """The numpy inputs of JSON ``columns``, each one's shape checked before it is read."""
    return {
        alias: from_json(
            value,
            alias,
            spec.inputs[alias].dtype,
            lambda shape, alias=alias: spec.check_declared_shape(alias, shape, limits),
        )
        for alias, value in columns.items()
    }
