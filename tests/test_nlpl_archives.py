"""NLPL repository archives and names: hostile zip files refused in one line with nothing
written outside their directory (``elmo_tf.zip_archives``), the names and their addresses
(``elmo_tf.presets.nlpl``), simple_elmo's numbers on a bilm-tf-format archive, and the whole
path from a loopback mirror through the cache (``ELMO_TF_NLPL_BASE_URL``)."""

import io
import json
import os
import pathlib
import stat
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elmo_tf import zip_archives
from elmo_tf.errors import DownloadError, ForeignModelError
from elmo_tf.presets import nlpl

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
EFML = FIXTURES / "efml" / "tiny"
BILM_ZIP = FIXTURES / "nlpl" / "tiny_bilm.zip"
EFML_FILES = ("config.json", "char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl",
              "cnn_tiny.json")  # fmt: skip
TOLERANCE = 2e-5


def _zip(members, compression=zipfile.ZIP_DEFLATED):
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


def _efml_members(prefix=""):
    return [(prefix + name, (EFML / name).read_bytes()) for name in EFML_FILES]


def _bilm_members():
    with zipfile.ZipFile(BILM_ZIP) as archive:
        return [(name, archive.read(name)) for name in archive.namelist()]


def _write(tmp_path, data, name="model.zip"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ---------------------------------------------------------------- archives (unit)


def test_both_kinds_are_told_apart_and_extracted(tmp_path):
    bilm = zip_archives.extract(BILM_ZIP, tmp_path / "bilm")
    assert bilm.kind == zip_archives.BILM
    assert _tree(tmp_path / "bilm") == ["meta.json", "model.hdf5", "options.json", "vocab.txt"]
    efml = zip_archives.extract(_write(tmp_path, _zip(_efml_members("144/"))), tmp_path / "efml")
    assert efml.kind == zip_archives.EFML  # one top-level folder is tolerated
    assert _tree(tmp_path / "efml") == sorted(EFML_FILES)
    assert (tmp_path / "efml" / "encoder.pkl").read_bytes() == (EFML / "encoder.pkl").read_bytes()


def _symlink(name, target):
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target


def _with_size(data, name, size):
    """``data`` (a zip) with ``name``'s declared uncompressed size set to ``size`` in both its
    local header and the central directory."""
    data = bytearray(data)
    encoded = name.encode()
    for signature, offset, name_at in ((b"PK\x01\x02", 24, 46), (b"PK\x03\x04", 22, 30)):
        at = 0
        while (at := data.find(signature, at)) >= 0:
            if data[at + name_at : at + name_at + len(encoded)] == encoded:
                data[at + offset : at + offset + 4] = size.to_bytes(4, "little")
            at += 4
    return bytes(data)


HOSTILE = [
    ("dotdot", lambda: _zip([*_bilm_members(), ("../evil.txt", b"x")]), "leaves the folder"),
    ("absolute", lambda: _zip([*_bilm_members(), ("/tmp/evil.txt", b"x")]), "is absolute"),
    ("backslash", lambda: _zip([*_bilm_members(), ("..\\evil.txt", b"x")]), "a backslash"),
    ("symlink", lambda: _zip([*_bilm_members(), _symlink("vocab.txt.gz", b"/etc")]),
     "'vocab.txt.gz' is a symbolic link"),
    ("duplicate", lambda: _zip([*_bilm_members(), ("vocab.txt", b"again")]),
     "names the member 'vocab.txt' twice"),
    ("bomb", lambda: _zip([*_bilm_members()[:-1], ("vocab.txt", bytes(20 << 20))]),
     "'vocab.txt' expands 1,0"),
    ("nested by name", lambda: _zip([*_bilm_members(), ("weights.zip", b"PK")]),
     "'weights.zip' is an archive inside the archive"),
    ("missing", lambda: _zip([m for m in _bilm_members() if m[0] != "model.hdf5"]),
     "lacks model.hdf5 (a bilm-tf model archive holds options.json, model.hdf5)"),
    ("extra", lambda: _zip([*_bilm_members(), ("run.sh", b"rm -rf ~")]),
     "holds 'run.sh', which a bilm-tf model archive has no place for"),
    ("subfolder", lambda: _zip([*_bilm_members(), ("a/b/c.json", b"{}")]),
     "is in a folder of its own"),
    ("neither", lambda: _zip([("notes.txt", b"x")]), "holds neither a bilm-tf model"),
    ("not a zip", lambda: b"PK\x03\x04 and then nothing", "not a readable zip archive"),
]  # fmt: skip


@pytest.mark.parametrize("make, message", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_hostile_archive_is_refused_in_one_line_and_writes_nothing(tmp_path, make, message):
    archive = _write(tmp_path, make())
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(archive, tmp_path / "out")
    assert message in str(error.value) and str(error.value).startswith(str(archive))
    assert "\n" not in str(error.value)
    assert _tree(tmp_path) == ["model.zip"]  # nothing extracted, nothing outside


def test_a_declared_size_over_the_bound_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(zip_archives, "MAX_MEMBER_BYTES", 100_000)
    archive = _write(tmp_path, _zip(_bilm_members()))
    with pytest.raises(ForeignModelError, match="'model.hdf5' declares 450,896 bytes, more than"):
        zip_archives.inspect(archive)


@pytest.mark.parametrize("size", [61, 63, 0xFFFFFFF0])
def test_a_wrong_declared_size_is_refused_and_removes_what_was_written(tmp_path, size):
    data = _zip([*[m for m in _bilm_members() if m[0] != "vocab.txt"], ("vocab.txt", b"a" * 62)],
                compression=zipfile.ZIP_STORED)  # fmt: skip
    archive = _write(tmp_path, _with_size(data, "vocab.txt", size))
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(archive, tmp_path / "out")
    assert "vocab.txt" in str(error.value) or "damaged zip archive" in str(error.value)
    assert _tree(tmp_path) == ["model.zip"]


def test_an_archive_inside_by_its_bytes_is_refused_when_extracted(tmp_path):
    members = [m for m in _bilm_members() if m[0] != "vocab.txt"]
    archive = _write(tmp_path, _zip([*members, ("vocab.txt", _zip([("x", b"y")]))]))
    with pytest.raises(ForeignModelError, match="'vocab.txt' is an archive inside the archive"):
        zip_archives.extract(archive, tmp_path / "out")
    assert _tree(tmp_path) == ["model.zip"]


def test_extraction_never_follows_a_link_in_place_of_a_file(tmp_path):
    # The directory is made fresh: a link planted where it would go is refused by mkdir.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        zip_archives.extract(BILM_ZIP, tmp_path / "out")
    assert _tree(tmp_path / "elsewhere") == []


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz_the_archive_parser(data):
    original = bytearray(BILM_ZIP.read_bytes()[-2000:])  # the directory's end, damaged
    for _ in range(data.draw(st.integers(1, 6))):
        original[data.draw(st.integers(0, len(original) - 1))] = data.draw(st.integers(0, 255))
    try:
        layout = zip_archives.parse_archive(bytes(original))
    except ForeignModelError as e:
        assert "\n" not in str(e)
    else:
        assert layout.kind in (zip_archives.BILM, zip_archives.EFML)


# ---------------------------------------------------------------- names (unit)


def test_names_and_aliases_name_the_repository_address(monkeypatch):
    monkeypatch.delenv("ELMO_TF_NLPL_BASE_URL", raising=False)
    assert nlpl.lookup("efml-en") == nlpl.lookup("nlpl:144") == nlpl.lookup("nlpl:11/144")
    assert nlpl.lookup("efml-en").url() == "http://vectors.nlpl.eu/repository/11/144.zip"
    assert nlpl.lookup("norelmo30").url() == "http://vectors.nlpl.eu/repository/20/217.zip"
    assert nlpl.lookup("nlpl:20/219").url() == "http://vectors.nlpl.eu/repository/20/219.zip"
    assert nlpl.lookup("nlpl:219") is None  # its release is not known here
    assert len(nlpl.EFML) == 44 and sorted(nlpl.EFML) == list(range(136, 180))
    monkeypatch.setenv("ELMO_TF_NLPL_BASE_URL", "http://127.0.0.1:1/mirror/")
    assert nlpl.lookup("efml-zh-hant").url() == "http://127.0.0.1:1/mirror/11/179.zip"


def test_an_unknown_nlpl_name_says_how_to_name_any_entry():
    import elmo_tf

    with pytest.raises(elmo_tf.errors.PresetError) as error:
        elmo_tf.ELMo.from_preset("efml-grcc")
    assert "write nlpl:<release>/<id> for any entry" in str(error.value)
    assert "did you mean 'efml-grc'" in str(error.value)


# ---------------------------------------------------------------- the model (simple_elmo's)


def _simple_elmo():
    meta = json.loads((FIXTURES / "nlpl" / "golden_simple_elmo.json").read_text("utf-8"))
    return meta["sentences"], dict(np.load(FIXTURES / "nlpl" / "golden_simple_elmo.npz"))


def _layers(outputs, i, n):
    word = outputs["word_emb"][i, :n]
    return np.stack([np.concatenate([word, word], -1), outputs["lstm_outputs1"][i, :n],
                     outputs["lstm_outputs2"][i, :n]])  # fmt: skip


@pytest.mark.numerics
def test_the_bilm_tf_archive_gives_simple_elmos_numbers(tmp_path):
    import elmo_tf

    model = elmo_tf.ELMo.from_preset(str(BILM_ZIP))
    assert len(model.token_cache) == 9  # vocab.txt's tokens, as simple_elmo caches them
    sentences, golden = _simple_elmo()
    outputs = model.embed(sentences)
    for i, sentence in enumerate(sentences):
        n = len(sentence)
        np.testing.assert_allclose(_layers(outputs, i, n), golden[f"layers_{i}"], rtol=0,
                                   atol=TOLERANCE)  # fmt: skip
        np.testing.assert_allclose(outputs["elmo"][i, :n], golden[f"average_{i}"], rtol=0,
                                   atol=TOLERANCE)  # fmt: skip
        np.testing.assert_array_equal(elmo_tf.batch_to_ids([sentence])[0],
                                      golden[f"char_ids_{i}"][1:-1])  # fmt: skip
    # the extracted folder loads the same, and the temporary one is gone
    zip_archives.extract(BILM_ZIP, tmp_path / "folder")
    again = elmo_tf.ELMo.from_preset(str(tmp_path / "folder")).embed(sentences)
    np.testing.assert_array_equal(again["elmo"], outputs["elmo"])


# ---------------------------------------------------------------- from a mirror, through the cache


@pytest.fixture
def nlpl_mirror(monkeypatch, tmp_path):
    from model_mirror import ModelMirror

    files = {"/11/144.zip": _zip(_efml_members()), "/20/9999.zip": BILM_ZIP.read_bytes(),
             "/11/145.zip": _zip([*_efml_members(), ("../../evil.txt", b"x")])}  # fmt: skip
    with ModelMirror(files) as mirror:
        monkeypatch.setenv("ELMO_TF_NLPL_BASE_URL", mirror.base_url)
        monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path / "cache"))
        yield mirror


