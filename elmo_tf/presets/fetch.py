"""Model files fetched into the cache, each checked as its loader checks it before it is kept.

``published_files`` downloads a published model's two files (the options first, which bound the
weight file); ``nlpl_folder`` an NLPL entry's archive, unpacked beside it once; ``local_files``
the two files ``load_pretrained`` is given as URLs; ``add_to_cache`` puts files a user already
has into the cache as a download of them would be.
"""

import functools
import os

from elmo_tf import checks
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import OptionsError, PresetError, WeightFileError
from elmo_tf.foreign import zip_archives
from elmo_tf.formats.options_file import MAX_OPTIONS_BYTES
from elmo_tf.formats.weight_file import check_file
from elmo_tf.kinds import model_kinds
from elmo_tf.presets import bundled, cache, cache_entries, nlpl, published
from elmo_tf.system import urls

WHAT = ("the options file", "the weight file")  # a published model's two files, in messages


def published_files(model):
    """The local ``(options_file, weight_file)`` of a ``PublishedModel``, fetched into the cache
    on first use; the options must describe the model's architecture."""
    command = f"elmo-tf download {model.name}"
    return tuple(
        cache.fetch(url, what, max_bytes(), command, check)
        for url, what, max_bytes, check in _published_files(model)
    )


def _published_files(model):
    """``(url, what, max_bytes, check)`` of each of a published model's files, in the order
    they are fetched: the options first, whose config bounds the weight file (``max_bytes()``
    is called once the options are cached)."""
    options_url, weights_url = model.urls()
    what = [f"{w} of {model.name!r}" for w in WHAT]

    def check_options(path):
        config = ElmoConfig.from_file(path)
        if _architecture(config) != _architecture(model.config):
            raise OptionsError(
                f"{path}: describes {config.describe()}, not the {model.name!r} architecture "
                f"({model.config.describe()})"
            )

    options_path = cache_entries.entry_path(options_url)

    def config():
        return ElmoConfig.from_file(options_path)

    return [
        (options_url, what[0], lambda: MAX_OPTIONS_BYTES, check_options),
        (weights_url, what[1], lambda: weight_file_bound(config()),
         lambda path: check_file(config(), path)),
    ]  # fmt: skip


def add_to_cache(name, paths):
    """Puts files the user already has into the cache as the files of the published model or
    NLPL entry ``name`` (a published model: its options and weight files; an NLPL entry: its
    archive), each checked as its download would be; returns the cached paths. For a machine
    that cannot download them."""
    if nlpl.is_nlpl_name(name):
        entry = nlpl.entry_named(name)
        files = [(entry.url(), f"the NLPL archive {entry.name}",
                  lambda: zip_archives.MAX_TOTAL_BYTES, model_kinds.check_archive)]  # fmt: skip
        expected = "its archive (.zip)"
    elif (model := published.lookup(name)) is not None and name not in bundled.BUNDLED_MODELS:
        files = _published_files(model)
        expected = "its options file and its weight file"
    else:
        raise PresetError(
            f"{name!r} is neither a published model ({', '.join(published.names())}) nor an "
            "NLPL entry (nlpl:<id>, efml-en, ...): only those are cached"
            + checks.did_you_mean(name, [*published.names(), *nlpl.ALIASES])
        )
    if len(paths) != len(files):
        raise PresetError(f"{name!r} takes {expected}: {len(paths)} file(s) given")
    return [
        cache.add(url, os.fspath(path), what, max_bytes(), check)
        for (url, what, max_bytes, check), path in zip(files, paths)
    ]


def local_files(options_file, weight_file):
    """``options_file`` and ``weight_file`` as local paths: ``http(s)://`` URLs are fetched
    into the cache (the options first, which bound the weight file's size); a downloaded file
    is checked as the loader checks it before it is kept. AllenNLP's URLs of a published
    model's files are read where that model is (``published.mirrored``)."""
    options, weights = os.fspath(options_file), os.fspath(weight_file)
    for path, what, error in [
        (options, "an options file", OptionsError),
        (weights, "a weight file", WeightFileError),
    ]:
        if urls.other_scheme(path) and not os.path.exists(path):
            raise error(
                f"{path}: {urls.problem(path)}; {what} is a local path or an http(s):// URL "
                "(downloaded into the cache)"
            )
    if urls.is_url(options):
        options = cache.fetch(
            published.mirrored(options),
            "an options file",
            MAX_OPTIONS_BYTES,
            check=ElmoConfig.from_file,
        )
    if urls.is_url(weights):
        config = ElmoConfig.from_file(options)
        check = functools.partial(check_file, config)
        weights = cache.fetch(
            published.mirrored(weights), "a weight file", weight_file_bound(config), check=check
        )
    return options, weights


def download_command(entry):
    return f"elmo-tf download {entry.alias or entry.name}"


def nlpl_folder(entry):
    """The unpacked folder of an NLPL entry's archive: downloaded into the cache on first use
    (its directory checked before it is kept: ``model_kinds.check_archive``), unpacked beside it
    once, and the archive checked unchanged at every use (``cache.fetch``)."""
    what = f"the NLPL archive {entry.name}"
    path = cache.fetch(
        entry.url(), what, zip_archives.MAX_TOTAL_BYTES, download_command(entry),
        model_kinds.check_archive,
    )  # fmt: skip
    return cache.unpacked(path, what, model_kinds.unpack_archive)


def weight_file_bound(config):
    """The most bytes a weight file for ``config`` holds: float64 values and HDF5's layout
    (a float32 file takes half)."""
    return config.parameter_count * 8 + (16 << 20)


def _architecture(config):
    return (
        tuple(map(tuple, config.filters)),
        config.char_embedding_dim,
        config.n_highway,
        config.projection_dim,
        config.lstm_dim,
        config.n_lstm_layers,
        config.use_skip_connections,
    )
