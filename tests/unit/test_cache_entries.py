"""The model cache on disk (``elmo_tf.presets.cache_entries``): where it is, each URL's entry
and record, what is stale or broken, and removal that keeps what the cache did not make.

Each test has a cache of its own under ``tmp_path`` (``ELMO_TF_CACHE_DIR``); the downloads that
fill it through a loopback server: tests/integration/test_downloads.py.
"""

import errno
import hashlib
import json
import locale
import os
import stat

import pytest
from support.special_files import special_file

from elmo_tf.errors import CacheError, DownloadError
from elmo_tf.presets import cache_entries
from elmo_tf.presets.cache_entries import Entry

URL = "https://example.org/models/weights.hdf5"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(cache_entries.CACHE_VARIABLE, str(root))
    return root


def cached(url=URL, data=b"weights", record=True):
    """Puts ``data`` in the cache as ``url``'s file, with its record; returns the ``Entry``."""
    path = cache_entries.entry_path(url)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    entry = Entry(path, url, len(data), hashlib.sha256(data).hexdigest())
    if record:
        cache_entries.write_record(entry)
    return entry


def test_the_cache_directory_is_the_variable_else_xdg_else_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(cache_entries.CACHE_VARIABLE, "relative/cache")
    assert cache_entries.cache_dir() == str(tmp_path / "relative" / "cache")
    monkeypatch.setenv(cache_entries.CACHE_VARIABLE, "~/mine")
    assert cache_entries.cache_dir() == str(tmp_path / "home" / "mine")
    assert cache_entries.files_dir() == str(tmp_path / "home" / "mine" / "files")
    monkeypatch.setenv(cache_entries.CACHE_VARIABLE, "")  # empty: not set
    monkeypatch.setenv("XDG_CACHE_HOME", "xdg")
    assert cache_entries.cache_dir() == str(tmp_path / "xdg" / "elmo_tf")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_entries.cache_dir() == str(tmp_path / "home" / ".cache" / "elmo_tf")


def test_an_entry_is_named_by_its_public_urls_hash_and_its_file_name(cache):
    path = cache_entries.entry_path("https://user:secret@example.org/models/weights.hdf5")
    key = hashlib.sha256(URL.encode("utf-8")).hexdigest()[:24]
    assert path == str(cache / "files" / key / "weights.hdf5")
    assert cache_entries.entry_path(URL) == path  # the credentials are not part of it
    hidden = cache_entries.entry_path("https://example.org/..lock")
    assert os.path.basename(hidden) == "lock"  # never one of the entry's own hidden names
    assert os.path.basename(cache_entries.entry_path("https://example.org/.Xa.")) == "Xa."
    assert os.path.basename(cache_entries.entry_path("https://example.org/")) == "file"
    with pytest.raises(DownloadError) as error:
        cache_entries.entry_path("ftp://user:pw@example.org/weights.hdf5")
    assert str(error.value) == (
        "ftp://example.org/weights.hdf5: not a usable URL (not an http:// or https:// URL)"
    )


def test_a_record_is_written_private_and_read_back(cache):
    entry = cached()
    record = entry.path + cache_entries.RECORD_SUFFIX
    with open(record, encoding="utf-8") as f:
        assert f.read() == (
            f'{{\n  "url": "{URL}",\n  "size": 7,\n  "sha256": "{entry.sha256}"\n}}\n'
        )
    assert stat.S_IMODE(os.stat(record).st_mode) == 0o600
    assert cache_entries.read_record(entry.path) == entry
    assert cache_entries.read_entry(entry.path) == entry
    os.remove(entry.path)
    assert cache_entries.read_record(entry.path) == entry  # the record alone
    assert cache_entries.read_entry(entry.path) is None  # not an entry without its file


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"url": "u", "size": 7}', '{"url": "u", "size": "x", "sha256": "s"}'],
)
def test_a_record_that_cannot_be_read_is_none(cache, text):
    entry = cached()
    with open(entry.path + cache_entries.RECORD_SUFFIX, "w", encoding="utf-8") as f:
        f.write(text)
    assert cache_entries.read_record(entry.path) is None


