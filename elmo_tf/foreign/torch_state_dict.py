"""Reading a PyTorch ``state_dict`` file as data, without PyTorch and without running its code.

A ``torch.save`` file is a pickle: ``pickle.load`` (or ``torch.load`` without
``weights_only=True``) calls whatever the file names, so a crafted model file runs code on the
machine that loads it. This reader is a ``pickle.Unpickler`` whose ``find_class`` returns only
stand-ins of ours from an allow-list (``_ALLOWED``: an ``OrderedDict``, PyTorch's tensor
rebuild functions, its storage types) and whose ``persistent_load`` accepts only a storage
reference; any other global (``os.system``, ``builtins.eval``...) ends the load in one line,
before anything it names is looked up. The stand-ins build nothing but descriptions
(``_TensorRef``); the values are read afterwards with NumPy, every size checked against the
file's length before anything is allocated.

Two layouts:

- the legacy one (PyTorch < 1.6, and ``_use_new_zipfile_serialization=False``; what
  ELMoForManyLangs' models are): five pickles back to back (the magic number
  ``0x1950a86a20f9469cfc6c``, the protocol version 1001, ``sys_info``, the object, the sorted
  list of storage keys), then each storage as an int64 element count and its little-endian
  values, in the keys' order, and nothing after;
- the zip one (PyTorch >= 1.6): ``<name>/data.pkl`` and one member ``<name>/data/<key>`` per
  storage, read through the same unpickler.

``read_state_dict(path)`` reads a file, ``parse_state_dict(data)`` bytes (the fuzz target):
both return ``{name: numpy array}`` in the file's order, or raise ``ForeignModelError`` naming
the file and what is wrong with it.
"""

import collections
import io
import lzma
import math
import os
import pickle
import pickletools
import zipfile
import zlib

import numpy as np

from elmo_tf import checks
from elmo_tf.errors import ForeignModelError
from elmo_tf.system import untrusted_files

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
# The largest state_dict file read: ELMoForManyLangs' encoder.pkl is about 300 MB.
MAX_FILE_BYTES = 4 << 30
# The most values the tensors may hold together, against the values the storages hold: a
# state_dict's tensors are its storages (tied weights share one: twice); a file whose many
# tensors view one storage would otherwise cost far more memory than its size.
MAX_VIEW_FACTOR = 4
MAX_TENSOR_RANK = 8
_FILE_KIND = "PyTorch state_dict file"

# PyTorch's storage types and the little-endian NumPy dtype of their values.
_DTYPES = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "BFloat16Storage": "<u2",  # NumPy has no bfloat16: the top half of a float32, widened
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}


class _Refused(Exception):
    """Raised inside the unpickler; ``_read`` turns it into one ``ForeignModelError`` line."""


class _Immutable:
    """A stand-in a pickle cannot change: ``BUILD`` on it is refused (it would otherwise set
    attributes on an object every later load shares)."""

    __slots__ = ()

    def __setstate__(self, state):
        raise _Refused("sets attributes of one of PyTorch's names")


class _StorageType(_Immutable):
    """What ``torch.FloatStorage`` (and the others) stand for: a dtype, never called."""

    __slots__ = ("dtype",)

    def __init__(self, name):  # pragma: no mutate block, run at import, before mutmut forks
        self.dtype = np.dtype(_DTYPES[name])


class _Function(_Immutable):
    """One of PyTorch's rebuild functions, as our own function."""

    __slots__ = ("function",)

    def __init__(self, function):  # pragma: no mutate block, run at import, before mutmut forks
        self.function = function

    def __call__(self, *args):
        return self.function(*args)


class _Storage:
    """A storage the file holds: its key, dtype and element count; ``values`` once read."""

    def __init__(self, key, dtype, numel):
        self.key, self.dtype, self.numel = key, dtype, numel
        self.values = None  # pragma: no mutate, equivalent: every read sets it before any use

    def __setstate__(self, state):
        raise _Refused("sets attributes of a storage")


