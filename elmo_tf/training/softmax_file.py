"""The softmax of a trained biLM as an HDF5 file (``softmax.hdf5``): its weights ``(V, P)`` and
bias ``(V,)``, in float32 or float16, and how the biLM read text."""

import h5py
import numpy as np

from elmo_tf.errors import CheckpointError
from elmo_tf.formats.weight_file import open_untrusted
from elmo_tf.system import files


def save_softmax(model, path, dtype="float32"):
    """Writes the softmax ``softmax/W`` ``(V, P)`` and ``softmax/b`` ``(V,)`` to HDF5,
    replacing ``path`` atomically. ``dtype`` ``"float16"`` halves the file (the weights are
    rounded to float16; :func:`load_softmax` reads them back as float32). The file's
    ``reset_state_per_sentence`` attribute records how the biLM reads text, so that
    ``elmo-tf evaluate`` reads it the same way."""
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype must be 'float32' or 'float16', got {dtype!r}")
    with files.atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.create_dataset("softmax/W", data=np.asarray(model.softmax_weights.numpy(), dtype))
        f.create_dataset("softmax/b", data=np.asarray(model.softmax_bias.numpy(), np.float32))
        f.attrs["reset_state_per_sentence"] = bool(model.reset_state_per_sentence)


def softmax_reads_per_sentence(path):
    """The ``reset_state_per_sentence`` recorded in a softmax file (``False`` if absent)."""
    with open_untrusted(path) as f:
        return bool(f.attrs.get("reset_state_per_sentence", False))


def load_softmax(model, path):
    """Loads a file written by :func:`save_softmax`; raises ``CheckpointError`` on a misfit."""
    expected = {
        "softmax/W": tuple(model.softmax_weights.shape),
        "softmax/b": tuple(model.softmax_bias.shape),
    }

    try:
        with open_untrusted(path) as f:
            values = {}
            for name, shape in expected.items():
                if name not in f:
                    raise CheckpointError(f"{path}: missing dataset '{name}'")
                if tuple(f[name].shape) != shape:
                    raise CheckpointError(
                        f"{path}: dataset '{name}' has shape {tuple(f[name].shape)}, expected "
                        f"{shape} for this vocabulary"
                    )
                if f[name].dtype not in (np.float16, np.float32):
                    raise CheckpointError(
                        f"{path}: dataset '{name}' has dtype {f[name].dtype}, expected float32 "
                        "or float16"
                    )
                values[name] = f[name][...].astype(np.float32)
                if not np.isfinite(values[name]).all():
                    raise CheckpointError(f"{path}: dataset '{name}' holds NaN or infinity")
    except OSError as e:
        raise CheckpointError(f"{path}: not a readable HDF5 file ({e})") from None
    model.softmax_weights.assign(values["softmax/W"])
    model.softmax_bias.assign(values["softmax/b"])
