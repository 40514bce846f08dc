"""``RequestLimits``: how much work one request may ask for, checked before anything is allocated.

A ``TensorProto`` of a hundred bytes can *declare* a shape of ``[1, 10**7]`` or ``[2**40]`` and
hold one value, which ``tf.make_ndarray`` would repeat to fill it; a JSON body can nest a list
a thousand deep. So every request's declared shapes are checked against these limits (and
against the signature's ranks and fixed dimensions) before its values are read, and the
``sentences`` of the ``default`` signature are split here, with the model's own whitespace
(``elmo_tf.tokens.characters.split_tokens``), to count their tokens.

A request over a limit fails with RESOURCE_EXHAUSTED (REST 413) and a message naming the limit
and the server option that raises it (``max_request_rows``: ``elmo-tf serve
--max-request-rows``); it would fail again if retried, so it is not a "retry later" (HTTP 429)
answer.

Limits across requests: ``BodyBudget`` bounds the bytes of request bodies that are parsed at
once (a JSON body parses into Python objects many times its size).
"""

import collections
import dataclasses
import math
import threading

from elmo_tf import checks

DEFAULT_MAX_REQUEST_ROWS = 2048
DEFAULT_MAX_TOKENS_PER_ROW = 1024
DEFAULT_MAX_REQUEST_TOKENS = 65536
DEFAULT_MAX_TOKEN_BYTES = 1024


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """Per-request limits of the server (the ``ServerOptions`` of the same names).

    Args:
        max_request_rows: rows (sentences) in one request.
        max_tokens_per_row: tokens in one row: the second dimension of ``tokens`` and
            ``char_ids``, the whitespace-separated tokens of one ``sentences`` string.
        max_request_tokens: rows times the longest row, the padded tokens the model computes.
        max_token_bytes: UTF-8 bytes in one token; the model reads the first 48 bytes of a
            token, so longer ones are legal but not useful.
    """

    max_request_rows: int = DEFAULT_MAX_REQUEST_ROWS
    max_tokens_per_row: int = DEFAULT_MAX_TOKENS_PER_ROW
    max_request_tokens: int = DEFAULT_MAX_REQUEST_TOKENS
    max_token_bytes: int = DEFAULT_MAX_TOKEN_BYTES

    def __post_init__(self):
        for field in dataclasses.fields(self):
            checks.positive_integer(field.name, getattr(self, field.name))

    def check_shape(self, alias, shape, spec_shape):
        """Checks the declared ``shape`` of input ``alias`` (a list of ints) before its values
        are read: rank and fixed dimensions as ``spec_shape`` declares (INVALID_ARGUMENT), then
        rows, tokens per row and tokens (RESOURCE_EXHAUSTED).
        """
        from elmo_tf.serving.errors import invalid_argument  # lazy: the [serving] extra

        if any(size < 0 for size in shape):
            raise invalid_argument(f"input '{alias}' has a negative dimension in shape {shape}")
        if spec_shape is not None:
            if len(shape) != len(spec_shape):
                raise invalid_argument(
                    f"input '{alias}' must have rank {len(spec_shape)}, got shape {shape}"
                )
            for axis, (got, want) in enumerate(zip(shape, spec_shape)):
                if want is not None and got != want:
                    raise invalid_argument(
                        f"input '{alias}' must have size {want} in dimension {axis}, "
                        f"got shape {shape}"
                    )
        if not shape:
            return
        self.check("max_request_rows", shape[0], f"input '{alias}' has {shape[0]} rows")
        if len(shape) >= 2:
            self.check(
                "max_tokens_per_row", shape[1], f"input '{alias}' has {shape[1]} tokens per row"
            )
            rows_x_tokens = f"input '{alias}' has {shape[0]} rows x {shape[1]} tokens"
            self.check("max_request_tokens", shape[0] * shape[1], rows_x_tokens)
        # Any further dimension is fixed by the signature (50 characters); this bounds the rest.
        elements = math.prod(shape)
        most = self.max_request_tokens * max(1, math.prod(shape[2:]))
        if elements > most:
            raise _over(f"input '{alias}' declares {elements} values", "max_request_tokens", self)

    def check(self, name, value, what):
        """RESOURCE_EXHAUSTED naming limit ``name`` when ``value`` is over it."""
        if value > getattr(self, name):
            raise _over(what, name, self)

    def check_token_lists(self, alias, token_counts, token_bytes):
        """Checks the rows of a string input split into tokens: ``token_counts`` per row and the
        byte length of its longest token ``token_bytes``."""
        longest = max(token_counts, default=0)  # pragma: no mutate, equivalent: limits are >= 1
        self.check("max_tokens_per_row", longest, f"input '{alias}' has a row of {longest} tokens")
        self.check(
            "max_request_tokens",
            longest * len(token_counts),
            f"input '{alias}' pads to {len(token_counts)} rows x {longest} tokens",
        )
        what = f"input '{alias}' has a {token_bytes}-byte token"
        self.check("max_token_bytes", token_bytes, what)


def _over(what, name, limits):
    from elmo_tf.serving.errors import resource_exhausted  # lazy: the [serving] extra

    return resource_exhausted(
        f"{what}, over the limit of {getattr(limits, name)} ({name}); send a smaller request",
        http_status=413,
    )


class BodyBudget:
    """How many bytes of request bodies are parsed at once, across requests.

    A request reserves the size of its body before parsing it and releases it once its inputs
    are read into arrays; it waits meanwhile until there is room, in turn (first come, first
    served, so a large body is not passed over forever by small ones). A body larger than
    ``capacity`` reserves all of it: it waits for the others, then parses alone.

    >>> budget = BodyBudget(100)
    >>> with budget.reserve(60):
    ...     budget.used
    60

    Args:
        capacity: bytes of bodies parsed at once.
    """

    def __init__(self, capacity):
        checks.positive_integer("capacity", capacity)
        self.capacity = capacity
        self.used = 0
        self._queue = collections.deque()  # the reservations waiting, in order of arrival
        self._room = threading.Condition()

    @property
    def waiting(self):
        """How many reservations wait for room."""
        with self._room:
            return len(self._queue)

    def reserve(self, size, timeout=None):
        """A ``Reservation`` of ``size`` bytes (at most ``capacity``) once there is room, or
        ``None`` if there was none within ``timeout`` seconds."""
        reservation = Reservation(self, min(size, self.capacity))
        with self._room:
            self._queue.append(reservation)
            try:
                admitted = self._room.wait_for(
                    lambda: (
                        self._queue[0] is reservation
                        and self.used + reservation.size <= self.capacity
                    ),
                    timeout,
                )
            finally:
                self._queue.remove(reservation)
                self._room.notify_all()  # the next in line may fit now
            if not admitted:
                return None
            self.used += reservation.size
        return reservation

    def _release(self, size):
        with self._room:
            self.used -= size
            self._room.notify_all()


class Reservation:
    """Bytes held in a ``BodyBudget`` until ``release()`` (or the end of a ``with`` block);
    releasing twice releases once (``release()`` is true the first time only)."""

    def __init__(self, budget, size):
        self.budget = budget
        self.size = size
        self._held = True

    def release(self):
        if not self._held:
            return False
        self._held = False  # pragma: no mutate, equivalent: None is as falsy as False
        self.budget._release(self.size)
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
