"""The model bundled with the package, ``sotu``: what every command uses when it is given none.

``sotu/`` holds a small biLM trained on the U.S. State of the Union addresses before 2010
(public domain): ``options.json`` and ``weights.hdf5`` (the official layout, for
``elmo_tf.load_pretrained``), ``vocab.txt``, ``softmax.hdf5`` and ``MODEL_CARD.md`` (data,
training, held-out perplexity, limitations). ``"default"`` is an alias of ``"sotu"``.

>>> import elmo_tf
>>> model = elmo_tf.ELMo.from_preset("sotu")
"""

import importlib.resources
import os

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import PresetError
from elmo_tf.formats import options_file, weight_file

DEFAULT_MODEL = "sotu"
# preset name -> directory under elmo_tf/presets/
BUNDLED_MODELS = {"sotu": "sotu", "default": DEFAULT_MODEL}
OPTIONS_FILE = options_file.FILE_NAME
WEIGHTS_FILE = weight_file.FILE_NAME


# The architecture a training run gets when it names none (no options file, preset or initial
# weights): the bundled sotu model's, a small biLM (3.0M weights, a 12 MB weights.hdf5) that
# trains on a CPU in hours (about 1,700 positions per second on two cores with a 17.7k
# vocabulary, batch 128, unroll 20).
TRAINING_DEFAULT = ElmoConfig(
    filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256)),
    char_embedding_dim=16,
    n_highway=1,
    activation="relu",
    projection_dim=128,
    lstm_dim=512,
    n_lstm_layers=2,
    cell_clip=3.0,
    proj_clip=3.0,
    use_skip_connections=True,
)


def model_directory(name=DEFAULT_MODEL):
    """The directory of the bundled model ``name`` (a path; it may not exist)."""
    # The package is installed as files (setup.py's package_data), never zipped, so the
    # resource is a real path that h5py can open.
    return os.fspath(importlib.resources.files(__package__) / BUNDLED_MODELS.get(name, name))


def default_model_files():
    """``(options_file, weight_file)`` of the bundled default model, as paths."""
    return model_files(DEFAULT_MODEL)


def model_files(name):
    """``(options_file, weight_file)`` of the bundled model ``name``, as paths.

    Raises ``PresetError`` naming the missing file when the package was installed without
    the model's files.
    """
    directory = model_directory(name)
    files = tuple(os.path.join(directory, f) for f in (OPTIONS_FILE, WEIGHTS_FILE))
    for path in files:
        if not os.path.isfile(path):
            raise PresetError(
                f"{path}: the bundled model is missing (elmo-tf was installed "
                f"without its package data elmo_tf/presets/{BUNDLED_MODELS.get(name, name)}/)"
            )
    return files