def test_records_that_are_no_file_to_read_are_named(cache, monkeypatch):
    directory_record = cached("https://example.org/a.hdf5", record=False)
    os.mkdir(directory_record.path + cache_entries.RECORD_SUFFIX)
    pipe_record = cached("https://example.org/b.hdf5", record=False)
    os.mkfifo(pipe_record.path + cache_entries.RECORD_SUFFIX)
    fine = cached("https://example.org/c.hdf5")
    assert cache_entries.record_problem(directory_record.path) == "is a directory"
    assert cache_entries.record_problem(pipe_record.path) == "is a named pipe"
    assert cache_entries.record_problem(fine.path) is None
    assert cache_entries.read_record(pipe_record.path) is None  # never opened: it would block
    assert sorted(cache_entries.broken_records()) == sorted(
        [
            (directory_record.path + ".json", "is a directory"),
            (pipe_record.path + ".json", "is a named pipe"),
        ]
    )
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # root reads every file
    assert cache_entries.record_problem(fine.path) == (
        "cannot be read (Permission denied: another user's cache?)"
    )
    assert cache_entries.record_problem(fine.path + "-never-written") is None


def test_what_keeps_a_cached_file_from_being_read(tmp_path):
    regular = tmp_path / "file"
    regular.write_bytes(b"x")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert cache_entries.file_problem(str(regular)) is None
    assert cache_entries.file_problem(str(tmp_path / "missing")) == "is missing"
    assert cache_entries.file_problem(str(tmp_path)) == "is a directory"
    assert cache_entries.file_problem(str(pipe)) == "is a named pipe"
    assert cache_entries.file_problem(str(regular / "below")) == "cannot be read (Not a directory)"
    device = special_file(tmp_path / "null", "null device")
    assert cache_entries.file_problem(str(device)) == "is a device"


def test_only_the_caches_own_entry_directories_are_listed(cache):
    one, two = cached("https://example.org/1"), cached("https://example.org/2")
    files = cache / "files"
    (files / "notes").mkdir()  # not a key
    (files / ("A" * 24)).mkdir()  # not lowercase hex
    (files / ("0" * 23)).mkdir()  # one digit short
    (files / ("X" * 24)).mkdir()  # not hex
    (files / ("f" * 24)).write_text("a file, not an entry")
    os.symlink(files / "notes", files / ("e" * 24))  # a link, not an entry
    expected = sorted(os.path.dirname(e.path) for e in (one, two))
    assert cache_entries._entry_directories() == expected
    assert cache_entries.entries() == sorted([one, two], key=lambda e: e.url)


def test_a_cache_whose_files_directory_is_a_link_or_missing_has_no_entries(cache, tmp_path):
    assert cache_entries.entries() == [] and cache_entries.stale_files() == []
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.mkdir()
    os.symlink(elsewhere, cache / "files")
    assert cache_entries._entry_directories() == []


def test_stale_files_are_partial_bodies_and_records_without_their_file(cache):
    complete = cached("https://example.org/complete")
    orphan = cached("https://example.org/orphan", data=b"12345")
    os.remove(orphan.path)
    partial = os.path.join(os.path.dirname(complete.path), cache_entries.PARTIAL_NAME)
    os.mkdir(partial)
    with open(os.path.join(partial, "body"), "wb") as f:
        f.write(b"abc")
    record = orphan.path + cache_entries.RECORD_SUFFIX
    assert sorted(cache_entries.stale_files()) == sorted(
        [(record, os.path.getsize(record)), (os.path.join(partial, "body"), 3)]
    )
    assert cache_entries.entries() == [complete]


def test_removing_an_entry_removes_what_the_cache_made(cache):
    entry = cached()
    directory = os.path.dirname(entry.path)
    for name in (cache_entries.LOCK_NAME, cache_entries.PARTIAL_NAME):
        open(os.path.join(directory, name), "w").close()
    unpacked = entry.path + cache_entries.UNPACKED_SUFFIX
    os.makedirs(os.path.join(unpacked, "model"))
    assert cache_entries.remove(URL) == (True, None)
    assert not os.path.exists(directory)
    assert cache_entries.remove(URL) == (False, None)  # nothing left to remove


def test_files_the_cache_did_not_make_keep_their_entry(cache):
    entry = cached()
    directory = os.path.dirname(entry.path)
    mine = os.path.join(directory, "notes.txt")
    with open(mine, "w") as f:
        f.write("the user's")
    assert cache_entries.remove(URL) == (True, directory)
    assert os.listdir(directory) == ["notes.txt"]  # the file and its record went


