"""The bounded reader of options, training options and weight files
(``elmo_tf.system.untrusted_files``): each refusal is one line naming the file, and no read
goes further than the file's bound plus one byte, whatever its size says."""

import errno
import io
import os

import pytest
from support.special_files import special_file

from elmo_tf.errors import OptionsError
from elmo_tf.system import untrusted_files


class _Reads:
    """``open`` for the module under test: real files, each read's requested size recorded.

    A read with no bound (``None`` or negative) or a hundredth read fails the test: on a device
    of endless bytes either would never return. ``grow`` is appended to the file after the
    second read, the reader's first after the check's (a file still being written); ``fail``
    is the ``OSError`` the n-th open raises (``fail_open``)."""

    def __init__(self, grow=b"", fail=None, fail_open=0):
        self.sizes, self.grow, self.fail, self.fail_open, self.opened = [], grow, fail, fail_open, 0

    def __call__(self, path, mode="r", *args, **kwargs):
        self.opened += 1
        if self.opened == self.fail_open:
            raise self.fail
        return _Recorded(self, path, open(path, mode, *args, **kwargs))


class _Recorded(io.RawIOBase):
    def __init__(self, reads, path, f):
        self.reads, self.path, self.f = reads, path, f

    def fileno(self):
        return self.f.fileno()

    def close(self):
        self.f.close()
        super().close()

    def read(self, n=-1):
        if n is None or n < 0:
            raise AssertionError(f"an unbounded read ({n!r})")
        if len(self.reads.sizes) >= 100:
            raise AssertionError("more than 100 reads")
        self.reads.sizes.append(n)
        data = self.f.read(n)
        if len(self.reads.sizes) == 2 and self.reads.grow:
            with open(self.path, "ab") as f:
                f.write(self.reads.grow)
        return data


@pytest.fixture
def reads(monkeypatch):
    """The reads the module makes, recorded (``_Reads``)."""
    recorder = _Reads()
    monkeypatch.setattr(untrusted_files, "open", recorder, raising=False)
    return recorder


def _file(tmp_path, data, name="weights.bin"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_readable_file_is_checked_by_reading_one_byte(tmp_path, reads):
    untrusted_files.check_readable(_file(tmp_path, b"x" * 5000), "weight file", OptionsError)
    assert reads.sizes == [1]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p, "{p}: weight file not found"),
        (lambda p: p.mkdir() or p, "{p}: is a directory, not a weight file"),
        (lambda p: _file(p.parent, b"", p.name), "{p}: weight file is empty"),
        (lambda p: special_file(p, "fifo"), "{p}: is a named pipe, not a weight file"),
        (lambda p: _file(p.parent, b"x", "file") / "below", "{p}: cannot read weight file "
         "(Not a directory)"),
    ],
    ids=["missing", "directory", "empty", "named pipe", "below a file"],
)  # fmt: skip
def test_what_cannot_be_read_is_one_line_naming_the_file(tmp_path, make, message):
    path = make(tmp_path / "weights.bin")
    with pytest.raises(OptionsError) as error:
        untrusted_files.check_readable(path, "weight file", OptionsError)
    assert str(error.value) == message.format(p=path)


def test_a_file_at_its_bound_is_read_and_one_byte_over_is_refused(tmp_path):
    data = b"{}" + b" " * 98
    path = _file(tmp_path, data)
    assert untrusted_files.read_bounded(path, "weight file", 100, OptionsError) == data
    path = _file(tmp_path, data + b" ")
    with pytest.raises(OptionsError) as error:
        untrusted_files.read_bounded(path, "weight file", 100, OptionsError)
    assert str(error.value) == f"{path}: larger than 100 bytes, not a weight file"
    with pytest.raises(OptionsError) as error:
        untrusted_files.read_bounded(path, "weight file", 100, OptionsError, hint=" (a hint)")
    assert str(error.value) == f"{path}: larger than 100 bytes, not a weight file (a hint)"


