"""Reading and writing the official ELMo weight file (bilm-tf's HDF5 layout).

Every dataset maps to exactly one model variable through :func:`weight_table`; the table is
the only place that knows the layout, and each entry states its transform:

======================================================  ==================================
dataset                                                 variable (transform)
======================================================  ==================================
``char_embed`` (261, E)                                 char embeddings (262, E): a zero
                                                        row for id 0 is prepended
``CNN/W_cnn_{i}`` (1, w, E, n), ``CNN/b_cnn_{i}``       CNN kernel ``W[0]``, bias
``CNN_high_{k}/{W,b}_{carry,transform}``                highway (``y = x @ W``, as stored)
``CNN_proj/W_proj``, ``b_proj``                         token projection
``RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0``       LSTM kernel over ``[x; h]``, gate
                                                        columns i, j, f, o
``.../B``                                               LSTM bias (forget bias +1 is added
                                                        at run time, never stored)
``.../W_P_0``                                           LSTM output projection
======================================================  ==================================

``d`` is 0 for the forward and 1 for the backward direction.
"""

import dataclasses
import os
import typing

import h5py
import numpy as np

from elmo_tf import files
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import WeightFileError


@dataclasses.dataclass(frozen=True)
class WeightEntry:
    dataset: str
    variable: typing.Any
    file_shape: tuple
    from_file: typing.Callable  # file array -> variable value
    to_file: typing.Callable  # variable value -> file array


def _same(x):
    return x


def weight_table(model):
    """Returns the ``WeightEntry`` list that maps every dataset to one variable of ``model``."""
    encoder = model.character_encoder
    table = []

    def add(dataset, variable, file_shape=None, from_file=_same, to_file=_same):
        shape = tuple(variable.shape) if file_shape is None else tuple(file_shape)
        table.append(WeightEntry(dataset, variable, shape, from_file, to_file))

    embeddings = encoder.char_embedding.embeddings
    n_chars, char_dim = embeddings.shape
    # The file has no row for id 0 (a padded token position); its row is zeros.
    add(
        "char_embed",
        embeddings,
        (n_chars - 1, char_dim),
        from_file=lambda w: np.concatenate([np.zeros([1, w.shape[1]], w.dtype), w]),
        to_file=lambda v: v[1:],
    )
    for i, (kernel, bias) in enumerate(zip(encoder.cnn.kernels, encoder.cnn.biases)):
        # Written by a Conv2D over (1, chars): the kernel has a leading height axis of 1.
        add(
            f"CNN/W_cnn_{i}",
            kernel,
            (1, *kernel.shape),
            from_file=lambda w: w[0],
            to_file=lambda v: v[None],
        )
        add(f"CNN/b_cnn_{i}", bias)
    for k, highway in enumerate(encoder.highways):
        # bilm-tf's "carry" gate multiplies the transformed input (see Highway's docstring).
        add(f"CNN_high_{k}/W_carry", highway.carry_kernel)
        add(f"CNN_high_{k}/b_carry", highway.carry_bias)
        add(f"CNN_high_{k}/W_transform", highway.transform_kernel)
        add(f"CNN_high_{k}/b_transform", highway.transform_bias)
    if encoder.projection is not None:
        add("CNN_proj/W_proj", encoder.projection.kernel)
        add("CNN_proj/b_proj", encoder.projection.bias)
    for direction, cells in enumerate((model.bilstm.forward_cells, model.bilstm.backward_cells)):
        for layer, cell in enumerate(cells):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            add(f"{prefix}/W_0", cell.kernel)  # rows [x ; h_prev], gate columns i, j, f, o
            add(f"{prefix}/B", cell.bias)  # without the +1.0 forget bias
            add(f"{prefix}/W_P_0", cell.projection_kernel)
    return table


def _open(path, mode):
    path = os.fspath(path)
    if mode == "r" and not os.path.exists(path):
        raise WeightFileError(f"{path}: weight file not found")
    try:
        return h5py.File(path, mode)
    except OSError as e:
        raise WeightFileError(f"{path}: not a readable HDF5 weight file ({e})") from None


def load_weights(model, path):
    """Loads an official-layout HDF5 file into ``model`` (an ``ELMo``).

    Every dataset is checked before any variable is assigned, so a bad file leaves the model
    unchanged. Errors name the file, the dataset, and the expected and found shapes.
    """
    path = os.fspath(path)
    values = []
    with _open(path, "r") as f:
        for entry in weight_table(model):
            if entry.dataset not in f or not isinstance(f[entry.dataset], h5py.Dataset):
                raise WeightFileError(f"{path}: missing dataset '{entry.dataset}'")
            dataset = f[entry.dataset]
            found = tuple(dataset.shape)
            expected = entry.file_shape
            if entry.dataset == "char_embed" and found == tuple(entry.variable.shape):
                # A file that already holds the id-0 row (262 rows) is taken as is.
                values.append((entry.variable, dataset[...].astype(np.float32)))
                continue
            if found != expected:
                raise WeightFileError(
                    f"{path}: dataset '{entry.dataset}' has shape {found}, expected {expected} "
                    "for this options file"
                )
            if not np.issubdtype(dataset.dtype, np.floating):
                raise WeightFileError(
                    f"{path}: dataset '{entry.dataset}' has dtype {dataset.dtype}, expected float"
                )
            array = dataset[...].astype(np.float32)
            if not np.all(np.isfinite(array)):
                raise WeightFileError(f"{path}: dataset '{entry.dataset}' holds NaN or inf")
            values.append((entry.variable, entry.from_file(array)))
    for variable, value in values:
        variable.assign(value)
    return model


def save_weights(model, path):
    """Writes ``model``'s weights in the official layout (readable by bilm-tf and AllenNLP).

    The file is written next to ``path`` and renamed into place (``files.atomic_path``), so
    an interrupted save never leaves a partial file under that name.
    """
    with files.atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        for entry in weight_table(model):
            value = entry.to_file(np.asarray(entry.variable.numpy(), np.float32))
            f.create_dataset(entry.dataset, data=value)


def load_pretrained(options_file, weight_file, **kwargs):
    """Builds an ``ELMo`` from an official options.json and weight file.

    Keyword arguments go to ``ELMo`` (``num_output_representations``, ``do_layer_norm``...).
    """
    from elmo_tf.models import ELMo

    config = ElmoConfig.from_file(options_file)
    model = ELMo(config, **kwargs)
    load_weights(model, weight_file)
    return model
