"""Request bodies sent with a ``Content-Encoding``: decoded as they arrive, refused by name.

The REST API takes a body as is (``identity``, or no header), compressed with ``gzip`` (also
spelt ``x-gzip``; several members in a row, as ``cat a.gz b.gz`` makes) or with ``deflate``
(zlib's format, RFC 9110). A ``BodyDecoder`` turns the bytes received into the body's bytes a
bounded piece at a time (``PIECE_BYTES``), so the REST server counts, and refuses past its
limit, what a body decodes to, never more than a piece beyond it: a small gzip body can decode
to gigabytes.

- any other coding (``br``, ``zstd``, a name of no coding, two codings): 415 naming the ones
  taken;
- bytes that are not what the coding says (plain JSON sent as gzip), or a compressed stream
  cut short: 400 naming the coding.

Why not aiohttp's own decoding (``auto_decompress``): it answers a coding it has no library
for by telling the client to install one (``Please install Brotli``), a body that does not
decode by an internal error, and an unknown coding by taking the bytes as they are. Python's
``zlib`` does the decoding here.
"""

import zlib

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc

from elmo_tf.checks import shown
from elmo_tf.serving.errors import ServingError, invalid_argument

# The most bytes one call to the decompressor makes: what a body may grow by between checks.
PIECE_BYTES = 64 * 1024
# Content-Encoding names and the zlib window bits that read them.
CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
TAKEN = "gzip or deflate (or none)"


class BodyDecoder:
    """The decoder of a body sent with ``Content-Encoding: header`` (``None``: no header).

    ``decode(data)`` yields the body's bytes that ``data`` holds, at most ``PIECE_BYTES`` at a
    time; ``finish()`` says whether the coded stream ended where the body did (400 if not).
    Raises ``ServingError`` 415 for a coding not taken.
    """

    def __init__(self, header):
        codings = [c.strip().lower() for c in (header or "").split(",")]
        codings = [c for c in codings if c not in ("", "identity")]
        if len(codings) > 1 or (codings and codings[0] not in CODINGS):
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Content-Encoding {shown(header)} is not supported: send the body as {TAKEN}",
                http_status=415,
            )
        self.coding = codings[0] if codings else None
        self._zlib = self._new() if self.coding else None

    def _new(self):
        return zlib.decompressobj(CODINGS[self.coding])

    def decode(self, data):
        """Yields the decoded bytes of ``data`` (the next bytes received), piece by piece."""
        if self._zlib is None:
            if data:
                yield data
            return
        while True:
            try:
                piece = self._zlib.decompress(data, PIECE_BYTES)
            except zlib.error as e:
                raise self._not_coded(e) from None
            if piece:
                yield piece
            data = self._zlib.unconsumed_tail
            if self._zlib.eof:
                data = self._zlib.unused_data + data
                if not data:
                    return
                if self.coding == "deflate":
                    raise self._not_coded("bytes after the end of the compressed data")
                self._zlib = self._new()  # the next gzip member
            elif not data and len(piece) < PIECE_BYTES:
                return  # a full piece may leave output inside zlib: asked for again

    def finish(self):
        """Raises 400 if the compressed stream stopped before its end."""
        if self._zlib is not None and not self._zlib.eof:
            raise self._not_coded("the compressed data ends before its end marker")

    def _not_coded(self, reason):
        return invalid_argument(
            f"the body is not {self.coding} data as its Content-Encoding says ({reason})"
        )
