"""Fuzz target: an NLPL repository archive (``model_kinds.parse_archive``: the directory's
names, sizes, ratios and compressed ranges, ``zip_archives.parse_archive``, then the model's
kind), then, where the directory passes, the extraction of what the model reads
(``model_kinds.unpack_archive``: each member's bytes counted as its stream consumes them).

The input: a zip archive's bytes. The seed corpus: the NLPL-style bilm-tf archive of the tests
(tests/fixtures/nlpl/tiny_bilm.zip) and the tiny ELMoForManyLangs model zipped as the
repository's release 11 zips it.

The contract: a ``Layout`` of a known kind and its members written, or a ``ForeignModelError``
of one line; never another exception, nothing written outside the destination, and never
more than ``MAX_RATIO`` times the input written plus ``RATIO_FLOOR`` a member (the bomb rule),
nor more memory than ``MEMORY_FACTOR`` times the input's size.
"""

import io
import os
import pathlib
import shutil
import tempfile
import zipfile

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import zip_archives
from elmo_tf.kinds import model_kinds
from elmo_tf.testing.memory import check_bounded, peak_bytes

ROOT = pathlib.Path(__file__).resolve().parents[1]
EFML = ROOT / "tests/fixtures/efml/tiny"
MEMORY_FACTOR = 8  # the input, zipfile's reads and a member's buffers
DICTIONARY = [b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06", b"options.json", b"model.hdf5",
              b"config.json", b"char.dic", b"encoder.pkl", b"../", b"configs/"]  # fmt: skip


def _check_message(error, source):
    message = str(error)
    assert message.startswith(source) and "\n" not in message, repr(message)
    assert len(message) < 1000, len(message)


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    outcome, peak = peak_bytes(model_kinds.parse_archive, data, "archive")
    check_bounded(data, peak, MEMORY_FACTOR)
    if isinstance(outcome, ForeignModelError):
        _check_message(outcome, "archive: ")
        return
    if isinstance(outcome, Exception):
        raise outcome
    assert outcome[1] in model_kinds.KINDS
    scratch = tempfile.mkdtemp(prefix="fuzz-archive-")
    try:
        archive = os.path.join(scratch, "model.zip")
        with open(archive, "wb") as f:
            f.write(data)
        destination = os.path.join(scratch, "model")
        try:
            model_kinds.unpack_archive(archive, destination)
        except ForeignModelError as e:
            _check_message(e, archive)
            assert not os.path.exists(destination)
        else:
            written = [os.path.join(d, n) for d, _, names in os.walk(destination) for n in names]
            total = sum(os.path.getsize(p) for p in written)
            bound = zip_archives.MAX_RATIO * len(data) + len(written) * zip_archives.RATIO_FLOOR
            assert total <= bound, (total, bound)
        assert sorted(os.listdir(scratch)) in (["model.zip"], ["model", "model.zip"])
    finally:
        shutil.rmtree(scratch)


def seed_corpus():
    efml = io.BytesIO()
    with zipfile.ZipFile(efml, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in ("config.json", "cnn_tiny.json", "char.dic", "word.dic",
                     "token_embedder.pkl", "encoder.pkl"):  # fmt: skip
            archive.write(EFML / name, f"144/{name}")
    return [(ROOT / "tests/fixtures/nlpl/tiny_bilm.zip").read_bytes(), efml.getvalue()]
