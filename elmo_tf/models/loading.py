"""Building an ``ELMo`` from a model of any kind: what ``ELMo.from_preset`` and
``load_pretrained`` do.

The model class knows no kind of model folder: ``presets`` resolves a name, path, archive or
NLPL entry to its files, ``elmo_tf.kinds.model_kinds`` turns them into a config, weights and
token tables (a ``ModelContents``), and this builds the model from those and loads the weights.
"""

from elmo_tf.config import ElmoConfig
from elmo_tf.formats.weight_file import load_weights
from elmo_tf.kinds import model_kinds
from elmo_tf.presets import fetch, resolve


def from_preset(cls, name_or_dir, load_weights=True, **kwargs):
    """``cls.from_preset`` (see ``ELMo.from_preset``): a model of ``cls`` built from the
    contents of the model ``name_or_dir`` names, its weights loaded with ``load_weights``."""
    with resolve.open_model(name_or_dir, download=load_weights) as files:
        if files is None:  # a published model's architecture, offline
            return cls(resolve.preset(name_or_dir), **kwargs)
        contents = model_kinds.read(files, load_weights)
        model = cls(contents.config, vocabulary=contents.vocabulary, **kwargs)
        if not load_weights:
            return model
        contents.load_into(model)
        if tokens := contents.cache_tokens():  # simple_elmo's first words, cached as it does
            model.embedder.fill_token_cache(tokens)
        return model


def from_files(cls, options_file, weight_file, size_limits=None, **kwargs):
    """``cls.from_files`` (see ``ELMo.from_files``)."""
    options_file, weight_file = fetch.local_files(options_file, weight_file)
    config = ElmoConfig.from_file(options_file, size_limits=size_limits)
    return load_weights(cls(config, **kwargs), weight_file)
