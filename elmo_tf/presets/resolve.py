"""Where a model is read from: a name, a path, an archive or an NLPL entry resolved to its files.

``ELMo.from_preset(name_or_dir)`` resolves its argument here (``open_model``):

- ``"sotu"`` (alias ``"default"``): the model bundled with the package (``bundled``);
- a published model (``"small"``, ``"medium"``, ``"original"`` alias ``"full"``,
  ``"original_5.5b"``, ``"pubmed"``; ``published``): downloaded on first use into the cache and
  checked at every use (``fetch``, ``cache``); with ``load_weights=False`` only its
  architecture, offline;
- a model directory of either kind (``elmo_tf.kinds.model_kinds.folder_files``);
- an NLPL repository archive (``.zip``) of either kind, unpacked into a temporary directory
  for the load;
- an NLPL repository entry, ``nlpl:<id>`` or an alias (``efml-en``; ``nlpl``): its archive
  downloaded once into the cache and unpacked there.

``open_model`` gives the ``ModelFiles`` of any of them, which ``model_kinds.read`` turns into a
model's config, weights and token tables. ``load_pretrained`` takes ``http(s)://`` URLs for the
two files through the same cache (``local_files``).
"""

import contextlib
import os
import tempfile
import warnings

from elmo_tf import checks
from elmo_tf.errors import PresetError
from elmo_tf.foreign import zip_archives
from elmo_tf.kinds import model_kinds
from elmo_tf.presets import bundled, cache, cache_entries, fetch, nlpl, published


class PresetNameWarning(UserWarning):
    """A model name that is also a directory in the working directory: the name wins."""


def shadowed_directory(name_or_dir):
    """``./NAME`` when ``name_or_dir`` is a bundled or published name and also a directory in
    the working directory (the name wins: ``./NAME`` names the directory), else ``None``."""
    name = os.fspath(name_or_dir)
    known = name in bundled.BUNDLED_MODELS or published.lookup(name) is not None
    return f"./{name}" if known and os.path.isdir(name) else None


def preset_files(name_or_dir, download=True):
    """``(options_file, weight_file)`` (local paths) of the bundled model, a published model
    (downloaded into the cache on first use, or ``None`` without ``download``) or a model
    directory; raises ``PresetError`` naming the known names for anything else.

    A bundled or published name means that model, also where a directory of the same name is
    in the working directory (a ``PresetNameWarning`` says so): write ``./NAME`` for it."""
    if not isinstance(name_or_dir, str | os.PathLike):
        raise TypeError(
            f"name_or_dir must be a model name ({', '.join(sorted(bundled.BUNDLED_MODELS))}, "
            f"{', '.join(published.names())}) or a model directory, got "
            f"{type(name_or_dir).__name__}"
        )
    name = os.fspath(name_or_dir)
    if directory := shadowed_directory(name):
        warnings.warn(
            f"{name!r} names the {'bundled' if name in bundled.BUNDLED_MODELS else 'published'} "
            f"model; the directory of the same name here is {directory!r}",
            PresetNameWarning,
            stacklevel=3,
        )
    if name in bundled.BUNDLED_MODELS:
        return bundled.model_files(bundled.BUNDLED_MODELS[name])
    model = published.lookup(name)
    if model is not None:
        return fetch.published_files(model) if download else None
    if os.path.isdir(name):
        return model_kinds.bilm_files(name)
    raise PresetError(
        f"{name!r} is neither the bundled model ({', '.join(sorted(bundled.BUNDLED_MODELS))}), "
        f"a published model ({', '.join(published.names())}), an NLPL entry (nlpl:<id>, "
        f"efml-en, ...), a model directory (with {bundled.OPTIONS_FILE} and "
        f"{bundled.WEIGHTS_FILE}, or ELMoForManyLangs' files) nor an NLPL .zip archive"
        + checks.did_you_mean(name, [*bundled.BUNDLED_MODELS, *published.names(), *nlpl.ALIASES])
    )


def local_paths(name_or_dir):
    """The paths the model ``name_or_dir`` is read from, without downloading or loading
    anything: a published model's cache entries (present or not; under ``ELMO_TF_OFFLINE`` one
    not cached is the ``DownloadError`` its load would raise), an NLPL entry's archive and its
    folder, the bundled model's files, a model folder's (or the folder), an archive; a command's
    outputs must not replace them. ``PresetError`` for a name that is none of these."""
    name = os.fspath(name_or_dir)
    model = published.lookup(name)
    if model is not None and name not in bundled.BUNDLED_MODELS:
        for url, what in zip(model.urls(), fetch.WHAT):  # offline and not cached: said now
            cache.check_offline(url, f"{what} of {model.name!r}", f"elmo-tf download {model.name}")
        return tuple(cache_entries.entry_path(url) for url in model.urls())
    if nlpl.is_nlpl_name(name) and not os.path.exists(name):
        entry = nlpl.entry_named(name)
        cache.check_offline(
            entry.url(), f"the NLPL archive {entry.name}", fetch.download_command(entry)
        )
        path = cache_entries.entry_path(entry.url())
        return path, path + cache_entries.UNPACKED_SUFFIX
    if os.path.isdir(name) and name not in bundled.BUNDLED_MODELS:  # the name wins
        return model_kinds.folder_files(name).paths()
    if os.path.isfile(name) and zip_archives.is_zip(name):
        model_kinds.check_archive(name)  # its directory, checked before anything is loaded
        return (name,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PresetNameWarning)
        return preset_files(name, download=False)


@contextlib.contextmanager
def open_model(name_or_dir, download=True):
    """The ``ModelFiles`` of any model ``ELMo.from_preset`` takes (see the module docstring),
    for the ``with`` block: an archive given as a path is unpacked into a temporary directory
    removed after it. ``None`` for a published model without ``download``."""
    name = os.fspath(name_or_dir) if isinstance(name_or_dir, str | os.PathLike) else name_or_dir
    if isinstance(name, str) and nlpl.is_nlpl_name(name) and not os.path.exists(name):
        yield model_kinds.folder_files(fetch.nlpl_folder(nlpl.entry_named(name)), name)
        return
    if isinstance(name, str) and os.path.isfile(name) and zip_archives.is_zip(name):
        with tempfile.TemporaryDirectory(prefix="elmo_tf-archive-") as scratch:
            folder = os.path.join(scratch, "model")
            model_kinds.unpack_archive(name, folder)
            yield model_kinds.folder_files(folder, name)
        return
    known = isinstance(name, str) and (
        name in bundled.BUNDLED_MODELS or published.lookup(name) is not None
    )
    if isinstance(name, str) and os.path.isdir(name) and not known:
        yield model_kinds.folder_files(name)  # a model folder of either kind
        return
    found = preset_files(name_or_dir, download=download)
    yield None if found is None else model_kinds.ModelFiles(model_kinds.BILM, *found, source=name)


def preset(name):
    """Returns the ElmoConfig of a published model (``published.names()``).

    Raises ``PresetError`` (a ``ValueError``) for any other name.
    """
    model = published.lookup(name)
    if model is None:
        raise PresetError(f"unknown preset {name!r}; choose one of {published.names()}")
    return model.config
