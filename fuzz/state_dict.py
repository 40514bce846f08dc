"""Fuzz target: a PyTorch state_dict file read as data (``torch_state_dict.parse_state_dict``:
the restricted unpickler, the opcode pre-scan, PyTorch's legacy and zip layouts).

The input: a state_dict file's bytes. The seed corpus is real files: the tiny ELMoForManyLangs
model's two pickles (PyTorch 0.4's legacy layout, as EFML wrote them) and two files PyTorch
2.13's own ``torch.save`` wrote in the zip layout (tests/fixtures/torch).

The contract: ``{name: array}`` of arrays, or a ``ForeignModelError`` of one line; never
another exception, and never more memory than ``MEMORY_FACTOR`` times the input's size (plus
what any file costs): a 10-byte pickle once cost 4 GB through the unpickler's memo, which the
reader's ``MemoryError`` handling would have hidden from a limit on the address space.
"""

import pathlib

import numpy as np

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign.torch_state_dict import parse_state_dict
from elmo_tf.testing.memory import check_bounded, peak_bytes

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEEDS = [
    ROOT / "tests/fixtures/efml/tiny/token_embedder.pkl",
    ROOT / "tests/fixtures/efml/tiny/encoder.pkl",
    ROOT / "tests/fixtures/torch/encoder_zip.pkl",
    ROOT / "tests/fixtures/torch/module_zip.pt",
]
# A file's copy, its storages, its tensors (which may view a storage up to 4 times: the
# reader's MAX_VIEW_FACTOR), bfloat16 widened to float32.
MEMORY_FACTOR = 16
DICTIONARY = [b"PK\x03\x04", b"ctorch\nFloatStorage\n", b"ctorch._utils\n_rebuild_tensor_v2\n",
              b"ccollections\nOrderedDict\n", b"X\x07\x00\x00\x00storage", b"r\xff\xff\xff\x0f",
              b"\x80\x02", b"data.pkl", b"byteorder", b"little"]  # fmt: skip


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    outcome, peak = peak_bytes(parse_state_dict, data, "state_dict")
    check_bounded(data, peak, MEMORY_FACTOR)
    if isinstance(outcome, ForeignModelError):
        message = str(outcome)
        assert message.startswith("state_dict: ") and "\n" not in message, repr(message)
        assert len(message) < 1000, len(message)
        return
    if isinstance(outcome, Exception):
        raise outcome
    assert all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in outcome.items())


def seed_corpus():
    return [path.read_bytes() for path in SEEDS]
