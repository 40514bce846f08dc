"""TF Serving's gRPC API: ``PredictionService`` (Predict, GetModelMetadata) and ``ModelService``
(GetModelStatus), on the stock generated servicers of ``tensorflow-serving-api``.

Errors are gRPC statuses: INVALID_ARGUMENT for a malformed request (naming the input),
NOT_FOUND for an unknown model, version or signature (and while no version of the model is
loaded, as TF Serving answers), RESOURCE_EXHAUSTED for a full batch queue
(a message over the size limit is refused by gRPC itself with RESOURCE_EXHAUSTED). Classify,
Regress, MultiInference and HandleReloadConfigRequest answer UNIMPLEMENTED, as the generated
servicers do, but without their ``NotImplementedError`` (which gRPC logs with a traceback per
call).
"""

import logging

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc
from tensorflow.core.protobuf import error_codes_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from elmo_tf.checks import shown
from elmo_tf.serving.errors import ServingError, invalid_argument, version_label_not_found
from elmo_tf.serving.tensors import from_tensor_proto, to_tensor_proto

log = logging.getLogger("serving")

SIGNATURE_DEF_FIELD = "signature_def"


def model_request(model_spec):
    """``(name, version or None)`` of a request's ``ModelSpec``."""
    if model_spec.version_label:
        raise version_label_not_found(model_spec.name, model_spec.version_label)
    version = model_spec.version.value if model_spec.HasField("version") else None
    return model_spec.name, version


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """``Predict`` and ``GetModelMetadata`` of a ``ModelServer``."""

    def __init__(self, server):
        self.server = server

    def Predict(self, request, context):  # noqa: N802 - the protocol's method name
        return _answer(context, lambda r: self.predict(r, _alive(context)), request)

    def GetModelMetadata(self, request, context):  # noqa: N802
        return _answer(context, self.metadata, request)

    def Classify(self, request, context):  # noqa: N802
        _unimplemented(context, "Classify")

    def Regress(self, request, context):  # noqa: N802
        _unimplemented(context, "Regress")

    def MultiInference(self, request, context):  # noqa: N802
        _unimplemented(context, "MultiInference")

    def predict(self, request, alive=None):
        """The ``PredictResponse`` to ``request``; raises ``ServingError``. ``alive()`` says
        whether the client still waits (not computed, or stopped between chunks, if not)."""
        name, version = model_request(request.model_spec)
        signature = request.model_spec.signature_name or "serving_default"
        limits = self.server.limits

        def read_inputs(spec):
            spec.check_names(request.inputs)
            return {
                alias: from_tensor_proto(
                    proto,
                    alias,
                    spec.inputs[alias].dtype,
                    lambda shape, alias=alias: spec.check_declared_shape(alias, shape, limits),
                )
                for alias, proto in request.inputs.items()
            }

        served, outputs = self.server.predict(
            name, version, signature, read_inputs, list(request.output_filter), alive
        )
        response = predict_pb2.PredictResponse()
        response.model_spec.name = name
        response.model_spec.version.value = served
        response.model_spec.signature_name = signature
        for alias, value in outputs.items():
            response.outputs[alias].CopyFrom(to_tensor_proto(value))
        return response

    def metadata(self, request):
        """The ``GetModelMetadataResponse`` to ``request``; raises ``ServingError``."""
        name, version = model_request(request.model_spec)
        if not request.metadata_field:
            raise invalid_argument("GetModelMetadataRequest must name a metadata_field")
        for field in request.metadata_field:
            if field != SIGNATURE_DEF_FIELD:
                raise invalid_argument(
                    f"metadata_field {shown(field)} is not supported (only '{SIGNATURE_DEF_FIELD}')"
                )
        served, signature_defs = self.server.metadata(name, version)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = name
        response.model_spec.version.value = served
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature_def in signature_defs.items():
            signature_map.signature_def[key].CopyFrom(signature_def)
        response.metadata[SIGNATURE_DEF_FIELD].Pack(signature_map)
        return response


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """``GetModelStatus`` of a ``ModelServer``."""

    def __init__(self, server):
        self.server = server

    def GetModelStatus(self, request, context):  # noqa: N802
        return _answer(context, self.status, request)

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        _unimplemented(context, "HandleReloadConfigRequest")

    def status(self, request):
        """The ``GetModelStatusResponse`` to ``request``; raises ``ServingError``."""
        name, version = model_request(request.model_spec)
        response = get_model_status_pb2.GetModelStatusResponse()
        for number, state, message in self.server.status(name, version):
            status = response.model_version_status.add()
            status.version = number
            status.state = state
            status.status.SetInParent()  # TF Serving always sends a status, OK or not
            if message:
                status.status.error_code = error_codes_pb2.UNKNOWN
                status.status.error_message = message
        return response


def _alive(context):
    """``alive()`` of a gRPC call: false once it is cancelled or its deadline has passed."""

    def alive():
        if not context.is_active():
            return False
        remaining = context.time_remaining()
        return remaining is None or remaining > 0

    return alive


def _unimplemented(context, method):
    """UNIMPLEMENTED for an RPC of TF Serving's services that this server does not serve."""
    context.abort(
        grpc.StatusCode.UNIMPLEMENTED,
        f"{method} is not served: this server answers Predict, GetModelMetadata and GetModelStatus",
    )


def _answer(context, method, request):
    try:
        return method(request)
    except ServingError as e:
        error = e
    except Exception:  # noqa: BLE001 - a bug answers INTERNAL and the server stays up
        log.exception("internal error")
        error = ServingError(grpc.StatusCode.INTERNAL, "internal error; see the server log")
    context.abort(error.code, error.message)


def add_to_server(server, grpc_server):
    """Registers both services of ``server`` (a ``ModelServer``) on ``grpc_server``."""
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionServicer(server), grpc_server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(server), grpc_server)
