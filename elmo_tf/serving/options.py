"""What a model server is configured with: ``ServerOptions`` and ``BatchingOptions``.

Every option is checked here, when the options are made, so a program that starts a
``ModelServer`` gets the same checks as ``elmo-tf serve``; an error names the option
(``max_request_rows``; its ``elmo-tf serve`` flag is the same name with dashes,
``--max-request-rows``). This module imports nothing heavy: the command line reads its defaults
before it knows whether the ``[serving]`` extra is installed.
"""

import dataclasses
import math
import os
import re

from elmo_tf import checks
from elmo_tf.errors import ElmoError
from elmo_tf.serving.request_limits import (
    DEFAULT_MAX_REQUEST_ROWS,
    DEFAULT_MAX_REQUEST_TOKENS,
    DEFAULT_MAX_TOKEN_BYTES,
    DEFAULT_MAX_TOKENS_PER_ROW,
    RequestLimits,
)
from elmo_tf.tokens.text_lines import read_text_lines

DEFAULT_PORT = 8500  # TF Serving's gRPC port
DEFAULT_REST_PORT = None  # no REST API unless asked for, as in TF Serving (8501 by convention)
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
DEFAULT_POLL_SECONDS = 2.0
DEFAULT_GRPC_MAX_THREADS = 32
DEFAULT_REST_TIMEOUT_SECONDS = 30.0
# Threads are cheap until thousands of them start at once (each batch thread starts about four
# more): bounded as the request sizes are.
MAX_BATCH_THREADS = 64
MAX_GRPC_THREADS = 1024
# gRPC's message size limits are int32 channel arguments: a larger value fails in grpc itself.
MAX_REQUEST_BYTES = 2**31 - 1
# Polling more often than this would keep a core busy listing the base path (0: never polls).
MIN_POLL_SECONDS = 0.1
# The longest wait any option or flag of the server or client may name (a day): longer ones
# are typos, and threading's waits overflow past about 10**11 s.
MAX_WAIT_SECONDS = 24 * 3600.0


def option(default, help, type=int, aliases=(), metavar=None):  # noqa: A002 - argparse's names
    """A dataclass field that is also an ``elmo-tf serve`` flag (``--name-with-dashes``, and
    TF Serving's spelling among ``aliases``): ``help`` says what it is, the default is added."""
    metadata = {"help": help, "type": type, "aliases": aliases, "metavar": metavar}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


class OptionError(ElmoError, ValueError):
    """A server or batching option out of its range; the message names the option."""


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """TF Serving's batching parameters (``batching_parameters.txt``) that this server uses."""

    max_batch_size: int = option(32, "most rows in a batch", metavar="N")
    batch_timeout_micros: int = option(2000, "longest wait for a batch to fill", metavar="N")
    max_enqueued_batches: int = option(100, "full batches queued before refusing", metavar="N")
    num_batch_threads: int = option(2, "batches run at once, per signature", metavar="N")

    def __post_init__(self):
        for field in dataclasses.fields(self):
            minimum = 0 if field.name == "batch_timeout_micros" else 1
            maximum = {
                "num_batch_threads": MAX_BATCH_THREADS,
                "batch_timeout_micros": int(MAX_WAIT_SECONDS * 1_000_000),
            }.get(field.name)
            _check_int(field.name, getattr(self, field.name), minimum, maximum)

    @property
    def max_queued_rows(self):
        """The most rows the queue holds: ``max_enqueued_batches`` full batches."""
        return self.max_enqueued_batches * self.max_batch_size


# The fields of TF Serving's BatchingParameters (tensorflow_serving/servables/tensorflow/
# session_bundle_config.proto). This server uses the four of BatchingOptions; the others are
# read, checked for their form and ignored; any other name is refused, as TF Serving refuses it.
_OTHER_BATCHING_FIELDS = (
    "thread_pool_name",
    "allowed_batch_sizes",
    "pad_variable_length_inputs",
    "enable_large_batch_splitting",
    "max_execution_batch_size",
    "batch_padding_policy",
    "mixed_priority_batching_policy",
    "low_priority_max_batch_size",
    "low_priority_batch_timeout_micros",
    "low_priority_max_enqueued_batches",
    "low_priority_allowed_batch_sizes",
    "enable_priority_queue",
)
_REPEATED_BATCHING_FIELDS = ("allowed_batch_sizes", "low_priority_allowed_batch_sizes")
# One field of the text proto: `name { value: V }` (a wrapper such as Int64Value) or `name: V`.
_FIELD = re.compile(
    r"\s*(?P<name>[A-Za-z_]\w*)\s*"
    r"(?:\{\s*value\s*:\s*(?P<wrapped>[^\s{}]+|\"[^\"\n]*\")\s*\}"
    r"|:\s*(?P<plain>[^\s{}]+|\"[^\"\n]*\"))"
)
_INT64 = re.compile(r"[+-]?\d{1,19}")


