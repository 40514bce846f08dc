"""``ServingError``: a failed request, with its gRPC status code and its REST status.

An error message is one line, and every string a client sent that it quotes (a model,
signature, input or output name, a ``metadata_field``, a URL path) goes through
``elmo_tf.checks.shown``: at most ``SHOWN_CHARS`` characters of it, then ``...`` and its
length, with line breaks and other unprintable characters escaped. A message is also cut at
``MAX_MESSAGE_CHARS``: a gRPC status travels in HTTP/2 trailers, and one of 100 KB breaks the
stream.
"""

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc

from elmo_tf.checks import shown

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
MAX_MESSAGE_CHARS = 2000


class ServingError(Exception):
    """A request the server refuses or cannot answer.

    Args:
        code: the ``grpc.StatusCode`` the gRPC API returns.
        message: one line naming what was wrong (the input, model, version or signature).
        http_status: the REST status (default: ``HTTP_STATUS[code]``, else 500).
    """

    def __init__(self, code, message, http_status=None):
        message = " ".join(str(message).splitlines())
        if len(message) > MAX_MESSAGE_CHARS:  # a safety net: shown() bounds what clients send
            message = f"{message[:MAX_MESSAGE_CHARS]}..."
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status or HTTP_STATUS.get(code, 500)


def invalid_argument(message):
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message):
    return ServingError(grpc.StatusCode.NOT_FOUND, message)


def unavailable(message):
    return ServingError(grpc.StatusCode.UNAVAILABLE, message)


def resource_exhausted(message, http_status=None):
    return ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED, message, http_status)


def version_label_not_found(name, label):
    """NOT_FOUND (404) for a request naming a version label: this server has none (gRPC's
    ``version_label``, REST's ``/labels/LABEL``)."""
    return not_found(
        f"version label {shown(label)} of model {shown(name)} not found (this server has no "
        "version labels)"
    )
