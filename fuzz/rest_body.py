"""Fuzz target: the REST ``:predict`` body above aiohttp, as ``elmo-tf serve`` handles it: the
body decoded as its ``Content-Encoding`` says (``content_coding.BodyDecoder``, bounded by
``max_request_bytes`` as the server bounds it), then ``rest_protocol.RestProtocol.predict``
(the structure count, the JSON, the row or columnar form, each input's shape against the
signature and the server's default limits, its values), the request checked as the server
checks it before it runs (``SignatureSpec.validate``), and the answer encoded as the server
sends it (``tensors.json_pieces``).

The input: its first byte picks the ``Content-Encoding`` (none, ``identity``, ``gzip``,
``x-gzip``, ``deflate``, or one not taken) and, in its high bits, how the bytes arrive (whole or
in pieces); the rest is the body as sent.

The contract: an answer whose JSON text parses, or a ``ServingError`` of one line; nothing
else, and nothing decoded past the body limit.
"""

import gzip
import json
import zlib

from elmo_tf.system import extras

extras.require("serving", "fuzz/rest_body.py")

import numpy as np

from elmo_tf.serving import rest_protocol
from elmo_tf.serving.content_coding import BodyDecoder
from elmo_tf.serving.errors import ServingError, not_found, resource_exhausted
from elmo_tf.serving.request_limits import RequestLimits
from elmo_tf.serving.tensors import json_pieces
from elmo_tf.testing.signatures import export_signatures

CODINGS = (None, "identity", "gzip", "x-gzip", "deflate", "br")
MAX_REQUEST_BYTES = 1 << 20  # the fuzzer's bodies are small; the server's default is 16 MiB
PIECES = (1 << 30, 1, 7, 100)  # how the bytes arrive: whole, or in pieces of this many
# the body's keys and JSON's tokens
DICTIONARY = [
    b'"instances"', b'"inputs"', b'"signature_name"', b'"b64"', b'"sentences"', b'"tokens"',
    b'"sequence_len"', b'"char_ids"', b'"default"', b'"serving_default"', b"true", b"null",
    b"1e400", b"-0", b"\\ud800", b"[[", b"]]", b"{}", b"[]", b'":',
]  # fmt: skip


class _StandInServer:
    """What ``RestProtocol.predict`` asks of a ``ModelServer``: its limits, and ``predict``,
    which looks up the signature, reads the inputs and checks them as the server does, then
    answers outputs of the model's shapes (zeros) instead of running it."""

    limits = RequestLimits()

    def __init__(self):
        self.specs = export_signatures()

    def predict(self, name, version, signature, read_inputs, output_filter, alive=None):
        spec = self.specs.get("default" if signature == "serving_default" else signature)
        if spec is None:
            raise not_found(f"signature {signature!r:.40} not found")
        inputs = read_inputs(spec)
        batch = spec.validate(inputs, self.limits)
        time = max((v.shape[1] for v in inputs.values() if v.ndim > 1), default=3)
        return 1, {
            "elmo": np.zeros((batch, time, 4), np.float32),
            "default": np.zeros((batch, 4), np.float32),
            "sequence_len": np.zeros(batch, np.int32),
        }


PROTOCOL = rest_protocol.RestProtocol(_StandInServer(), None, None, parse_timeout=1.0)
ROUTE = rest_protocol.Route("predict", "elmo", None)


def _decode(coding, data, piece):
    """The body ``data`` decodes to, fed in pieces of ``piece`` bytes, refused past
    ``MAX_REQUEST_BYTES`` as the REST server refuses it (413)."""
    decoder = BodyDecoder(coding)
    body = bytearray()
    for start in range(0, len(data), piece):
        for decoded in decoder.decode(data[start : start + piece]):
            if len(body) + len(decoded) > MAX_REQUEST_BYTES:
                raise resource_exhausted("over max_request_bytes", http_status=413)
            body += decoded
    decoder.finish()
    return bytes(body)


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    if not data:
        return
    coding = CODINGS[(data[0] & 0x0F) % len(CODINGS)]
    piece = PIECES[(data[0] >> 4) % len(PIECES)]
    try:
        body = _decode(coding, data[1:], piece)
        answer = PROTOCOL.answer(ROUTE, body)
    except ServingError as e:
        assert "\n" not in e.message and 400 <= e.http_status < 600, (e.http_status, e.message)
        return
    json.loads("".join(json_pieces(answer)))


def seed_corpus():
    """Bodies of each signature in the row and the columnar form, strings as text and as
    ``{"b64": ...}``, sent plain, gzip and deflate."""
    ids = [[[259, 85, 105, 102, 260] + [261] * 45] * 2]
    bodies = [
        {"instances": ["The bank closed .", "Hi"]},
        {"signature_name": "default", "inputs": [{"b64": "SGk="}]},
        {"signature_name": "tokens", "inputs": {"tokens": [["a", "b"]], "sequence_len": [2]}},
        {"signature_name": "tokens", "instances": [{"tokens": ["a", ""], "sequence_len": 1}]},
        {"signature_name": "char_ids", "instances": ids},
    ]
    seeds = []
    for body in bodies:
        text = json.dumps(body).encode()
        seeds += [
            bytes([CODINGS.index(None)]) + text,
            bytes([CODINGS.index("gzip") | 0x10]) + gzip.compress(text),
            bytes([CODINGS.index("deflate") | 0x20]) + zlib.compress(text),
        ]
    return seeds
