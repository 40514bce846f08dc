"""The published ELMo models: where each lives, its architecture, what it was trained on.

AllenNLP publishes the official files at ``BASE_URL/<folder>/<file>``; ``ELMO_TF_MODEL_BASE_URL``
replaces ``BASE_URL`` for every model (a company mirror, an air-gapped artefact store, tests)
and keeps the ``<folder>/<file>`` layout under it. The models, their sizes and what each was
trained on: docs/models.md (``full`` is an alias of ``original``).
"""

import dataclasses

from elmo_tf import environment
from elmo_tf.config import ElmoConfig

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


def _architecture(projection_dim, lstm_dim, n_highway):
    return ElmoConfig(
        filters=_FILTERS,
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


@dataclasses.dataclass(frozen=True)
class PublishedModel:
    """One published model: its files under ``folder`` and the architecture they hold."""

    name: str
    folder: str
    options_file: str
    weights_file: str
    config: ElmoConfig
    trained_on: str

    def urls(self, base_url=None):
        """``(options URL, weights URL)`` under ``base_url`` (default: ``base_url()``)."""
        base = (base_url or model_base_url()).rstrip("/")
        return (
            f"{base}/{self.folder}/{self.options_file}",
            f"{base}/{self.folder}/{self.weights_file}",
        )

    @property
    def download_bytes(self):
        """The weight file's approximate size: every parameter as float32."""
        return self.config.parameter_count * 4


def _allennlp(name, folder, config, trained_on, weights_suffix="weights"):
    stem = f"elmo_{folder}"
    return PublishedModel(
        name,
        folder,
        f"{stem}_options.json",
        f"{stem}_{weights_suffix}.hdf5",
        config,
        trained_on,
    )


_ORIGINAL = _architecture(projection_dim=512, lstm_dim=4096, n_highway=2)
MODELS = {
    model.name: model
    for model in (
        _allennlp(
            "small",
            "2x1024_128_2048cnn_1xhighway",
            _architecture(projection_dim=128, lstm_dim=1024, n_highway=1),
            "1 Billion Word Benchmark (800 M tokens)",
        ),
        _allennlp(
            "medium",
            "2x2048_256_2048cnn_1xhighway",
            _architecture(projection_dim=256, lstm_dim=2048, n_highway=1),
            "1 Billion Word Benchmark (800 M tokens)",
        ),
        _allennlp(
            "original",
            "2x4096_512_2048cnn_2xhighway",
            _ORIGINAL,
            "1 Billion Word Benchmark (800 M tokens)",
        ),
        _allennlp(
            "original_5.5b",
            "2x4096_512_2048cnn_2xhighway_5.5B",
            _ORIGINAL,
            "Wikipedia (1.9 B tokens) and WMT 2008-2012 news crawl (3.6 B)",
        ),
        PublishedModel(
            "pubmed",
            "contributed/pubmed",
            "elmo_2x4096_512_2048cnn_2xhighway_options.json",
            "elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
            _ORIGINAL,
            "PubMed abstracts (contributed to AllenNLP)",
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