def _efml_golden():
    meta = json.loads((EFML / "golden.json").read_text(encoding="utf-8"))
    return meta["sentences"], dict(np.load(EFML / "golden.npz"))


@pytest.mark.slow
def test_an_nlpl_name_downloads_once_unpacks_and_gives_efmls_numbers(
    nlpl_mirror, monkeypatch, tmp_path, capsys
):
    import elmo_tf
    from elmo_tf.cli.main import main

    sentences, golden = _efml_golden()
    model = elmo_tf.ELMo.from_preset("efml-en")
    outputs = model.embed(sentences)
    for i, sentence in enumerate(sentences):
        np.testing.assert_allclose(outputs["elmo"][i, : len(sentence)], golden[f"average_{i}"],
                                   rtol=0, atol=TOLERANCE)  # fmt: skip
    assert nlpl_mirror.requests["/11/144.zip"] == 1
    elmo_tf.ELMo.from_preset("nlpl:144")  # the same entry: from the cache
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    elmo_tf.ELMo.from_preset("efml-en")
    assert nlpl_mirror.requests["/11/144.zip"] == 1

    assert main(["cache", "list"]) == 0
    listing = capsys.readouterr().out
    assert listing.count("efml-en\t") == 2 and "unpacked from the archive above" in listing
    assert main(["cache", "remove", "efml-en"]) == 0
    assert "removed: " in capsys.readouterr().out
    assert not [p for p in (tmp_path / "cache").rglob("*") if "144" in p.name]
    with pytest.raises(DownloadError, match="ELMO_TF_OFFLINE forbids downloading it: run "
                       "elmo-tf download efml-en"):  # fmt: skip
        elmo_tf.ELMo.from_preset("efml-en")


