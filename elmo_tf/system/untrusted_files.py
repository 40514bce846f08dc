"""Reading a file that may be anything: the one bounded reader of options, training options
and weight files.

Each check names the file and what it should have been, in one line, through the caller's
error class: a missing file, a directory, a named pipe or socket (a reader would wait for a
writer that may never come), an unreadable or empty file, a file larger than its kind can be
(read no further than that bound plus one byte), JSON that is not UTF-8, not JSON, nested too
deeply or giving a key twice (JSON keeps the last silently, so a file could show one value and
mean another).
"""

import json
import os

from elmo_tf import checks
from elmo_tf.system import files


def check_readable(path, what, error):
    """Raises ``error`` naming ``path`` unless it is a regular file that can be read and holds
    at least one byte; ``what`` names its kind (``"weight file"``)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise error(f"{path}: is a directory, not {checks.with_article(what)}")
    if kind := files.stream_kind(path):
        raise error(f"{path}: is a {kind}, not {checks.with_article(what)}")
    try:
        with open(path, "rb") as f:
            empty = not f.read(1)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except OSError as e:
        raise error(f"{path}: cannot read {what} ({e.strerror})") from None
    if empty:
        raise error(f"{path}: {what} is empty")


def read_bounded(path, what, max_bytes, error, hint=""):
    """The bytes of ``path``, read no further than ``max_bytes`` + 1; ``error`` for anything
    ``check_readable`` refuses, a file over ``max_bytes`` (``hint`` says why it cannot be
    one) or one holding only whitespace."""
    check_readable(path, what, error)
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            # read(n) allocates n bytes first: never more than the file holds (plus one),
            # then what it grew by meanwhile, a megabyte at a time
            data = f.read(min(max_bytes, os.fstat(f.fileno()).st_size) + 1)
            while len(data) <= max_bytes and (
                more := f.read(min(1 << 20, max_bytes + 1 - len(data)))
            ):
                data += more
    except OSError as e:
        raise error(f"{path}: cannot read {what} ({e.strerror})") from None
    if len(data) > max_bytes:
        raise error(f"{path}: larger than {max_bytes} bytes, not {checks.with_article(what)}{hint}")
    if not data.strip():
        raise error(f"{path}: {what} is empty")
    return data


def parse_json(data, path, what, error):
    """The JSON value of ``data`` (UTF-8, a BOM skipped); ``error`` naming ``path`` and the
    problem otherwise, a key given twice in one object included."""
    try:
        text = data.decode("utf-8-sig")  # pragma: no mutate, equivalent: codec names ignore case
        return json.loads(text, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as e:
        raise error(f"{path}: not a valid JSON {what} (not UTF-8 text: byte {e.start})") from None
    except RecursionError:
        raise error(f"{path}: not a valid JSON {what} (nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, a repeated key, an integer of 4300+ digits
        raise error(f"{path}: not a valid JSON {what} ({e})") from None


def _unique_keys(pairs):
    """``json.loads``' object hook: the object's dict, or ``ValueError`` naming a repeated key."""
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the key {key!r} appears twice in one object")
        result[key] = value
    return result
