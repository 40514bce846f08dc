"""Fuzz target: an ELMoForManyLangs dictionary, ``char.dic`` or ``word.dic``
(``efml_dictionaries.parse_dictionary``: ``token<TAB>id`` lines, split as EFML splits them),
bounded as a model folder bounds it (``MAX_ENTRIES``, what a table can hold).

The input: a dictionary's bytes. The seed corpus: the tiny ELMoForManyLangs model's two
dictionaries, as EFML wrote them.

The contract: ``{token: id}`` with one id per token and no id twice, or a
``ForeignModelError`` of one line naming the line; never another exception, nor more memory
than ``MEMORY_FACTOR`` times the input (a table costs far more per entry than its line: a
few hundred bytes for a line of four, which is why the folder bounds the lines first).
"""

import pathlib

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import efml_dictionaries
from elmo_tf.testing.memory import check_bounded, peak_bytes

ROOT = pathlib.Path(__file__).resolve().parents[1]
EFML = ROOT / "tests/fixtures/efml/tiny"
MAX_ENTRIES = 10_000
MEMORY_FACTOR = 200
DICTIONARY = [b"\t", b"\n", b"\r\n", "\u2028".encode(), b"\xc2\x85", b"<oov>", b"<pad>",
              "\u3000".encode(), b"\t0\n"]  # fmt: skip


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    outcome, peak = peak_bytes(efml_dictionaries.parse_dictionary, data, "char.dic", MAX_ENTRIES)
    check_bounded(data, peak, MEMORY_FACTOR)
    if isinstance(outcome, ForeignModelError):
        message = str(outcome)
        assert message.startswith("char.dic: ") and "\n" not in message, repr(message)
        assert len(message) < 1000, len(message)
        return
    if isinstance(outcome, Exception):
        raise outcome
    assert outcome and len(set(outcome.values())) == len(outcome) <= MAX_ENTRIES
    assert all(isinstance(t, str) and type(i) is int and i >= 0 for t, i in outcome.items())


def seed_corpus():
    return [(EFML / "char.dic").read_bytes(), (EFML / "word.dic").read_bytes()]
