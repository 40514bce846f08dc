"""Named models: the bundled trained one and the published architectures.

``ELMo.from_preset(name_or_dir)`` resolves its argument here: the name of the model bundled
with the package (``"sotu"``, alias ``"default"``; ``bundled``), the name of a published
architecture (``"small"``, ``"medium"``, ``"original"`` alias ``"full"``: configuration only,
since their weights are not bundled), or a directory holding ``options.json`` and
``weights.hdf5``.

``TRAINING_DEFAULT`` is the architecture ``elmo-tf train`` builds when it is given none.
"""

import os

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import PresetError
from elmo_tf.presets import bundled

_OFFICIAL_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


def _published(projection_dim, lstm_dim, n_highway):
    return ElmoConfig(
        filters=_OFFICIAL_FILTERS,
        char_embedding_dim=16,
        n_highway=n_highway,
        activation="relu",
        projection_dim=projection_dim,
        lstm_dim=lstm_dim,
        n_lstm_layers=2,
        cell_clip=3.0,
        proj_clip=3.0,
        use_skip_connections=True,
    )


PRESETS = {
    # elmo_2x1024_128_2048cnn_1xhighway ("small")
    "small": _published(projection_dim=128, lstm_dim=1024, n_highway=1),
    # elmo_2x2048_256_2048cnn_1xhighway ("medium")
    "medium": _published(projection_dim=256, lstm_dim=2048, n_highway=1),
    # elmo_2x4096_512_2048cnn_2xhighway ("original", also the 5.5B model)
    "original": _published(projection_dim=512, lstm_dim=4096, n_highway=2),
}
PRESETS["full"] = PRESETS["original"]

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


def preset_files(name_or_dir):
    """``(options_file, weight_file)`` of a bundled model or a model directory, else ``None``
    for a published architecture; raises ``PresetError`` for anything else."""
    name = os.fspath(name_or_dir)
    if name in bundled.BUNDLED_MODELS:
        return bundled.model_files(bundled.BUNDLED_MODELS[name])
    if name in PRESETS:
        return None
    if os.path.isdir(name):
        return _directory_files(name)
    raise PresetError(
        f"{name!r} is neither a bundled model ({', '.join(sorted(bundled.BUNDLED_MODELS))}), "
        f"a published architecture ({', '.join(sorted(PRESETS))}) nor a directory with "
        f"{bundled.OPTIONS_FILE} and {bundled.WEIGHTS_FILE}"
    )


# Weight file names in a model directory: ours, then simple_elmo's and the NLPL repository's.
WEIGHT_FILE_NAMES = (bundled.WEIGHTS_FILE, "model.hdf5")


def _directory_files(directory):
    options = os.path.join(directory, bundled.OPTIONS_FILE)
    weights = [os.path.join(directory, f) for f in WEIGHT_FILE_NAMES]
    found = [w for w in weights if os.path.isfile(w)]
    if not os.path.isfile(options) or not found:
        missing = [options] if not os.path.isfile(options) else []
        missing += [] if found else [" or ".join(weights)]
        raise PresetError(f"{directory}: a model directory needs {', '.join(missing)}")
    return options, found[0]


def preset(name):
    """Returns the ElmoConfig of a published model: small, medium, original (alias full).

    Raises ``PresetError`` (a ``ValueError``) for any other name.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise PresetError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}") from None