def read_batching_parameters(path):
    """The fields this server uses from TF Serving's ``batching_parameters.txt`` (a text proto
    of ``BatchingParameters``), as keyword arguments of ``BatchingOptions``.

    The file is read as strictly as TF Serving reads it: a line that is not a field, a name
    ``BatchingParameters`` does not have (a misspelt one names the field it is close to), a
    field given twice or a value that is not an integer raises ``OptionError`` naming the line.
    The fields this server does not use (``pad_variable_length_inputs``, ...) are ignored.
    """
    text = "\n".join(read_text_lines(path, what="batching parameters"))
    used = [field.name for field in dataclasses.fields(BatchingOptions)]
    known = used + list(_OTHER_BATCHING_FIELDS)
    values, seen = {}, set()
    for number, line in enumerate(text.split("\n"), 1):
        line = line.split("#", 1)[0]
        position = 0
        while line[position:].strip():
            match = _FIELD.match(line, position)
            if match is None:
                raise OptionError(
                    f"{path}: line {number}: expected a field such as "
                    f"'max_batch_size {{ value: 32 }}', got {line.strip()[:60]!r}"
                )
            position = match.end()
            name = match["name"]
            value = match["wrapped"] if match["wrapped"] is not None else match["plain"]
            if name not in known:
                hint = checks.did_you_mean(name, known)
                raise OptionError(
                    f"{path}: line {number}: '{name[:60]}' is not a field of TF Serving's "
                    f"BatchingParameters{hint}"
                )
            if name in seen and name not in _REPEATED_BATCHING_FIELDS:
                raise OptionError(f"{path}: line {number}: '{name}' is given twice")
            seen.add(name)
            if name in used:
                if not _INT64.fullmatch(value):
                    raise OptionError(
                        f"{path}: line {number}: '{name}' must be an integer, got {value[:60]!r}"
                    )
                values[name] = int(value)
    try:
        BatchingOptions(**values)  # each value in its range, named with the file
    except OptionError as e:
        raise OptionError(f"{path}: {e}") from None
    return values


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """How ``ModelServer`` serves (TF Serving's flag names in brackets).

    Args:
        model_base_path: directory of version directories ``N/`` (``--model_base_path``);
            it must exist.
        model_name: the name clients ask for (``--model_name``).
        host: address to bind; ``127.0.0.1`` keeps the server local.
        port: gRPC port, 0 for any free one (``--port``).
        rest_port: REST port, 0 for any free one, ``None`` (default) for no REST API
            (``--rest_api_port``).
        batching: ``BatchingOptions``, or ``None`` to run each request on its own
            (``--enable_batching``, ``--batching_parameters_file``).
        max_request_bytes: the largest request accepted, gRPC message or REST body.
        poll_seconds: how often to look for a new version, 0 for never
            (``--file_system_poll_wait_seconds``).
        grpc_max_threads: gRPC worker threads, the most requests in flight at once
            (``--grpc_max_threads``).
        max_request_rows, max_tokens_per_row, max_request_tokens, max_token_bytes: the
            per-request limits (``RequestLimits``), checked on the declared shapes before
            anything is allocated.
        rest_timeout_seconds: how long a REST connection may stay idle or take to send a
            request before it is closed.
    """

    model_base_path: str = option(
        dataclasses.MISSING,
        "directory of version directories N/ (elmo-tf export saved-model's OUTDIR)",
        type=str,
        aliases=("--model_base_path",),
        metavar="DIR",
    )
    model_name: str = option(
        "elmo", "the name clients ask for", type=str, aliases=("--model_name",)
    )
    host: str = option("127.0.0.1", "address to listen on (127.0.0.1: local only)", type=str)
    port: int = option(DEFAULT_PORT, "gRPC port, 0: any")
    rest_port: int | None = option(
        DEFAULT_REST_PORT,
        "REST port, 0: any (default: no REST API)",
        aliases=("--rest-api-port", "--rest_api_port"),
        metavar="PORT",
    )
    batching: BatchingOptions | None = dataclasses.field(default_factory=BatchingOptions)
    max_request_bytes: int = option(
        DEFAULT_MAX_REQUEST_BYTES, "largest request accepted, gRPC or REST", metavar="N"
    )
    poll_seconds: float = option(
        DEFAULT_POLL_SECONDS,
        f"how often to look for a new version, 0: never, else at least {MIN_POLL_SECONDS:g}",
        type=float,
        aliases=("--file-system-poll-wait-seconds", "--file_system_poll_wait_seconds"),
        metavar="S",
    )
    grpc_max_threads: int = option(
        DEFAULT_GRPC_MAX_THREADS,
        "gRPC requests in flight at once",
        aliases=("--grpc_max_threads",),
        metavar="N",
    )
    max_request_rows: int = option(
        DEFAULT_MAX_REQUEST_ROWS, "rows (sentences) in one request", metavar="N"
    )
    max_tokens_per_row: int = option(DEFAULT_MAX_TOKENS_PER_ROW, "tokens in one row", metavar="N")
    max_request_tokens: int = option(
        DEFAULT_MAX_REQUEST_TOKENS, "rows x longest row, one request", metavar="N"
    )
    max_token_bytes: int = option(DEFAULT_MAX_TOKEN_BYTES, "UTF-8 bytes in one token", metavar="N")
    rest_timeout_seconds: float = option(
        DEFAULT_REST_TIMEOUT_SECONDS,
        "close a REST connection idle or sending a request for this long",
        type=float,
        metavar="S",
    )

    def __post_init__(self):
        if not os.path.isdir(self.model_base_path):
            raise OptionError(f"model_base_path {self.model_base_path} is not a directory")
        if not isinstance(self.model_name, str) or not self.model_name:
            raise OptionError(f"model_name must be a non-empty string, got {self.model_name!r}")
        _check_int("port", self.port, 0, 65535)
        if self.rest_port is not None:
            _check_int("rest_port", self.rest_port, 0, 65535)
        if self.batching is not None and not isinstance(self.batching, BatchingOptions):
            raise OptionError("batching must be BatchingOptions or None")
        _check_int("max_request_bytes", self.max_request_bytes, 1, MAX_REQUEST_BYTES)
        _check_int("grpc_max_threads", self.grpc_max_threads, 1, MAX_GRPC_THREADS)
        if not (checks.is_number(self.poll_seconds) and self.poll_seconds == 0):
            check_seconds("poll_seconds", self.poll_seconds, MIN_POLL_SECONDS, "0 (never) or ")
        check_seconds("rest_timeout_seconds", self.rest_timeout_seconds)
        try:
            self.limits()
        except ValueError as e:
            raise OptionError(str(e)) from None

    def limits(self):
        """The ``RequestLimits`` of these options."""
        return RequestLimits(
            max_request_rows=self.max_request_rows,
            max_tokens_per_row=self.max_tokens_per_row,
            max_request_tokens=self.max_request_tokens,
            max_token_bytes=self.max_token_bytes,
        )


def _check_int(name, value, minimum, maximum=None):
    checks.integer(name, value, minimum, maximum, error=OptionError)


def check_seconds(name, value, minimum=None, alternative="", error=OptionError):
    """``value`` if it is a number of seconds above 0 (at least ``minimum`` if given) and at
    most ``MAX_WAIT_SECONDS``; else ``error`` naming ``name`` (``None``: a message starting
    "must be", for argparse), and ``alternative``, another value that is allowed, as in
    ``"0 (never) or "``."""
    if checks.is_number(value) and math.isfinite(value):
        if value <= MAX_WAIT_SECONDS and (value >= minimum if minimum else value > 0):
            return value
    least = f"from {minimum:g}" if minimum else "above 0 and"
    rule = f"must be {alternative}a number of seconds {least} up to {MAX_WAIT_SECONDS:g}"
    raise error(f"{name + ' ' if name else ''}{rule}, got {checks.shown(value)}")
