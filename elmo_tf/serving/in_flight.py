"""What the REST server's connections hold at once, in bytes, across the server: request bodies
being received, answers being written. Used on the server's event loop only (no locks).

- ``ReceivedBodies``: bytes of request bodies received and not yet answered. A body takes room
  for each piece as it arrives, never for the length its headers declare, so headers alone
  hold nothing. A piece that does not fit waits until room is freed; the body that began
  first among those still being received always goes on, so bodies never wait on each other
  in a circle. The bodies held: at most ``capacity`` bytes plus that one body.
- ``WrittenAnswers``: bytes of answers being written to their clients (an answer's text, or
  the output arrays a long answer is encoded from as it is sent). An answer takes its room
  whole before it is written, or is refused when the others leave too little: their clients
  read slowly, and the server will not hold more for them. An answer larger than the whole
  budget is written only when no other is.
"""

import asyncio

from elmo_tf import checks

# Bytes of request bodies received at once (eight bodies at the default max_request_bytes).
BODIES_IN_FLIGHT_BYTES = 128 * 1024 * 1024
# Bytes of answers being written at once.
ANSWERS_IN_FLIGHT_BYTES = 1024 * 1024 * 1024


class ReceivedBodies:
    """The bytes of request bodies received and not yet answered, at most ``capacity`` (plus
    the first body still being received).

    >>> bodies = ReceivedBodies(100)
    >>> body = bodies.begin()
    >>> asyncio.run(body.take(60, timeout=1.0)); bodies.used
    60
    >>> body.release(); bodies.used
    0
    """

    def __init__(self, capacity=BODIES_IN_FLIGHT_BYTES):
        self.capacity = checks.positive_integer("capacity", capacity)
        self.used = 0
        self.receiving = []  # the bodies still being received, in the order they began
        self._freed = asyncio.Event()  # set (then replaced) whenever a body may now go on

    def begin(self):
        """A ``Body`` that has begun to arrive, last in line."""
        body = Body(self)
        self.receiving.append(body)
        return body

    def _may_take(self, body, size):
        return self.used + size <= self.capacity or self.receiving[0] is body

    def _changed(self):
        self._freed.set()
        self._freed = asyncio.Event()


class Body:
    """One request body's room in ``ReceivedBodies``."""

    def __init__(self, bodies):
        self.bodies = bodies
        self.size = 0
        self._open = True

    async def take(self, size, timeout):
        """Takes ``size`` more bytes once they fit; ``asyncio.TimeoutError`` when they did not
        within ``timeout`` seconds."""
        bodies = self.bodies
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not bodies._may_take(self, size):
            freed = bodies._freed
            await asyncio.wait_for(freed.wait(), max(0.0, deadline - loop.time()))
        bodies.used += size
        self.size += size

    def received(self):
        """The body arrived whole: it no longer stands in line (its bytes stay held)."""
        if self in self.bodies.receiving:
            self.bodies.receiving.remove(self)
            self.bodies._changed()

    def release(self):
        """The body is answered (or dropped): its bytes are free; twice frees once."""
        if self._open:
            self._open = False
            self.received()
            self.bodies.used -= self.size
            self.size = 0
            self.bodies._changed()


class WrittenAnswers:
    """The bytes of answers being written, at most ``capacity`` (or one answer alone).

    >>> answers = WrittenAnswers(100)
    >>> answers.take(60), answers.take(60), answers.used
    (True, False, 60)
    >>> answers.give_back(60); answers.take(500)
    True
    """

    def __init__(self, capacity=ANSWERS_IN_FLIGHT_BYTES):
        self.capacity = checks.positive_integer("capacity", capacity)
        self.used = 0
        self.answers = 0

    def take(self, size):
        """Whether an answer of ``size`` bytes may be written now (then it holds them)."""
        if self.answers and self.used + size > self.capacity:
            return False
        self.used += size
        self.answers += 1
        return True

    def give_back(self, size):
        """An answer of ``size`` bytes is written, or its connection closed."""
        self.used -= size
        self.answers -= 1
