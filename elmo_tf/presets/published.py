"""The published ELMo models: where each lives, its architecture, what it was trained on.

AllenNLP publishes the official files at ``BASE_URL/<folder>/<file>``; ``ELMO_TF_MODEL_BASE_URL``
replaces ``BASE_URL`` for every model (a company mirror, an air-gapped artefact store, tests)
and keeps the ``<folder>/<file>`` layout under it. The models, their sizes and what each was
trained on: docs/models.md (``full`` is an alias of ``original``).
"""

import dataclasses

from elmo_tf.config import ElmoConfig
from elmo_tf.system import environment

BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
# Where AllenNLP code names the same files (its docs and models use both hosts).
ALLENNLP_BASE_URLS = (
    BASE_URL,
    "https://allennlp.s3.amazonaws.com/models/elmo",
    "https://allennlp.s3-us-west-2.amazonaws.com/models/elmo",
)
BASE_URL_VARIABLE = "ELMO_TF_MODEL_BASE_URL"

# The character CNN of every published model: 2048 filters of widths 1 to 7.
_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclasses.dataclass(frozen=True)
class PublishedModel:
    """One published model: its files under ``folder`` and the architecture they hold."""

    name: str
    folder: str
    options_file: str
    weights_file: str
    config: ElmoConfig

    def urls(self, base_url=None):
        """``(options URL, weights URL)`` under ``base_url`` (default: ``model_base_url()``)."""
        base = (base_url or model_base_url()).rstrip("/")
        return (
            f"{base}/{self.folder}/{self.options_file}",
            f"{base}/{self.folder}/{self.weights_file}",
        )

    @property
    def download_bytes(self):
        """The weight file's approximate size: every parameter as float32."""
        return self.config.parameter_count * 4


def _model(name, folder, projection_dim, lstm_dim, n_highway, stem=None, weights="weights"):
    """A model in AllenNLP's naming, ``<folder>/elmo_<stem>_options.json`` and
    ``elmo_<stem>_<weights>.hdf5`` (``stem``: the folder's name by default). Every one has two
    LSTM layers, clips of 3 and skip connections: ``ElmoConfig``'s defaults."""
    stem = f"elmo_{stem or folder}"
    config = ElmoConfig(
        filters=_FILTERS,
        char_embedding_dim=16,
        n_highway=n_highway,
        activation="relu",
        projection_dim=projection_dim,
        lstm_dim=lstm_dim,
    )
    return PublishedModel(name, folder, f"{stem}_options.json", f"{stem}_{weights}.hdf5", config)


# What each was trained on, and its size: docs/models.md.
_ORIGINAL = (512, 4096, 2)
MODELS = {
    model.name: model
    for model in (
        _model("small", "2x1024_128_2048cnn_1xhighway", 128, 1024, 1),
        _model("medium", "2x2048_256_2048cnn_1xhighway", 256, 2048, 1),
        _model("original", "2x4096_512_2048cnn_2xhighway", *_ORIGINAL),
        _model("original_5.5b", "2x4096_512_2048cnn_2xhighway_5.5B", *_ORIGINAL),
        _model(
            "pubmed",
            "contributed/pubmed",
            *_ORIGINAL,
            stem="2x4096_512_2048cnn_2xhighway",
            weights="weights_PubMed_only",
        ),
    )
}
ALIASES = {"full": "original"}


def model_base_url():
    """Where the published models live: ``ELMO_TF_MODEL_BASE_URL`` if set, else AllenNLP's."""
    return environment.value(BASE_URL_VARIABLE) or BASE_URL


def mirrored(url):
    """``url`` where the published models are read from: an AllenNLP URL of a published
    model's file (any host of ``ALLENNLP_BASE_URLS``, http or https) becomes that file under
    ``model_base_url()``, so it goes through the mirror as the model's name does; any other
    URL is returned as it is."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in ("http", "https"):
        return url
    for base in ALLENNLP_BASE_URLS:
        prefix = base.partition("://")[2] + "/"
        if rest.startswith(prefix):
            for model in MODELS.values():
                for file_url, file in zip(model.urls(), (model.options_file, model.weights_file)):
                    if rest[len(prefix) :] == f"{model.folder}/{file}":
                        return file_url
    return url


def lookup(name):
    """The ``PublishedModel`` called ``name`` (or an alias of it), else ``None``."""
    return MODELS.get(ALIASES.get(name, name))


def names():
    """Every published name and alias, sorted."""
    return sorted([*MODELS, *ALIASES])
