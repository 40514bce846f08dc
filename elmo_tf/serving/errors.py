"""``ServingError``: a failed request, with its gRPC status code and its REST status."""

from elmo_tf import extras

extras.require("serving", __name__)

import grpc

# REST status of each gRPC code, as TF Serving's HTTP front end maps them.
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


class ServingError(Exception):
    """A request the server refuses or cannot answer.

    Args:
        code: the ``grpc.StatusCode`` the gRPC API returns.
        message: one line naming what was wrong (the input, model, version or signature).
        http_status: the REST status (default: ``HTTP_STATUS[code]``, else 500).
    """

    def __init__(self, code, message, http_status=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status or HTTP_STATUS.get(code, 500)


def invalid_argument(message):
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message):
    return ServingError(grpc.StatusCode.NOT_FOUND, message)


def resource_exhausted(message, http_status=None):
    return ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED, message, http_status)