class _TensorRef:
    """A tensor as ``_rebuild_tensor_v2`` describes it: a view of a storage."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __setstate__(self, state):
        raise _Refused("sets attributes of a tensor")


class _StateDict(collections.OrderedDict):
    """``collections.OrderedDict``; its ``BUILD`` may set ``_metadata`` only (PyTorch's
    per-module versions), which is kept apart from the entries and never used."""

    def __setstate__(self, state):
        if not isinstance(state, dict) or set(state) - {"_metadata"}:
            raise _Refused("sets attributes of an OrderedDict other than _metadata")


def _rebuild_tensor(storage, offset, size, stride, *rest):
    """``torch._utils._rebuild_tensor`` (4 arguments) and ``_rebuild_tensor_v2`` (6 or 7:
    ``requires_grad``, ``backward_hooks``, ``metadata``): the view only."""
    if not isinstance(storage, _Storage):
        raise _Refused("rebuilds a tensor from something that is not a storage")
    if len(rest) > 3:
        raise _Refused(f"rebuilds a tensor with {4 + len(rest)} arguments")
    if len(rest) >= 2 and rest[1]:  # backward hooks: code to run, never in a state_dict
        raise _Refused("holds a tensor with backward hooks")
    return _TensorRef(storage, offset, size, stride)


def _rebuild_parameter(
    data,
    requires_grad=False,  # pragma: no mutate, equivalent: never read (a parameter is its tensor)
    backward_hooks=None,
    *rest,
):
    """``torch._utils._rebuild_parameter``: an ``nn.Parameter`` is its tensor here."""
    if not isinstance(data, _TensorRef) or backward_hooks or rest:
        raise _Refused("rebuilds a parameter from something that is not a plain tensor")
    return data


# The names messages give the stand-ins: what the file refers to.
_PUBLIC_NAMES = {
    _StateDict: "OrderedDict",
    _TensorRef: "tensor",
    _Storage: "storage",
    _StorageType: "storage type",
    _Function: "rebuild function",
}
# Python's own messages name the class of a method they call ("OrderedDict.__setstate__()
# missing 1 required positional argument"): the file's name, not ours.
_StateDict.__qualname__ = _StateDict.__name__ = "OrderedDict"

# (module, name) -> the stand-in returned for it: the only names a file may refer to.
_ALLOWED = {
    ("collections", "OrderedDict"): _StateDict,
    ("torch._utils", "_rebuild_tensor"): _Function(_rebuild_tensor),
    ("torch._utils", "_rebuild_tensor_v2"): _Function(_rebuild_tensor),
    ("torch._utils", "_rebuild_parameter"): _Function(_rebuild_parameter),
    **{("torch", name): _StorageType(name) for name in _DTYPES},
}


class _Unpickler(pickle.Unpickler):
    """The restricted unpickler: the allow-list's stand-ins, storage references only.

    ``storages`` collects the storages the pickle refers to; ``zip_layout`` says whether a
    reference has the zip layout's 5 fields (else the legacy 6, with no view metadata).
    """

    def __init__(
        self,
        file,
        storages=None,
        zip_layout=False,  # pragma: no mutate, equivalent: _load passes every argument
        max_bytes=0,  # pragma: no mutate, equivalent: _load passes every argument
    ):
        super().__init__(file)
        self.storages = storages
        self.zip_layout = zip_layout
        self.max_bytes = max_bytes

    def find_class(self, module, name):
        # Every route to a callable (GLOBAL, STACK_GLOBAL, EXT codes) comes here.
        stand_in = _ALLOWED.get((module, name))
        if stand_in is None:
            shown = checks.shown(  # pragma: no mutate, equivalent: quote=None is as false as False
                f"{module}.{name}", 60, quote=False
            )
            raise _Refused(
                f"refers to {shown}, which a state_dict never holds (loading the file with "
                "pickle would run it)"
            )
        return stand_in

    def persistent_load(self, pid):
        fields = 5 if self.zip_layout else 6
        if self.storages is None:
            raise _Refused("refers to a storage in its header")
        if not (
            isinstance(pid, tuple) and len(pid) == fields and pid[0] in ("storage", b"storage")
        ):
            raise _Refused(f"holds a reference that is not a storage ({_printable(pid)})")
        _, storage_type, key, _location, numel, *view = pid
        if not isinstance(storage_type, _StorageType):
            raise _Refused("holds a storage of no known type")
        if not isinstance(key, str) or len(key) > 256:
            raise _Refused(f"holds a storage key that is not a short string ({_printable(key)})")
        if type(numel) is not int or not 0 <= numel * storage_type.dtype.itemsize <= self.max_bytes:
            raise _Refused(
                f"holds storage {_printable(key)} of {_printable(numel)} elements, more than "
                "the file's size allows"
            )
        if view and view[0] is not None:
            raise _Refused(f"holds storage {_printable(key)} as a view of another storage")
        made = _Storage(key, storage_type.dtype, numel)  # pragma: no mutate, equivalent: key unread
        storage = self.storages.setdefault(key, made)
        if storage.dtype != storage_type.dtype or storage.numel != numel:
            raise _Refused(f"refers to storage {_printable(key)} with two types or sizes")
        return storage


def _type_name(value):
    """The name of ``value``'s type as the file names it (a stand-in's is PyTorch's)."""
    return _PUBLIC_NAMES.get(type(value), type(value).__name__)


