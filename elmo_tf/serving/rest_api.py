"""TF Serving's REST API on the standard library's ``http.server``.

=========================================================  ====================================
request                                                    answer
=========================================================  ====================================
``GET /v1/models/NAME[/versions/N]``                       model status
``GET /v1/models/NAME[/versions/N]/metadata``              ``model_spec`` and ``signature_def``
``POST /v1/models/NAME[/versions/N]:predict``              ``{"predictions": ...}`` (row form,
                                                           ``"instances"``) or ``{"outputs":
                                                           ...}`` (columnar form, ``"inputs"``)
=========================================================  ====================================

The body may name ``"signature_name"`` (default ``serving_default``). Strings are JSON strings
or ``{"b64": "..."}``. In the row form a signature with one input takes the values themselves
(``{"instances": ["a sentence", ...]}``), one with several takes objects (``{"instances":
[{"tokens": [...], "sequence_len": 2}, ...]}``). Errors answer ``{"error": "..."}`` with 400
(bad request), 404 (unknown model, version or signature), 413 (body over the size limit), 429
(batch queue full). The answers are those of the gRPC API, converted the way TF Serving does.
"""

import http.server
import json
import logging
import re

from google.protobuf import json_format
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
)

from elmo_tf.serving.errors import ServingError, invalid_argument, resource_exhausted
from elmo_tf.serving.tensors import from_json, to_json

log = logging.getLogger("serving")

_MODEL = r"/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>\d+))?"
GET_PATH = re.compile(_MODEL + r"(?P<metadata>/metadata)?/?")
POST_PATH = re.compile(_MODEL + r":(?P<method>[a-z]+)")
DISCARD_LIMIT = 256 << 20  # a refused body larger than this is not read; the client sees a reset


class RestHandler(http.server.BaseHTTPRequestHandler):
    """One REST request; ``server`` is a ``RestServer``."""

    server_version = "elmo-tf-serving"

    def do_GET(self):  # noqa: N802 - http.server's method name
        match = GET_PATH.fullmatch(self.path.split("?")[0])
        if match is None:
            return self._send(404, {"error": f"Malformed request: GET {self.path}"})
        self._answer(self._metadata if match["metadata"] else self._status, match)

    def do_POST(self):  # noqa: N802
        match = POST_PATH.fullmatch(self.path.split("?")[0])
        if match is None:
            return self._send(404, {"error": f"Malformed request: POST {self.path}"})
        if match["method"] != "predict":
            return self._send(501, {"error": f"method '{match['method']}' is not served"})
        self._answer(self._predict, match)

    def log_message(self, format, *args):  # noqa: A002 - http.server's signature
        log.debug("%s %s", self.address_string(), format % args)

    def _answer(self, method, match):
        try:
            answer = method(match["name"], _version(match))
        except ServingError as e:
            self._send(e.http_status, {"error": e.message})
        except Exception:  # noqa: BLE001 - a bug answers 500 and the server stays up
            log.exception("internal error")
            self._send(500, {"error": "internal error; see the server log"})
        else:
            self._send(200, answer)

    def _send(self, status, body):
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up; nothing to tell
            self.close_connection = True

    def _status(self, name, version):
        request = get_model_status_pb2.GetModelStatusRequest()
        _set_model_spec(request.model_spec, name, version)
        response = self.server.model_service.status(request)
        return json_format.MessageToDict(
            response, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )

    def _metadata(self, name, version):
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        _set_model_spec(request.model_spec, name, version)
        response = self.server.prediction_service.metadata(request)
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

    def _predict(self, name, version):
        body = self._read_json()
        signature = body.get("signature_name") or "serving_default"
        if not isinstance(signature, str):
            raise invalid_argument("'signature_name' must be a string")
        if ("instances" in body) == ("inputs" in body):
            raise invalid_argument("the body must hold exactly one of 'instances' or 'inputs'")
        row_format = "instances" in body
        reader = _row_inputs if row_format else _columnar_inputs
        payload = body["instances" if row_format else "inputs"]
        _, outputs = self.server.model_server.predict(
            name, version, signature, lambda spec: reader(payload, spec), []
        )
        values = {alias: to_json(value) for alias, value in outputs.items()}
        if not row_format:
            return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
        if len(values) == 1:
            return {"predictions": next(iter(values.values()))}
        rows = len(next(iter(values.values())))
        return {"predictions": [{a: v[i] for a, v in values.items()} for i in range(rows)]}

    def _read_json(self):
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise invalid_argument("a POST needs a Content-Length header") from None
        limit = self.server.max_request_bytes
        if length > limit:
            self._discard(length)
            raise resource_exhausted(
                f"request of {length} bytes is over the limit of {limit} bytes", http_status=413
            )
        try:
            body = json.loads(self.rfile.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise invalid_argument(f"the body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise invalid_argument("the body must be a JSON object")
        return body

    def _discard(self, length):
        """Reads and drops a refused body (up to a bound), so that closing the connection does
        not reset it before the client has read the error."""
        self.close_connection = True
        left = min(length, DISCARD_LIMIT)
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 16))
            if not chunk:
                break
            left -= len(chunk)


class RestServer(http.server.ThreadingHTTPServer):
    """The REST front end of a ``ModelServer``; a thread per connection.

    Handler threads are not daemons, so ``server_close`` waits for requests in flight.
    """

    daemon_threads = False
    block_on_close = True

    def __init__(self, address, model_server, prediction_service, model_service, max_bytes):
        self.model_server = model_server
        self.prediction_service = prediction_service
        self.model_service = model_service
        self.max_request_bytes = max_bytes
        super().__init__(address, RestHandler)


def _version(match):
    return None if match["version"] is None else int(match["version"])


def _set_model_spec(model_spec, name, version):
    model_spec.name = name
    if version is not None:
        model_spec.version.value = version


def _is_value(item):
    """A JSON value of one input, as opposed to an object of named inputs."""
    return not isinstance(item, dict) or set(item) == {"b64"}


def _row_inputs(instances, spec):
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
    return {a: from_json(v, a, spec.inputs[a].dtype) for a, v in columns.items()}


def _columnar_inputs(inputs, spec):
    if _is_value(inputs):
        if len(spec.inputs) != 1:
            raise invalid_argument(
                f"signature '{spec.name}' has inputs {sorted(spec.inputs)}: 'inputs' must be an "
                "object naming them"
            )
        inputs = {next(iter(spec.inputs)): inputs}
    spec.check_names(inputs)
    return {a: from_json(v, a, spec.inputs[a].dtype) for a, v in inputs.items()}
