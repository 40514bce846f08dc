"""A model archive's zip file read as hostile input, function by function
(``elmo_tf.foreign.zip_archives``): each refusal's whole line, both sides of each bound, and what
extraction writes (and where, and with which modes). tests/unit/test_nlpl_archives.py goes
through the model kinds; this file calls the archive functions themselves."""

import io
import os
import stat
import zipfile

import numpy as np
import pytest
from support.foreign_models import zip_bytes

from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import zip_archives

LONG = "n" * 77 + ".txt"  # 81 characters: a message shows 80 of them
LONG_SHOWN = "n" * 77 + ".tx... (81 characters)"
TIME = (2024, 1, 1, 0, 0, 0)


def _write(tmp_path, data, name="model.zip"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def _refusal(call, *args):
    with pytest.raises(ForeignModelError) as error:
        call(*args)
    return str(error.value)


def _unix(name, mode, system=3):
    """A member whose directory entry gives ``mode`` (``stat.S_IF*`` and permissions), as a
    zip written on ``system`` (3: Unix) records it."""
    info = zipfile.ZipInfo(name, date_time=TIME)
    info.create_system = system
    info.external_attr = mode << 16
    return info


def _directory_entry(data, name):
    """The offset of ``name``'s central directory entry in ``data``."""
    at = data.index(b"PK\x01\x02")
    while data[at + 46 : at + 46 + len(name)] != name.encode():
        at = data.index(b"PK\x01\x02", at + 4)
    return at


def _with_compressed_size(data, name, size):
    """``data`` with the directory's compressed size of ``name`` set to ``size``."""
    data = bytearray(data)
    at = _directory_entry(data, name)
    data[at + 20 : at + 24] = size.to_bytes(4, "little")
    return bytes(data)


def _with_method(data, name, method):
    """``data`` with the directory's compression method of ``name`` set to ``method``."""
    data = bytearray(data)
    at = _directory_entry(data, name)
    data[at + 10 : at + 12] = method.to_bytes(2, "little")
    return bytes(data)


def _offsets(data):
    return {i.filename: i.header_offset for i in zipfile.ZipFile(io.BytesIO(data)).infolist()}


# inspect and parse_archive: a file or bytes that are no zip


def test_an_unreadable_path_is_named_with_its_error_cut_at_120_characters(tmp_path):
    path = tmp_path / ("m" * 150 + ".zip")
    error = f"[Errno 2] No such file or directory: '{path}'"
    assert len(error) > 121
    expected = f"{path}: not a readable zip archive ({error[:120]})"
    assert _refusal(zip_archives.inspect, path) == expected
    junk = _write(tmp_path, b"no zip at all")
    assert _refusal(zip_archives.inspect, junk) == (
        f"{junk}: not a readable zip archive (File is not a zip file)"
    )


def test_bytes_that_are_no_zip_are_named_as_the_archive_by_default():
    assert _refusal(zip_archives.parse_archive, b"no zip at all") == (
        "archive: not a readable zip archive (File is not a zip file)"
    )
    assert _refusal(zip_archives.parse_archive, b"no zip at all", "m.zip") == (
        "m.zip: not a readable zip archive (File is not a zip file)"
    )


def test_a_damaged_directorys_error_is_one_line_of_at_most_120_characters(monkeypatch):
    def damaged(*args):
        raise zipfile.BadZipFile("Bad  magic\nnumber " + "y" * 200)

    monkeypatch.setattr(zip_archives, "_members", damaged)
    text = ("Bad magic number " + "y" * 200)[:120]
    data = zip_bytes([("a.txt", b"x")])
    assert _refusal(zip_archives.parse_archive, data, "m.zip") == (
        f"m.zip: not a readable zip archive ({text})"
    )


# is_zip


def test_only_a_regular_file_that_starts_as_a_zip_is_one(tmp_path):
    archive = _write(tmp_path, zip_bytes([("a.txt", b"x" * 10)]), "a.zip")
    assert zip_archives.is_zip(archive) is True
    assert zip_archives.is_zip(_write(tmp_path, b"PK\x05\x06" + bytes(18), "empty.zip")) is False
    assert zip_archives.is_zip(_write(tmp_path, b"pk\x03\x04 text", "text.txt")) is False
    assert zip_archives.is_zip(tmp_path / "missing.zip") is False
    assert zip_archives.is_zip(tmp_path) is False  # a directory
    os.mkfifo(tmp_path / "pipe")
    assert zip_archives.is_zip(tmp_path / "pipe") is False  # never opened: it would block


def test_a_zip_that_cannot_be_opened_is_not_one(tmp_path, monkeypatch):
    archive = _write(tmp_path, zip_bytes([("a.txt", b"x")]), "a.zip")

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(zip_archives, "open", refused, raising=False)
    assert zip_archives.is_zip(archive) is False


# member names


@pytest.mark.parametrize(
    "name, shown",
    [
        ("/etc/passwd", "/etc/passwd"),
        ("/", "/"),
        ("a\\b", "a\\b"),
        ("a\x00b", "a\\x00b"),
        ("c:", "c:"),
        ("c:x", "c:x"),
        ("..", ".."),
        ("a/../b", "a/../b"),
        ("./a", "./a"),
        ("a/./b", "a/./b"),
        ("a/.", "a/."),
        ("a//b", "a//b"),
        ("//a", "//a"),
        ("/" + "a" * 85, "/" + "a" * 79 + "... (86 characters)"),
    ],
)
def test_a_name_that_leaves_the_folder_is_refused_in_one_line(name, shown):
    assert _refusal(zip_archives._checked_name, name, "m.zip") == (
        f"m.zip: member '{shown}' has a name that is absolute or leaves the folder (.., a drive, "
        "a backslash); not extracted"
    )


@pytest.mark.parametrize(
    "name, kept",
    [
        ("a", "a"),  # one character: no drive to look for
        ("ab:c", "ab:c"),  # a colon past the second character
        ("..a", "..a"),
        ("a.", "a."),
        ("configs/", "configs"),  # a directory entry: named without its slash
        ("configs/a.json", "configs/a.json"),
        ("boX/", "boX"),
        ("a ", "a "),
        ("d/", "d"),
    ],
)
def test_a_name_inside_the_folder_is_kept_without_a_trailing_slash(name, kept):
    assert zip_archives._checked_name(name, "m.zip") == kept


def test_an_empty_name_is_refused():
    assert _refusal(zip_archives._checked_name, "", "m.zip") == (
        "m.zip: a member has an empty name; not extracted"
    )


# the folder the members lie in


def test_the_common_folder_is_the_one_top_level_folder_of_every_name():
    assert zip_archives._common_folder(["144/a", "144/configs/b"]) == "144/"
    assert zip_archives._common_folder(["a"]) == ""
    assert zip_archives._common_folder(["144/a", "b"]) == ""
    assert zip_archives._common_folder(["a/x", "b/y"]) == ""
    assert zip_archives._common_folder([]) == ""


def test_members_are_named_relative_to_their_one_folder_with_a_kinds_subfolders():
    data = zip_bytes([("144/a.txt", b"x"), ("144/configs/b.json", b"{}")])
    members = zip_archives.parse_archive(data, "m.zip", ("configs",))
    assert list(members) == ["a.txt", "configs/b.json"]
    assert members["a.txt"].filename == "144/a.txt"
    assert list(zip_archives.parse_archive(zip_bytes([("x", b"1")]))) == ["x"]


@pytest.mark.parametrize(
    "names, subfolders, refused",
    [
        (["a.txt", "configs/b.json"], (), "configs/b.json"),
        (["a.txt", "other/b.json"], ("configs",), "other/b.json"),
        (["a.txt", "configs/deep/b.json"], ("configs",), "configs/deep/b.json"),
        (["a/x.txt", "b/y.txt"], (), "a/x.txt"),
    ],
)
def test_a_member_outside_the_folder_and_its_subfolders_is_refused(names, subfolders, refused):
    data = zip_bytes([(name, b"x") for name in names])
    assert _refusal(zip_archives.parse_archive, data, "m.zip", subfolders) == (
        f"m.zip: member '{refused}' is in a folder of its own; a model archive holds one "
        "folder's files"
    )


def test_a_long_name_in_a_folder_of_its_own_is_shown_cut():
    name = "d" * 79 + "/x"
    data = zip_bytes([("a.txt", b"x"), (name, b"y")])
    assert _refusal(zip_archives.parse_archive, data, "m.zip") == (
        f"m.zip: member '{'d' * 79}/... (81 characters)' is in a folder of its own; a model "
        "archive holds one folder's files"
    )


# what a member is


def test_a_unix_regular_file_and_directory_are_members_and_their_mode_counts_only_on_unix():
    members = [
        (_unix("a.txt", stat.S_IFREG | 0o644), b"x"),
        (_unix("d/", stat.S_IFDIR | 0o755), b""),
        (_unix("p", stat.S_IFIFO | 0o644, system=0), b"y"),  # not a Unix zip: no mode
    ]
    assert list(zip_archives.parse_archive(zip_bytes(members), "m.zip")) == ["a.txt", "p"]


@pytest.mark.parametrize(
    "name, mode, what",
    [
        ("l", stat.S_IFLNK | 0o777, "a symbolic link"),
        ("p", stat.S_IFIFO | 0o644, "not a regular file"),
        ("c", stat.S_IFCHR | 0o644, "not a regular file"),
        (LONG, stat.S_IFLNK | 0o777, "a symbolic link"),
    ],
)
def test_a_link_device_or_pipe_is_refused_by_its_kind(name, mode, what):
    data = zip_bytes([(_unix(name, mode), b"/etc")])
    shown = LONG_SHOWN if name == LONG else name
    assert _refusal(zip_archives.parse_archive, data, "m.zip") == (
        f"m.zip: member '{shown}' is {what}; not extracted"
    )


def test_a_compression_method_zipfile_cannot_read_is_refused_by_its_number():
    data = _with_method(zip_bytes([("a.txt", b"x" * 50)]), "a.txt", 99)
    assert _refusal(zip_archives.parse_archive, data, "m.zip") == (
        "m.zip: member 'a.txt' is compressed with method 99, which zipfile cannot read"
    )


def test_a_members_declared_size_may_reach_the_bound_and_not_pass_it(monkeypatch):
    data = zip_bytes([(LONG, b"s" * 1500)])
    monkeypatch.setattr(zip_archives, "MAX_MEMBER_BYTES", 1500)
    assert list(zip_archives.parse_archive(data, "m.zip")) == [LONG]
    monkeypatch.setattr(zip_archives, "MAX_MEMBER_BYTES", 1499)
    assert _refusal(zip_archives.parse_archive, data, "m.zip") == (
        f"m.zip: member '{LONG_SHOWN}' declares 1,500 bytes, more than 1,499"
    )


def test_the_members_total_may_reach_the_bound_and_not_pass_it(monkeypatch):
    data = zip_bytes([("a.txt", b"a" * 700), ("b.txt", b"b" * 800)])
    monkeypatch.setattr(zip_archives, "MAX_TOTAL_BYTES", 1500)
    assert list(zip_archives.parse_archive(data, "m.zip")) == ["a.txt", "b.txt"]
    monkeypatch.setattr(zip_archives, "MAX_TOTAL_BYTES", 1499)
    assert _refusal(zip_archives.parse_archive, data, "m.zip") == (
        "m.zip: its members declare 1,500 bytes in all, more than 1,499"
    )


# the bomb rule


def test_a_bomb_is_refused_with_its_ratio_and_sizes():
    floor = zip_archives.RATIO_FLOOR
    for compressed in (0, 1):
        assert _refusal(zip_archives._check_ratio, "m", compressed, floor + 1, "a.zip") == (
            f"a.zip: member 'm' expands 1,048,577 times ({compressed} to 1,048,577 bytes): a zip "
            "bomb, not extracted"
        )
    assert _refusal(zip_archives._check_ratio, "m", 20_000, 2_020_000, "a.zip") == (
        "a.zip: member 'm' expands 101 times (20,000 to 2,020,000 bytes): a zip bomb, not extracted"
    )


def test_a_single_compressed_byte_counts_as_one_in_the_ratio(monkeypatch):
    monkeypatch.setattr(zip_archives, "RATIO_FLOOR", 100)
    zip_archives._check_ratio("m", 1, 100, "a.zip")  # 100 times: the limit itself
    assert _refusal(zip_archives._check_ratio, "m", 1, 150, "a.zip") == (
        "a.zip: member 'm' expands 150 times (1 to 150 bytes): a zip bomb, not extracted"
    )
    assert _refusal(zip_archives._check_ratio, "m", 0, 150, "a.zip") == (
        "a.zip: member 'm' expands 150 times (0 to 150 bytes): a zip bomb, not extracted"
    )


# where each member's bytes lie


def test_a_member_may_end_where_the_next_begins_and_not_past_it():
    first, second = "a" * 81, "b" * 81
    data = zip_bytes([(first, b"1" * 500), (second, b"2" * 500)], zipfile.ZIP_STORED)
    starts = _offsets(data)
    touching = _with_compressed_size(data, first, starts[second] - starts[first] - 30)
    assert list(zip_archives.parse_archive(touching, "m.zip")) == [first, second]
    overlapping = _with_compressed_size(data, first, starts[second] - starts[first] - 29)
    assert _refusal(zip_archives.parse_archive, overlapping, "m.zip") == (
        f"m.zip: members '{'a' * 80}... (81 characters)' and '{'b' * 80}... (81 characters)' "
        "overlap in the archive; not extracted"
    )


def test_the_last_member_may_end_at_the_archives_end_and_not_past_it():
    data = zip_bytes([("a.txt", b"1" * 100), (LONG, b"2" * 2000)], zipfile.ZIP_STORED)
    room = len(data) - _offsets(data)[LONG] - 30
    assert list(zip_archives.parse_archive(_with_compressed_size(data, LONG, room), "m.zip")) == [
        "a.txt",
        LONG,
    ]
    past = _with_compressed_size(data, LONG, room + 1)
    assert _refusal(zip_archives.parse_archive, past, "m.zip") == (
        f"m.zip: member '{LONG_SHOWN}' declares {room + 1:,} compressed bytes, more than the "
        "archive holds"
    )


def test_a_member_placed_before_the_archive_is_named():
    data = zip_bytes([(LONG, b"z" * 300), ("b.txt", b"y")], zipfile.ZIP_STORED)
    cut = data[:40] + data[140:]  # the directory's offsets now point 100 bytes early
    assert _refusal(zip_archives.parse_archive, cut, "m.zip") == (
        f"m.zip: member '{LONG_SHOWN}' starts before the archive does"
    )


# extract


def _archive(tmp_path, members, compression=zipfile.ZIP_DEFLATED):
    path = _write(tmp_path, zip_bytes(members, compression))
    return path, {i.filename: i for i in zipfile.ZipFile(path).infolist()}


def test_extract_writes_the_named_members_alone_with_fixed_modes(tmp_path, monkeypatch):
    path, _ = _archive(
        tmp_path,
        [("configs/a.json", b'{"a": 1}'), ("configs/b.json", b"{}"), ("x.txt", b"text"),
         ("skip.txt", b"not named")],
    )  # fmt: skip
    members = zip_archives.inspect(path, ("configs",))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # a relative path would land here
    umask = os.umask(0)  # the modes as given, none masked
    try:
        zip_archives.extract(path, tmp_path / "out", members,
                             ["configs/a.json", "configs/b.json", "x.txt"])  # fmt: skip
    finally:
        os.umask(umask)
    out = tmp_path / "out"
    assert _tree(out) == ["configs", "configs/a.json", "configs/b.json", "x.txt"]
    assert (out / "configs" / "a.json").read_bytes() == b'{"a": 1}'
    assert (out / "x.txt").read_bytes() == b"text"
    assert _tree(tmp_path / "cwd") == []
    modes = {p: stat.S_IMODE(os.stat(out / p).st_mode) for p in ["", *_tree(out)]}
    assert modes == {"": 0o755, "configs": 0o755, "configs/a.json": 0o644,
                     "configs/b.json": 0o644, "x.txt": 0o644}  # fmt: skip


def test_a_member_under_a_folder_written_as_a_file_is_refused(tmp_path):
    path, members = _archive(tmp_path, [("configs", b"a file"), ("configs/a.json", b"{}")])
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(path, tmp_path / "out", members, ["configs", "configs/a.json"])
    assert str(error.value) == f"{path}: member 'configs/a.json' is in a folder that is a file"
    assert _tree(tmp_path) == ["model.zip"]


def test_a_member_written_twice_is_refused_by_the_file_already_there(tmp_path):
    path, members = _archive(tmp_path, [("x.txt", b"first")])
    with pytest.raises(FileExistsError):
        zip_archives.extract(path, tmp_path / "out", members, ["x.txt", "x.txt"])
    assert _tree(tmp_path) == ["model.zip"]


def test_a_member_that_starts_as_an_archive_is_refused_unless_the_kind_nests_it(tmp_path):
    inner = zip_bytes([("x", b"y")])
    path, members = _archive(tmp_path, [("inner.pkl", inner)])
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(path, tmp_path / "out", members, ["inner.pkl"])
    assert str(error.value) == (
        f"{path}: member 'inner.pkl' is an archive inside the archive; not extracted"
    )
    assert _tree(tmp_path) == ["model.zip"]
    zip_archives.extract(path, tmp_path / "out", members, ["inner.pkl"], ("inner.pkl",))
    assert (tmp_path / "out" / "inner.pkl").read_bytes() == inner


def _damaged(tmp_path, name):
    """An archive of one stored member ``name`` whose bytes do not match its CRC."""
    data = bytearray(zip_bytes([(name, b"payload" * 10)], zipfile.ZIP_STORED))
    at = data.index(b"payload")
    data[at] ^= 0xFF
    path = _write(tmp_path, bytes(data))
    return path, {i.filename: i for i in zipfile.ZipFile(path).infolist()}


def test_a_damaged_member_is_refused_with_zipfiles_error_cut_at_120_characters(tmp_path):
    name = "c" * 150
    path, members = _damaged(tmp_path, name)
    text = f"Bad CRC-32 for file '{name}'"[:120]
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(path, tmp_path / "out", members, [name])
    assert str(error.value) == f"{path}: damaged zip archive ({text})"
    assert _tree(tmp_path) == ["model.zip"]
    assert _refusal(zip_archives.read_member, path, members[name], 1000) == (
        f"{path}: damaged zip archive ({text})"
    )


def test_a_member_shorter_than_it_declares_is_refused_with_both_sizes(tmp_path):
    path, members = _archive(tmp_path, [("x.txt", b"q" * 1234)], zipfile.ZIP_STORED)
    members["x.txt"].file_size = 1235
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(path, tmp_path / "out", members, ["x.txt"])
    assert str(error.value) == (
        f"{path}: member 'x.txt' holds 1,234 bytes, not the 1,235 it declares"
    )
    assert _tree(tmp_path) == ["model.zip"]


def _giving(data):
    """``ZipFile.open`` as a zipfile that gives ``data`` for any member would have it."""

    def open_member(self, name, mode="r", pwd=None, *, force_zip64=False):
        return io.BytesIO(data)

    return open_member


def test_a_member_giving_more_than_it_declares_is_refused(tmp_path, monkeypatch):
    path, members = _archive(tmp_path, [(LONG, b"y" * 1234)])
    monkeypatch.setattr(zipfile.ZipFile, "open", _giving(b"y" * 2000))
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(path, tmp_path / "out", members, [LONG])
    assert str(error.value) == (
        f"{path}: member '{LONG_SHOWN}' holds more than the 1,234 bytes it declares; not extracted"
    )
    assert _tree(tmp_path) == ["model.zip"]
    assert _refusal(zip_archives.read_member, path, members[LONG], 1234) == (
        f"{path}: member '{LONG_SHOWN}' holds more than it declares"
    )


def test_a_bomb_is_measured_by_the_bytes_its_stream_consumes(tmp_path):
    """The directory alone is not asked: the members given to ``extract`` are zipfile's."""
    path, members = _archive(tmp_path, [("zeros.txt", bytes(3 << 20))])
    with pytest.raises(ForeignModelError) as error:
        zip_archives.extract(path, tmp_path / "out", members, ["zeros.txt"])
    message = str(error.value)
    assert message.startswith(f"{path}: member 'zeros.txt' expands ")
    assert message.endswith(" bytes): a zip bomb, not extracted")
    assert _tree(tmp_path) == ["model.zip"]


def test_a_large_member_that_does_not_compress_is_extracted_whole(tmp_path):
    """8 MiB stored: read 64 KiB at a time, its stream consumes as many bytes as it gives."""
    data = np.random.default_rng(0).bytes(8 << 20)
    path, _ = _archive(tmp_path, [("weights.hdf5", data)], zipfile.ZIP_STORED)
    members = zip_archives.inspect(path)
    zip_archives.extract(path, tmp_path / "out", members, ["weights.hdf5"])
    assert (tmp_path / "out" / "weights.hdf5").read_bytes() == data


# read_member


def test_a_small_member_is_read_up_to_its_bound_and_refused_past_it(tmp_path):
    path, members = _archive(tmp_path, [(LONG, b"r" * 1500)])
    assert zip_archives.read_member(path, members[LONG], 1500) == b"r" * 1500
    assert _refusal(zip_archives.read_member, path, members[LONG], 1499) == (
        f"{path}: member '{LONG_SHOWN}' declares 1,500 bytes, more than the 1,499 it may have"
    )