def test_a_directory_in_the_cached_files_place_goes_only_when_empty(cache):
    entry = cached(record=False)
    os.remove(entry.path)
    os.makedirs(os.path.join(entry.path, "inside"))  # the user's directory, named as the file
    cache_entries.write_record(entry)
    directory = os.path.dirname(entry.path)
    assert cache_entries.remove(URL) == (True, directory)
    assert os.listdir(directory) == ["weights.hdf5"]
    os.rmdir(os.path.join(entry.path, "inside"))
    cache_entries.write_record(entry)
    assert cache_entries.remove(URL) == (True, None)


def test_an_entry_directory_that_is_a_link_is_not_removed(cache, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    directory = os.path.dirname(cache_entries.entry_path(URL))
    os.makedirs(os.path.dirname(directory))
    os.symlink(target, directory)
    assert cache_entries.remove(URL) == (False, None)
    assert os.path.islink(directory)


def test_clear_removes_every_entry_and_files_once_empty(cache):
    cached("https://example.org/1"), cached("https://example.org/2")
    (cache / "mine.txt").write_text("the user's")  # beside files/: never the cache's
    assert cache_entries.clear() == (2, [])
    assert sorted(os.listdir(cache)) == ["mine.txt"]
    kept = os.path.dirname(cached("https://example.org/3").path)
    with open(os.path.join(kept, "notes"), "w") as f:
        f.write("x")
    assert cache_entries.clear() == (0, [kept])
    assert os.path.isdir(cache / "files")  # not empty


def test_a_cache_that_cannot_be_written_is_said_in_one_line(cache, monkeypatch):
    cached()

    def read_only(path):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "rmdir", read_only)
    directory = os.path.dirname(cache_entries.entry_path(URL))
    with pytest.raises(CacheError) as error:
        cache_entries.remove(URL)
    assert str(error.value) == (
        f"cannot remove {directory}: the model cache {cache} is read-only (Read-only file system)"
    )


@pytest.mark.parametrize(
    ("code", "text", "expected"),
    [
        (errno.EROFS, "Read-only file system", "is read-only (Read-only file system)"),
        (errno.EACCES, "Permission denied", "is read-only (Permission denied)"),
        (errno.EPERM, "Operation not permitted", "is read-only (Operation not permitted)"),
        (errno.ENOSPC, "No space left on device", "No space left on device"),
    ],
)
def test_why_the_cache_cannot_be_written(cache, code, text, expected):
    message = cache_entries.cannot_write(OSError(code, text))
    assert message.endswith(expected)
    assert message.startswith(f"the model cache {cache} ") == (code != errno.ENOSPC)
    assert cache_entries.cannot_write(OSError("no errno")) == "no errno"


def test_a_record_is_read_as_utf8_whatever_the_locale(cache):
    """A record is JSON, UTF-8 text: one whose URL is written as UTF-8 bytes rather than
    escaped (``write_record`` escapes it) reads the same in a process whose locale says ASCII."""
    url = "https://example.org/mod\u00e8les/weights.hdf5"
    entry = Entry(cache_entries.entry_path(URL), url, 7, "0" * 64)
    os.makedirs(os.path.dirname(entry.path))
    record = {"url": url, "size": 7, "sha256": "0" * 64}
    with open(entry.path + cache_entries.RECORD_SUFFIX, "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False)
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")
        assert cache_entries.read_record(entry.path) == entry
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_a_killed_download_leaves_its_record_and_its_partial_body_stale_together(cache):
    """Killed after writing the record, before moving the body out of ``.partial/``: both are
    stale, in the one entry directory."""
    entry = cached(data=b"12345")
    os.remove(entry.path)
    partial = os.path.join(os.path.dirname(entry.path), cache_entries.PARTIAL_NAME)
    os.mkdir(partial)
    with open(os.path.join(partial, "body"), "wb") as f:
        f.write(b"abc")
    record = entry.path + cache_entries.RECORD_SUFFIX
    assert cache_entries.stale_files() == [
        (record, os.path.getsize(record)),
        (os.path.join(partial, "body"), 3),
    ]
    assert cache_entries.entries() == []
