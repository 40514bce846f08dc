"""Writing PyTorch state_dict files without PyTorch, for the reader's tests.

``legacy_bytes(tensors)`` writes the legacy (non-zip) layout ``torch.save(...,
_use_new_zipfile_serialization=False)`` writes (PyTorch's ``_legacy_save``), ``zip_bytes`` the
zip layout; a tensor is a ``Tensor`` (a NumPy array viewed through a storage, with an offset
and strides) or a NumPy array (its own contiguous storage). The pickles refer to
``torch._utils._rebuild_tensor_v2`` and ``torch.FloatStorage`` by name, as PyTorch's do: while
one is written, stand-in modules named ``torch`` and ``torch._utils`` sit in ``sys.modules``
(the pickler checks that a name it writes can be imported), and are taken out after.
"""

import collections
import contextlib
import io
import os
import pickle
import sys
import types
import zipfile

import numpy as np

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
STORAGE_TYPES = {
    np.dtype("float32"): "FloatStorage",
    np.dtype("float64"): "DoubleStorage",
    np.dtype("float16"): "HalfStorage",
    np.dtype("int64"): "LongStorage",
    np.dtype("int32"): "IntStorage",
    np.dtype("uint8"): "ByteStorage",
}


class Storage:
    """A storage: its values (1-D) and the key it is saved under."""

    def __init__(self, values, key):
        self.values = np.ascontiguousarray(values).reshape(-1)
        self.key = key


class Tensor:
    """A view of ``storage``: ``offset`` and ``stride`` in elements, as PyTorch's;
    ``backward_hooks`` (``{id: hook}``) as a tensor that had hooks registered pickles them."""

    def __init__(self, storage, offset, size, stride, backward_hooks=None):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.backward_hooks = backward_hooks or {}


def _rebuild_tensor_v2(*args):  # written by name only, never called
    raise AssertionError("the stand-in is never called")


@contextlib.contextmanager
def _torch_names():
    """Stand-in ``torch`` and ``torch._utils`` modules, so that the pickler writes their names."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    _rebuild_tensor_v2.__module__ = "torch._utils"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    classes = {}
    for name in STORAGE_TYPES.values():
        classes[name] = type(name, (), {"__module__": "torch"})
        setattr(torch, name, classes[name])
    saved = {k: sys.modules.get(k) for k in ("torch", "torch._utils")}
    sys.modules.update({"torch": torch, "torch._utils": utils})
    try:
        yield classes
    finally:
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module


def _as_tensors(tensors):
    """``{name: Tensor}``: an array becomes a contiguous tensor of its own storage."""
    found = collections.OrderedDict()
    for i, (name, value) in enumerate(tensors.items()):
        if isinstance(value, np.ndarray):
            array = np.array(value, order="C")  # 0-d stays 0-d (ascontiguousarray: 1-d)
            strides = [s // array.itemsize for s in array.strides]
            value = Tensor(Storage(array, f"{1000 + i}"), 0, array.shape, strides)
        found[name] = value
    return found


def _main_pickle(tensors, zip_layout, metadata):
    storages = {}
    with _torch_names() as classes:

        class Pickler(pickle.Pickler):
            def persistent_id(self, obj):
                if not isinstance(obj, Storage):
                    return None
                storages[obj.key] = obj
                kind = classes[STORAGE_TYPES[obj.values.dtype]]
                if zip_layout:
                    return ("storage", kind, obj.key, "cpu", obj.values.size)
                return ("storage", kind, obj.key, "cpu", obj.values.size, None)

            def reducer_override(self, obj):
                if isinstance(obj, Tensor):
                    args = (obj.storage, obj.offset, tuple(obj.size), tuple(obj.stride), False,
                            collections.OrderedDict(obj.backward_hooks))  # fmt: skip
                    return _rebuild_tensor_v2, args
                return NotImplemented

        state = collections.OrderedDict(tensors)
        if metadata:  # what a module's state_dict() carries: pickled with a BUILD
            state._metadata = collections.OrderedDict([("", {"version": 1})])
        out = io.BytesIO()
        Pickler(out, protocol=2).dump(state)
    return out.getvalue(), storages


def legacy_bytes(tensors, metadata=True, sys_info=None, trailing=b""):
    """The legacy layout of ``tensors`` (``{name: Tensor or array}``)."""
    main, storages = _main_pickle(_as_tensors(tensors), False, metadata)
    info = sys_info or {
        "protocol_version": 1001,
        "little_endian": True,
        "type_sizes": {"short": 2, "int": 4, "long": 4},
    }
    keys = sorted(storages)
    parts = [pickle.dumps(MAGIC_NUMBER, 2), pickle.dumps(1001, 2), pickle.dumps(info, 2), main]
    parts.append(pickle.dumps(keys, 2))
    for key in keys:
        values = storages[key].values.astype(storages[key].values.dtype.newbyteorder("<"))
        parts += [np.int64(values.size).tobytes(), values.tobytes()]
    return b"".join(parts) + trailing


def legacy_with_main(main):
    """A legacy file whose object pickle is ``main`` (bytes), with no storages."""
    info = {"protocol_version": 1001, "little_endian": True}
    head = [pickle.dumps(MAGIC_NUMBER, 2), pickle.dumps(1001, 2), pickle.dumps(info, 2)]
    return b"".join(head) + main + pickle.dumps([], 2)


def zip_bytes(tensors, folder="archive", byteorder="little", compression=zipfile.ZIP_STORED):
    """The zip layout of ``tensors``, as PyTorch >= 1.6 writes it (members stored; a
    ``byteorder`` of ``"big"`` writes the storages big-endian, as on such a machine;
    ``compression`` compresses the storages, which PyTorch never does)."""
    main, storages = _main_pickle(_as_tensors(tensors), True, True)
    order = "<" if byteorder == "little" else ">"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{folder}/data.pkl", main)
        archive.writestr(f"{folder}/byteorder", byteorder)
        for key, storage in sorted(storages.items()):
            values = storage.values.astype(storage.values.dtype.newbyteorder(order))
            archive.writestr(f"{folder}/data/{key}", values.tobytes(), compress_type=compression)
        archive.writestr(f"{folder}/version", "3\n")
    return out.getvalue()


class WritesMarker:
    """Pickles as a call that creates ``path``: what a hostile model file does."""

    def __init__(self, path, function):
        self.path, self.function = path, function

    def __reduce__(self):
        if self.function == "system":
            return os.system, (f"touch {self.path}",)
        return exec, (f"open({str(self.path)!r}, 'w').close()",)