def _printable(value):
    """A pickle-built value as a message shows it: a string, bytes or a number (cut), any other
    value by its type alone. A pickle's containers may share their children through the memo,
    so formatting one whole can take time and memory exponential in the file's size."""
    if value is None or isinstance(value, str | bytes | bool | float):
        return checks.shown(value, 60)
    if isinstance(value, int):
        if value.bit_length() > 64:
            return "a very large integer"
        return checks.shown(value, 60)  # pragma: no mutate, equivalent: 64 bits are 20 digits
    name = _type_name(value)
    vowel = name[0].lower() in "aeiou"  # pragma: no mutate, equivalent: lower() gives no "X"
    article = "an" if vowel else "a"
    if isinstance(value, tuple | list | dict):
        return f"{article} {name} of {len(value)} items"
    return f"{article} {name}"


def read_state_dict(path, max_bytes=MAX_FILE_BYTES, check=None):
    """``{name: numpy array}`` of the state_dict file ``path`` (either layout), in the file's
    order; ``ForeignModelError`` naming the file for anything else (a file that is no
    state_dict, one that refers to code, sizes that disagree with the file's length).

    ``check(tensors)``, where the caller knows what the file must hold, is called with
    ``{name: (shape, dtype)}`` once the pickle is read and before any tensor's values are: it
    raises for tensors missing, extra or of the wrong shape, so that none is allocated."""
    path = os.fspath(path)
    untrusted_files.check_readable(path, _FILE_KIND, ForeignModelError)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise ForeignModelError(
                f"{path}: {size:,} bytes, more than the {max_bytes:,} a {_FILE_KIND} may have"
            )
        return _read(f, size, path, check)


def parse_state_dict(data, source="state_dict", check=None):
    """``read_state_dict`` of ``data`` (bytes); errors name ``source``. The fuzz target."""
    return _read(io.BytesIO(bytes(data)), len(data), source, check)


def _read(f, size, source, check=None):
    head = f.read(4)
    f.seek(0)

    def described(obj):  # the tensors as the pickle describes them, before any value is read
        tensors = _tensors(obj)
        if check is not None:
            check(
                {
                    name: (ref.size, _widened_dtype(ref.storage.dtype))
                    for name, ref in tensors.items()
                }
            )
        return tensors

    try:
        if head == b"PK\x03\x04":
            tensors, storages = _read_zip(f, size, described)
        else:
            tensors, storages = _read_legacy(f, size, described)
        return _materialize(tensors, storages)
    except ForeignModelError:
        raise
    except _Refused as e:
        raise ForeignModelError(f"{source}: not loaded: the {_FILE_KIND} {e}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError,
            IndexError, OverflowError, MemoryError, RecursionError, zipfile.BadZipFile,
            UnicodeDecodeError, NotImplementedError, RuntimeError, zlib.error,
            lzma.LZMAError) as e:  # fmt: skip  # zipfile's, for damaged or encrypted members
        detail = checks.error_text(e, 120)
        raise ForeignModelError(
            f"{source}: not a {_FILE_KIND} in PyTorch's legacy or zip layout ({detail})"
        ) from None


# Protocol 5's out-of-band buffer opcodes: never in a state_dict (PyTorch pickles with protocol
# 2), and a damaged stream using them makes CPython print a SystemError of its own on failure.
_REFUSED_OPCODES = ("BYTEARRAY8", "NEXT_BUFFER", "READONLY_BUFFER")