@pytest.mark.slow
def test_a_bilm_tf_entry_by_release_and_id(nlpl_mirror, capsys):
    import elmo_tf
    from elmo_tf.cli.main import main

    assert main(["download", "nlpl:20/9999"]) == 0
    assert "nlpl:20/9999\t394,877\t" in capsys.readouterr().out
    model = elmo_tf.ELMo.from_preset("nlpl:20/9999")
    sentences, golden = _simple_elmo()
    outputs = model.embed(sentences[:1])
    np.testing.assert_allclose(outputs["elmo"][0, :4], golden["average_0"], rtol=0,
                               atol=TOLERANCE)  # fmt: skip
    assert nlpl_mirror.requests["/20/9999.zip"] == 1


def test_a_hostile_archive_from_the_mirror_is_not_kept(nlpl_mirror, tmp_path):
    import elmo_tf

    with pytest.raises(ForeignModelError) as error:
        elmo_tf.ELMo.from_preset("efml-es")
    message = str(error.value)
    assert "'../../evil.txt' has a name that is absolute or leaves the folder" in message
    assert "(downloaded from http://127.0.0.1:" in message and "not kept)" in message
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == [".lock"]
    assert not list(tmp_path.rglob("evil.txt"))
    assert not os.path.exists(tmp_path.parent / "evil.txt")


@pytest.mark.slow
def test_convert_turns_a_bilm_tf_archive_into_a_model_directory(tmp_path):
    import elmo_tf
    from elmo_tf.cli.main import main

    out = tmp_path / "model"
    assert main(["convert", str(BILM_ZIP), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "vocab.txt", "weights.hdf5"]
    sentences, golden = _simple_elmo()
    outputs = elmo_tf.ELMo.from_preset(str(out)).embed(sentences[:2])
    np.testing.assert_allclose(outputs["elmo"][1, :5], golden["average_1"], rtol=0,
                               atol=TOLERANCE)  # fmt: skip
