"""The one atomic writer and the one UTF-8 line reader (elmo_tf.system.files)."""

import os
import re
import stat

import pytest
from support.special_files import special_file

from elmo_tf.errors import ElmoError, InputFileError
from elmo_tf.system import files
from elmo_tf.tokens.text_lines import read_text_lines


def test_atomic_write_replaces_and_a_failure_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.txt"
    files.write_text(path, "old\n")
    with pytest.raises(RuntimeError), files.atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("half")
        raise RuntimeError("interrupted")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]  # no temporary left
    files.write_text(path, "new\n")
    assert path.read_text(encoding="utf-8") == "new\n"


def test_atomic_files_get_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        files.write_bytes(tmp_path / "a", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o640


def test_atomic_directory_refuses_to_replace(tmp_path):
    target = tmp_path / "1"
    with files.atomic_path(target) as tmp:
        os.mkdir(tmp)
        (open(os.path.join(tmp, "f"), "w")).close()
    assert os.listdir(target) == ["f"]
    with pytest.raises(FileExistsError), files.atomic_path(target) as tmp:
        os.mkdir(tmp)
    assert os.listdir(tmp_path) == ["1"]


def test_read_text_lines(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\rthree\n\nZ\xc3\xbcrich\n")
    assert list(read_text_lines(path)) == ["one", "two", "three", "", "Zürich"]


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"fine\n\xff bad\n", "line 2 is not valid UTF-8 (byte 0xff at byte 1 of the line)"),
        (b"a\nb\x00c\n", "line 2 holds a NUL byte (at byte 2 of the line)"),
        (None, "vocabulary file not found"),
    ],
)
def test_read_errors_name_file_and_line(tmp_path, content, fragment):
    path = tmp_path / "v.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputFileError, match=re.escape(fragment)) as info:
        list(read_text_lines(path, what="vocabulary"))
    assert str(path) in str(info.value) and isinstance(info.value, ElmoError)
    with pytest.raises(InputFileError, match="is a directory"):
        list(read_text_lines(tmp_path))


def test_a_link_is_written_through_and_kept(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    os.symlink(target, link)
    files.write_text(link, "new")
    assert os.path.islink(link) and target.read_text() == "new"


@pytest.mark.parametrize("kind", ["fifo", "socket", "null device", "link to a null device"])
def test_a_device_or_pipe_is_never_replaced(tmp_path, kind):
    (tmp_path / "made").mkdir()
    path = tmp_path / "made" / "out"
    if kind.startswith("link to "):
        target = special_file(tmp_path / "device", kind.removeprefix("link to a "))
        os.symlink(target, path)
    else:
        special_file(path, kind)
    before = os.lstat(path)
    with pytest.raises(ElmoError, match="not a regular file; an output is written as a new file"):
        files.write_text(path, "x")
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (
        before.st_mode,
        before.st_ino,
        before.st_rdev,
    )
    if kind.startswith("link to "):
        assert stat.S_ISCHR(os.stat(path).st_mode)  # the device it names is still one
    assert os.listdir(tmp_path / "made") == ["out"]  # no temporary left
