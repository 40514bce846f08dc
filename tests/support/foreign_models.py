"""Other libraries' models as the suite loads them: the tiny ELMoForManyLangs model saved by
EFML 0.0.4.post2 with its own code's outputs (tests/fixtures/efml/tiny), the bilm-tf-format
NLPL archive with simple_elmo's (tests/fixtures/nlpl), and zip archives made of their files."""

import io
import json
import warnings
import zipfile

import numpy as np

from support.paths import FIXTURES

EFML_TINY = FIXTURES / "efml" / "tiny"
NLPL_BILM_ZIP = FIXTURES / "nlpl" / "tiny_bilm.zip"
EFML_FILES = ("config.json", "char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl",
              "cnn_tiny.json")  # fmt: skip
TOLERANCE = 2e-5  # the bound against the other library's own numbers


def efml_golden():
    """``(sentences, arrays)``: EFML's outputs on the tiny model (``layers_<i>``,
    ``average_<i>``, ``char_ids_<i>``, ``word_ids_<i>`` per sentence)."""
    meta = json.loads((EFML_TINY / "golden.json").read_text(encoding="utf-8"))
    return meta["sentences"], dict(np.load(EFML_TINY / "golden.npz"))


def simple_elmo_golden():
    """``(sentences, arrays)``: simple_elmo's outputs on the bilm-tf NLPL archive."""
    meta = json.loads((FIXTURES / "nlpl" / "golden_simple_elmo.json").read_text("utf-8"))
    return meta["sentences"], dict(np.load(FIXTURES / "nlpl" / "golden_simple_elmo.npz"))


def stacked_layers(outputs, i, n):
    """Sentence ``i``'s ``(3, n, 2P)`` layers as EFML and simple_elmo give them: the word
    layer doubled, then the LSTM layers."""
    word = outputs["word_emb"][i, :n]
    return np.stack([np.concatenate([word, word], -1), outputs["lstm_outputs1"][i, :n],
                     outputs["lstm_outputs2"][i, :n]])  # fmt: skip


def zip_bytes(members, compression=zipfile.ZIP_DEFLATED):
    """Zip bytes of ``[(ZipInfo or name, bytes)]``, written as given."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate it writes
        for info, data in members:
            if isinstance(info, str):
                info = zipfile.ZipInfo(info, date_time=(2024, 1, 1, 0, 0, 0))
                info.compress_type = compression
            archive.writestr(info, data)
    return out.getvalue()


def efml_members(prefix=""):
    """The tiny EFML model's files as zip members, under ``prefix``."""
    return [(prefix + name, (EFML_TINY / name).read_bytes()) for name in EFML_FILES]


def bilm_members():
    """The bilm-tf NLPL archive's members."""
    with zipfile.ZipFile(NLPL_BILM_ZIP) as archive:
        return [(name, archive.read(name)) for name in archive.namelist()]