def test_a_file_over_its_bound_is_read_no_further_than_the_bound_plus_one(tmp_path, reads):
    path = _file(tmp_path, b"x" * 300)
    with pytest.raises(OptionsError, match="larger than 100 bytes"):
        untrusted_files.read_bounded(path, "weight file", 100, OptionsError)
    assert reads.sizes == [1, 101]  # the check's byte, then the bound plus one


def test_a_file_within_its_bound_is_read_in_one_read_of_its_size_plus_one(tmp_path, reads):
    path = _file(tmp_path, b"{}" * 5)
    assert untrusted_files.read_bounded(path, "weight file", 100, OptionsError) == b"{}" * 5
    assert reads.sizes == [1, 11, 91]  # the check's byte, the file and one byte, the end


def test_a_device_of_endless_bytes_is_read_to_its_bound_a_megabyte_at_a_time(tmp_path, reads):
    """A device's size reads 0: the reader grows its reads, never past a megabyte each, and
    stops one byte past the bound."""
    zero = special_file(tmp_path / "zero", "zero device")
    with pytest.raises(OptionsError) as error:
        untrusted_files.read_bounded(zero, "weight file", 3 << 20, OptionsError)
    assert str(error.value) == f"{zero}: larger than 3145728 bytes, not a weight file"
    assert reads.sizes == [1, 1, 1 << 20, 1 << 20, 1 << 20]
    reads.sizes.clear()
    with pytest.raises(OptionsError, match="larger than 100 bytes"):
        untrusted_files.read_bounded(zero, "weight file", 100, OptionsError)
    assert reads.sizes == [1, 1, 100]


def test_a_file_that_grows_while_read_is_read_whole_up_to_its_bound(tmp_path, reads):
    reads.grow = b"def"
    path = _file(tmp_path, b"abc")
    assert untrusted_files.read_bounded(path, "weight file", 100, OptionsError) == b"abcdef"
    reads.sizes.clear()
    reads.grow = b"!"  # a file of exactly the bound that grows by one byte
    path = _file(tmp_path, b"a" * 100)
    with pytest.raises(OptionsError, match="larger than 100 bytes"):
        untrusted_files.read_bounded(path, "weight file", 100, OptionsError)


def test_a_file_that_cannot_be_read_after_its_check_is_one_line(tmp_path, reads):
    reads.fail, reads.fail_open = OSError(errno.EIO, os.strerror(errno.EIO)), 2
    path = _file(tmp_path, b"{}")
    with pytest.raises(OptionsError) as error:
        untrusted_files.read_bounded(path, "weight file", 100, OptionsError)
    assert str(error.value) == f"{path}: cannot read weight file (Input/output error)"


def test_whitespace_alone_is_an_empty_file(tmp_path):
    path = _file(tmp_path, b" \n\t")
    with pytest.raises(OptionsError) as error:
        untrusted_files.read_bounded(path, "options file", 100, OptionsError)
    assert str(error.value) == f"{path}: options file is empty"


@pytest.mark.parametrize(
    "data, value",
    [(b'{"a": 1}', {"a": 1}), (b'\xef\xbb\xbf{"a": [1, 2]}', {"a": [1, 2]}), (b"3", 3)],
)
def test_json_is_parsed_with_or_without_a_byte_order_mark(data, value):
    assert untrusted_files.parse_json(data, "o.json", "options file", OptionsError) == value


@pytest.mark.parametrize(
    "data, message",
    [
        (b'{"a": 1, "a": 2}', "the key 'a' appears twice in one object"),
        (b'{"a": \xff}', "not UTF-8 text: byte 6"),
        (b"[" * 100_000, "nested too deeply"),
        (b"{", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ],
)
def test_json_that_is_not_one_clear_value_is_one_line(data, message):
    with pytest.raises(OptionsError) as error:
        untrusted_files.parse_json(data, "o.json", "options file", OptionsError)
    assert str(error.value) == f"o.json: not a valid JSON options file ({message})"