# The opcodes that store the value on top of the stack in the memo: PUT at the index given,
# MEMOIZE at the memo's length.
_MEMO_PUTS = ("PUT", "BINPUT", "LONG_BINPUT")
_MEMOIZE = "MEMOIZE"


def _load(
    f,
    storages=None,
    zip_layout=False,
    max_bytes=0,  # pragma: no mutate, equivalent: read only with storages, which pass it
):
    """One pickle from ``f``: its opcodes looked at first (``pickletools.genops``, which only
    reads), then unpickled from the same place by the restricted unpickler.

    A writer numbers the memo as it fills it (``pickle`` puts the n-th value at index n), so
    an index beyond the values stored so far is refused before unpickling: CPython's
    unpickler grows its memo table to twice the largest index, zero-filled (4 GB for a
    10-byte pickle naming index 0x0FFFFFFF)."""
    start = f.tell()
    stored = 0
    for opcode, argument, _ in pickletools.genops(f):
        if opcode.name in _REFUSED_OPCODES:
            raise _Refused(f"uses the pickle opcode {opcode.name}, which a state_dict never holds")
        if opcode.name in _MEMO_PUTS and not 0 <= argument <= stored:
            raise _Refused(
                f"stores a value at memo index {argument:,} after {stored:,} values (a writer "
                "numbers them in order)"
            )
        stored += opcode.name in _MEMO_PUTS or opcode.name == _MEMOIZE
    f.seek(start)
    return _Unpickler(f, storages, zip_layout, max_bytes).load()


def _read_legacy(f, size, described):
    magic = _load(f)
    if type(magic) is not int or magic != MAGIC_NUMBER:
        raise _Refused("does not start with PyTorch's magic number")
    version = _load(f)
    if version != PROTOCOL_VERSION:
        raise _Refused(f"has protocol version {_printable(version)}, not {PROTOCOL_VERSION}")
    sys_info = _load(f)
    if not isinstance(sys_info, dict) or sys_info.get("little_endian") is not True:
        raise _Refused("was written on a big-endian machine, or says nothing of its byte order")
    storages = {}
    obj = described(_load(f, storages, max_bytes=size))
    keys = _load(f)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise _Refused("has no list of storage keys after its object")
    if sorted(keys) != sorted(storages) or len(set(keys)) != len(keys):
        raise _Refused("lists other storages than its object refers to")
    for key in keys:
        storage = storages[key]
        count = f.read(8)
        if len(count) != 8:
            raise _Refused(f"ends before storage {_printable(key)}")
        numel = int.from_bytes(count, "little", signed=True)
        if numel != storage.numel:
            raise _Refused(
                f"has storage {_printable(key)} of {numel} elements where its object says "
                f"{storage.numel}"
            )
        nbytes = numel * storage.dtype.itemsize
        if nbytes > size - f.tell():
            raise _Refused(f"ends inside storage {_printable(key)}")
        storage.values = np.frombuffer(f.read(nbytes), storage.dtype)
    if f.read(1):  # pragma: no mutate, equivalent: read(2) is as true as read(1)
        raise _Refused("has bytes after its last storage")
    return obj, storages


def _read_zip(f, size, described):
    """The zip layout: one top-level folder holding ``data.pkl`` and ``data/<key>``, each
    storage stored as it is (``torch.save`` compresses none): what the storages hold together
    is bounded by the file's size before any is read."""
    with zipfile.ZipFile(f) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            raise _Refused("(a zip) names one member twice")
        prefixes = {
            name.split("/", 1)[0]  # pragma: no mutate, equivalent: [0] whatever the maxsplit
            for name in names
        }
        if len(prefixes) != 1 or not all("/" in name for name in names):
            raise _Refused("(a zip) does not hold one folder, as torch.save writes it")
        prefix = prefixes.pop() + "/"
        members = {info.filename[len(prefix) :]: info for info in infos}
        if "data.pkl" not in members:
            raise _Refused("(a zip) has no data.pkl")
        if (order := members.get("byteorder")) is not None:
            if _member(archive, order, 16) not in (b"little", b"little\n"):
                raise _Refused("(a zip) was written on a big-endian machine")
        storages = {}
        pickled = _member(archive, members["data.pkl"], size)
        obj = described(_load(io.BytesIO(pickled), storages, zip_layout=True, max_bytes=size))
        total = 0
        for key, storage in storages.items():
            shown = "data/" + checks.shown(  # pragma: no mutate, equivalent: quote=None is False
                key, 60, quote=False
            )
            info = members.get(f"data/{key}")
            if info is None:
                raise _Refused(f"(a zip) has no {shown}")
            if info.compress_type != zipfile.ZIP_STORED:
                raise _Refused(f"(a zip) has {shown} compressed; torch.save stores storages as is")
            nbytes = storage.numel * storage.dtype.itemsize
            if info.file_size != nbytes:
                raise _Refused(f"(a zip) has {shown} of {info.file_size} bytes, expected {nbytes}")
            total += nbytes
        if total > size:
            raise _Refused(
                f"(a zip) has storages of {total:,} bytes in all, more than its {size:,} bytes"
            )
        for key, storage in storages.items():
            info = members[f"data/{key}"]
            storage.values = np.frombuffer(_member(archive, info, info.file_size), storage.dtype)
    return obj, storages


