"""NLPL repository archives and names, read without a model: hostile zip files refused in one
line with nothing written outside their directory (``elmo_tf.foreign.zip_archives``), and the names
and their addresses (``elmo_tf.presets.nlpl``). The numbers are tests/model/test_nlpl_models.py's,
the mirror path tests/integration/test_nlpl_downloads.py's."""

import io
import stat
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.foreign_models import (
    EFML_FILES,
    EFML_TINY,
    NLPL_BILM_ZIP,
    bilm_members,
    efml_members,
    zip_bytes,
)

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import zip_archives
from elmo_tf.kinds import model_kinds
from elmo_tf.presets import nlpl


def _write(tmp_path, data, name="model.zip"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_both_kinds_are_told_apart_and_only_what_the_model_reads_is_extracted(tmp_path):
    assert model_kinds.unpack_archive(NLPL_BILM_ZIP, tmp_path / "bilm") is model_kinds.BILM
    members, _ = model_kinds.check_archive(NLPL_BILM_ZIP)
    assert "meta.json" in members  # the catalogue's record: allowed, never read
    assert _tree(tmp_path / "bilm") == ["model.hdf5", "options.json", "vocab.txt"]
    others = [("other_config.json", b"{}"), ("configs/old.json", b"{}"), ("README", b"x"),
              ("classifier.pkl", b"softmax"), ("meta.json", b"{}")]  # fmt: skip
    efml = model_kinds.unpack_archive(
        _write(tmp_path, zip_bytes([*efml_members("144/"), *[("144/" + n, d) for n, d in others]])),
        tmp_path / "efml",
    )
    assert efml is model_kinds.EFML  # one top-level folder is tolerated
    assert _tree(tmp_path / "efml") == sorted(EFML_FILES)  # the model config config.json names
    assert (tmp_path / "efml" / "encoder.pkl").read_bytes() == (
        EFML_TINY / "encoder.pkl"
    ).read_bytes()


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


def _without_its_name(data):
    """``data`` with its last central directory entry's one-character name made empty (the
    character becomes its extra field): zipfile cannot write such a member (found by fuzzing)."""
    data = bytearray(data)
    at = data.rfind(b"PK\x01\x02")
    name_length, extra_length = struct.unpack("<HH", data[at + 28 : at + 32])
    data[at + 28 : at + 32] = struct.pack("<HH", 0, name_length + extra_length)
    return bytes(data)


HOSTILE = [
    ("dotdot", lambda: zip_bytes([*bilm_members(), ("../evil.txt", b"x")]), "leaves the folder"),
    ("absolute", lambda: zip_bytes([*bilm_members(), ("/tmp/evil.txt", b"x")]), "is absolute"),
    ("backslash", lambda: zip_bytes([*bilm_members(), ("..\\evil.txt", b"x")]), "a backslash"),
    ("symlink", lambda: zip_bytes([*bilm_members(), _symlink("vocab.txt.gz", b"/etc")]),
     "'vocab.txt.gz' is a symbolic link"),
    ("duplicate", lambda: zip_bytes([*bilm_members(), ("vocab.txt", b"again")]),
     "names the member 'vocab.txt' twice"),
    ("bomb", lambda: zip_bytes([*bilm_members()[:-1], ("vocab.txt", bytes(20 << 20))]),
     "'vocab.txt' expands 1,0"),
    ("nested by name", lambda: zip_bytes([*bilm_members(), ("weights.zip", b"PK")]),
     "'weights.zip' is an archive inside the archive"),
    ("missing", lambda: zip_bytes([m for m in bilm_members() if m[0] != "model.hdf5"]),
     "lacks weights.hdf5 or model.hdf5 (a bilm-tf model archive holds options.json, "
     "weights.hdf5 or model.hdf5)"),
    ("extra", lambda: zip_bytes([*bilm_members(), ("run.sh", b"rm -rf ~")]),
     "holds 'run.sh', which a bilm-tf model archive has no place for"),
    ("subfolder", lambda: zip_bytes([*bilm_members(), ("a/b/c.json", b"{}")]),
     "is in a folder of its own"),
    ("empty name", lambda: _without_its_name(zip_bytes([*bilm_members(), ("e", b"x")])),
     "a member has an empty name"),
    ("neither", lambda: zip_bytes([("notes.txt", b"x")]), "holds neither a bilm-tf model"),
    ("not a zip", lambda: b"PK\x03\x04 and then nothing", "not a readable zip archive"),
]  # fmt: skip


@pytest.mark.parametrize("make, message", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_hostile_archive_is_refused_in_one_line_and_writes_nothing(tmp_path, make, message):
    archive = _write(tmp_path, make())
    with pytest.raises(ForeignModelError) as error:
        model_kinds.unpack_archive(archive, tmp_path / "out")
    assert message in str(error.value) and str(error.value).startswith(str(archive))
    assert "\n" not in str(error.value)
    assert _tree(tmp_path) == ["model.zip"]  # nothing extracted, nothing outside


def test_a_declared_size_over_the_bound_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(zip_archives, "MAX_MEMBER_BYTES", 100_000)
    archive = _write(tmp_path, zip_bytes(bilm_members()))
    with pytest.raises(ForeignModelError, match="'model.hdf5' declares 450,896 bytes, more than"):
        model_kinds.check_archive(archive)


@pytest.mark.parametrize("size", [61, 63, 0xFFFFFFF0])
def test_a_wrong_declared_size_is_refused_and_removes_what_was_written(tmp_path, size):
    members = [*[m for m in bilm_members() if m[0] != "vocab.txt"], ("vocab.txt", b"a" * 62)]
    data = zip_bytes(members, compression=zipfile.ZIP_STORED)
    archive = _write(tmp_path, _with_size(data, "vocab.txt", size))
    with pytest.raises(ForeignModelError) as error:
        model_kinds.unpack_archive(archive, tmp_path / "out")
    assert "vocab.txt" in str(error.value) or "damaged zip archive" in str(error.value)
    assert _tree(tmp_path) == ["model.zip"]


def test_an_archive_inside_by_its_bytes_is_refused_when_extracted(tmp_path):
    members = [m for m in bilm_members() if m[0] != "vocab.txt"]
    archive = _write(tmp_path, zip_bytes([*members, ("vocab.txt", zip_bytes([("x", b"y")]))]))
    with pytest.raises(ForeignModelError, match="'vocab.txt' is an archive inside the archive"):
        model_kinds.unpack_archive(archive, tmp_path / "out")
    assert _tree(tmp_path) == ["model.zip"]


def test_extraction_never_follows_a_link_in_place_of_a_file(tmp_path):
    # The directory is made fresh: a link planted where it would go is refused by mkdir.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        model_kinds.unpack_archive(NLPL_BILM_ZIP, tmp_path / "out")
    assert _tree(tmp_path / "elsewhere") == []


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz_the_archive_parser(data):
    original = bytearray(NLPL_BILM_ZIP.read_bytes()[-2000:])  # the directory's end, damaged
    for _ in range(data.draw(st.integers(1, 6))):
        original[data.draw(st.integers(0, len(original) - 1))] = data.draw(st.integers(0, 255))
    try:
        _, kind = model_kinds.parse_archive(bytes(original))
    except ForeignModelError as e:
        assert "\n" not in str(e)
    else:
        assert kind in model_kinds.KINDS


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


def _padded_stream(data, name, padding):
    """``data`` (a zip whose last member is ``name``) with ``padding`` bytes put after that
    member's compressed stream and counted in its declared compressed size: the directory
    then declares far more compressed bytes than the stream uses."""
    data = bytearray(data)
    directory = data.rfind(b"PK\x01\x02")
    while data[directory + 46 : directory + 46 + len(name)] != name.encode():
        directory = data.rfind(b"PK\x01\x02", 0, directory)
    local = int.from_bytes(data[directory + 42 : directory + 46], "little")
    size = int.from_bytes(data[directory + 20 : directory + 24], "little") + len(padding)
    data[local + 18 : local + 22] = size.to_bytes(4, "little")
    data[directory + 20 : directory + 24] = size.to_bytes(4, "little")
    first = data.index(b"PK\x01\x02")
    end = data.rindex(b"PK\x05\x06")
    data[end + 16 : end + 20] = (first + len(padding)).to_bytes(4, "little")
    return bytes(data[:first] + padding + data[first:])


def test_a_stream_shorter_than_its_declared_size_is_measured_by_what_it_consumes(tmp_path):
    """60 MB of zeros deflate to 60 KB; with 1 MB of padding counted in its declared size the
    member claims 57 times, under the directory's limit: the bytes read while extracting give
    it away, and nothing is kept."""
    members = [*[m for m in bilm_members() if m[0] != "vocab.txt"], ("vocab.txt", bytes(60 << 20))]
    data = _padded_stream(zip_bytes(members), "vocab.txt", bytes(range(256)) * 4096)
    archive = _write(tmp_path, data)
    info = zipfile.ZipFile(archive).getinfo("vocab.txt")
    assert 50 < info.file_size / info.compress_size < zip_archives.MAX_RATIO
    model_kinds.check_archive(archive)  # the directory alone passes
    with pytest.raises(ForeignModelError, match="'vocab.txt' expands .* a zip bomb"):
        model_kinds.unpack_archive(archive, tmp_path / "out")
    assert _tree(tmp_path) == ["model.zip"]


def test_members_whose_compressed_bytes_overlap_or_pass_the_end_are_refused(tmp_path):
    data = zip_bytes(bilm_members(), compression=zipfile.ZIP_STORED)
    first = zipfile.ZipFile(io.BytesIO(data)).infolist()[0]
    overlapping = _with_compressed_size(data, first.filename, first.compress_size + 40)
    with pytest.raises(ForeignModelError, match=f"members '{first.filename}' and '.*' overlap"):
        model_kinds.parse_archive(overlapping)
    last = zipfile.ZipFile(io.BytesIO(data)).infolist()[-1]
    past = _with_compressed_size(data, last.filename, len(data))
    with pytest.raises(ForeignModelError, match=f"'{last.filename}' declares .* compressed bytes, "
                       "more than the archive holds"):  # fmt: skip
        model_kinds.parse_archive(past)


def _with_compressed_size(data, name, size):
    """``data`` (a zip) with the directory's compressed size of ``name`` set to ``size``."""
    data = bytearray(data)
    at = data.index(b"PK\x01\x02")
    while data[at + 46 : at + 46 + len(name)] != name.encode():
        at = data.index(b"PK\x01\x02", at + 4)
    data[at + 20 : at + 24] = size.to_bytes(4, "little")
    return bytes(data)


def test_the_member_count_limit_holds_at_its_value(tmp_path):
    base = bilm_members()
    fill = [(f"readme{i}.txt", b"x") for i in range(zip_archives.MAX_MEMBERS - len(base))]
    at_limit = zip_bytes([*base, *fill])
    with pytest.raises(ForeignModelError, match="holds 'readme0.txt', which a bilm-tf model"):
        model_kinds.parse_archive(at_limit)  # counted, then judged member by member
    one_more = zip_bytes([*base, *fill, ("extra.txt", b"x")])
    with pytest.raises(ForeignModelError, match=f"holds {zip_archives.MAX_MEMBERS + 1} members, "
                       f"more than the {zip_archives.MAX_MEMBERS} a model has"):  # fmt: skip
        model_kinds.parse_archive(one_more)


def test_an_encrypted_member_is_refused_as_encrypted():
    data = bytearray(zip_bytes(bilm_members()))
    at = data.index(b"PK\x01\x02")  # the first member's directory entry: its flag bits
    data[at + 8] |= 0x1
    with pytest.raises(ForeignModelError, match="member 'meta.json' is encrypted"):
        model_kinds.parse_archive(bytes(data))


@pytest.mark.parametrize(
    "expanded, compressed, refused",
    [
        (zip_archives.RATIO_FLOOR + 1, (zip_archives.RATIO_FLOOR + 1) // 50, False),  # a model's
        (zip_archives.RATIO_FLOOR, 1, False),  # 1 MiB from a byte: under the floor
        (zip_archives.RATIO_FLOOR + 1, 1, True),
        (101 * 20_000, 20_000, True),  # over the floor, 101 times
        (100 * 20_000, 20_000, False),  # exactly 100 times
    ],
)
def test_the_bomb_rule_needs_both_its_size_and_its_ratio(expanded, compressed, refused):
    check = zip_archives._check_ratio
    if refused:
        with pytest.raises(ForeignModelError, match="a zip bomb"):
            check("m", compressed, expanded, "a.zip")
    else:
        check("m", compressed, expanded, "a.zip")


def test_state_dicts_in_pytorchs_zip_layout_are_extracted_and_read(tmp_path):
    """A newer PyTorch writes each state_dict as a zip: it starts as an archive does, and is
    one the state_dict reader reads (not an archive inside the archive)."""
    from support import torch_pickles

    from elmo_tf.foreign import efml_folder
    from elmo_tf.foreign.torch_state_dict import read_state_dict

    members = []
    for name, data in efml_members():
        if name.endswith(".pkl"):
            data = torch_pickles.zip_bytes(read_state_dict(EFML_TINY / name), folder=name[:-4])
            assert data.startswith(b"PK\x03\x04")
        members.append((name, data))
    model_kinds.unpack_archive(_write(tmp_path, zip_bytes(members)), tmp_path / "out")
    folder = efml_folder.read_folder(tmp_path / "out")
    expected = read_state_dict(EFML_TINY / "encoder.pkl")
    assert sorted(folder.encoder) == sorted(expected)
    for name, array in expected.items():
        np.testing.assert_array_equal(folder.encoder[name], array)


def _documented_rows(heading):
    """The ``{id: (alias, description)}`` of the table under ``heading`` in docs/models.md."""
    from support.paths import ROOT

    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if heading.startswith("### ELMoForManyLangs") and len(cells) == 6 and cells[0].isdigit():
            rows[int(cells[0])] = (cells[1], cells[2])
            rows[int(cells[3])] = (cells[4], cells[5])
        elif len(cells) == 3 and cells[1].isdigit():
            rows[int(cells[1])] = (cells[0], cells[2])
    return rows


def test_the_names_are_the_documented_ones():
    """docs/models.md's tables and the registry agree, id by id: a swap in either fails."""
    efml = _documented_rows("### ELMoForManyLangs' models (release 11)")
    assert len(efml) == 44
    assert {n: (nlpl.ENTRIES[n].alias, nlpl.ENTRIES[n].description) for n in efml} == {
        n: (alias, f"ELMoForManyLangs, {language}") for n, (alias, language) in efml.items()
    }
    release_20 = _documented_rows("### bilm-tf models of release 20")
    assert release_20 and {n: nlpl.ENTRIES[n].alias for n in release_20} == {
        n: alias for n, (alias, _) in release_20.items()
    }


def test_a_member_placed_before_the_archives_start_is_refused(tmp_path):
    """Found by fuzz/nlpl_archive.py: 100 bytes cut from the first member move the directory,
    and zipfile places that member at offset -100 (extracting it raised OSError)."""
    data = zip_bytes(bilm_members(), compression=zipfile.ZIP_STORED)
    archive = _write(tmp_path, data[:40] + data[140:])
    with pytest.raises(ForeignModelError, match="'meta.json' starts before the archive does"):
        model_kinds.unpack_archive(archive, tmp_path / "out")
    assert _tree(tmp_path) == ["model.zip"]