def _member(archive, info, max_bytes):
    """A zip member's bytes, read no further than ``max_bytes`` (its declared size is not
    trusted: a compressed member could expand far beyond it)."""
    if info.file_size > max_bytes:
        raise _Refused(f"(a zip) has a member {_printable(info.filename)} larger than the file")
    with archive.open(info) as member:
        data = member.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _Refused(f"(a zip) has a member {_printable(info.filename)} larger than declared")
    return data


def _tensors(obj):
    """The ``{name: _TensorRef}`` of the unpickled object, each reference's size and stride
    checked as numbers (no value is read)."""
    if not isinstance(obj, dict):
        raise _Refused(f"holds a {_type_name(obj)}, not a state_dict")
    for name, ref in obj.items():
        if not isinstance(name, str):
            raise _Refused(f"has an entry named {_printable(name)}, not a string")
        if not isinstance(ref, _TensorRef):
            raise _Refused(f"holds {_type_name(ref)} under {_printable(name)}, not a tensor")
        shown, size, stride = _printable(name), ref.size, ref.stride
        if not (isinstance(size, tuple | list) and isinstance(stride, tuple | list)):
            raise _Refused(f"describes tensor {shown} with a size or stride that is not a tuple")
        if len(size) != len(stride) or len(size) > MAX_TENSOR_RANK:
            raise _Refused(
                f"describes tensor {shown} with {len(size)} sizes and {len(stride)} strides"
            )
        if not all(type(v) is int and v >= 0 for v in (ref.offset, *size, *stride)):
            raise _Refused(f"describes tensor {shown} with a negative or non-integer size")
        ref.size, ref.stride = tuple(size), tuple(stride)
    return obj


def _materialize(tensors, storages):
    """The ``{name: array}`` of the tensors, each a copy of its view."""
    budget = MAX_VIEW_FACTOR * sum(s.numel for s in storages.values()) + 1
    result = collections.OrderedDict()
    for name, ref in tensors.items():
        array = _view(ref, name)
        budget -= array.size
        if budget < 0:
            raise _Refused("holds more values in its tensors than its storages hold")
        result[name] = _widened(array.copy(), ref.storage)
    return result


def _view(ref, name):
    storage, offset, size, stride = ref.storage, ref.offset, ref.size, ref.stride
    count = math.prod(size)
    if count == 0:
        return np.zeros(size, storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.numel or count > storage.numel:
        raise _Refused(
            f"describes tensor {_printable(name)} {size} beyond its storage of "
            f"{storage.numel} elements"
        )
    itemsize = storage.dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        storage.values[offset:], shape=size, strides=[s * itemsize for s in stride]
    )


def _widened_dtype(dtype):
    """The dtype of the arrays read from a storage of ``dtype``: ``_widened``'s."""
    if dtype == _DTYPES["BFloat16Storage"]:
        return np.dtype(np.float32)
    return dtype.newbyteorder("=")


def _widened(array, storage):
    """``array`` in native byte order; bfloat16 (stored as its 16 bits) as float32."""
    if storage.dtype == _DTYPES["BFloat16Storage"]:  # the only 16-bit unsigned storage
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(array.dtype.newbyteorder("="))
