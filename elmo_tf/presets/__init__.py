"""Named models: the bundled one, the published ones, and model directories.

``ELMo.from_preset(name_or_dir)`` resolves its argument here:

- ``"sotu"`` (alias ``"default"``): the model bundled with the package (``bundled``);
- a published model (``"small"``, ``"medium"``, ``"original"`` alias ``"full"``,
  ``"original_5.5b"``, ``"pubmed"``; ``published``): downloaded on first use into the cache and
  checked at every use (``cache``); with ``load_weights=False`` only its architecture, offline;
- a directory holding ``options.json`` and ``weights.hdf5`` (or simple_elmo's ``model.hdf5``,
  and its ``vocab.txt``), or an ELMoForManyLangs model folder (``elmo_tf.efml``);
- an NLPL repository archive (``.zip``) of either kind, unpacked into a temporary directory
  for the load;
- an NLPL repository entry, ``nlpl:<id>`` or an alias (``efml-en``; ``nlpl``): its archive
  downloaded once into the cache and unpacked there.

``open_model`` gives a ``ModelFiles`` for any of them.

``load_pretrained`` takes ``http(s)://`` URLs for the two files through the same cache
(``local_files``). ``TRAINING_DEFAULT`` is the architecture ``elmo-tf train`` builds when it is
given none.
"""

import contextlib
import dataclasses
import functools
import gzip
import os
import tempfile
import warnings

from elmo_tf import checks, untrusted_files, urls, zip_archives
from elmo_tf.config import ElmoConfig
from elmo_tf.efml import model_folder
from elmo_tf.errors import ForeignModelError, OptionsError, PresetError, WeightFileError
from elmo_tf.options_file import MAX_OPTIONS_BYTES
from elmo_tf.presets import bundled, cache, cache_entries, nlpl, published
from elmo_tf.weight_file import check_file

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
        return published_files(model) if download else None
    if os.path.isdir(name):
        return _directory_files(name)
    raise PresetError(
        f"{name!r} is neither the bundled model ({', '.join(sorted(bundled.BUNDLED_MODELS))}), "
        f"a published model ({', '.join(published.names())}), an NLPL entry (nlpl:<id>, "
        f"efml-en, ...), a model directory (with {bundled.OPTIONS_FILE} and "
        f"{bundled.WEIGHTS_FILE}, or ELMoForManyLangs' files) nor an NLPL .zip archive"
        + checks.did_you_mean(name, [*bundled.BUNDLED_MODELS, *published.names(), *nlpl.ALIASES])
    )


def local_paths(name_or_dir):
    """``(options_file, weight_file)`` where the model ``name_or_dir`` is read from, without
    downloading or loading anything: a published model's cache entries (present or not; under
    ``ELMO_TF_OFFLINE`` one not cached is the ``DownloadError`` its load would raise), the
    bundled model's files, a directory's; ``PresetError`` for a name that is none of these."""
    name = os.fspath(name_or_dir)
    model = published.lookup(name)
    if model is not None and name not in bundled.BUNDLED_MODELS:
        for url, what in zip(model.urls(), _WHAT):  # offline and not cached: said now
            cache.check_offline(url, f"{what} of {model.name!r}", f"elmo-tf download {model.name}")
        return tuple(cache_entries.entry_path(url) for url in model.urls())
    if nlpl.is_nlpl_name(name) and not os.path.exists(name):
        entry = nlpl_entry(name)
        cache.check_offline(entry.url(), f"the NLPL archive {entry.name}", _download_command(entry))
        path = cache_entries.entry_path(entry.url())
        return path, path + cache_entries.UNPACKED_SUFFIX
    if os.path.isdir(name) and model_folder.is_model_folder(name):
        return (name,)
    if os.path.isfile(name) and zip_archives.is_zip(name):
        zip_archives.inspect(name)  # its directory, checked before anything is loaded
        return (name,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PresetNameWarning)
        return preset_files(name, download=False)


_WHAT = ("the options file", "the weight file")  # a published model's two files, in messages


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
    what = [f"{w} of {model.name!r}" for w in _WHAT]

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
        entry = nlpl_entry(name)
        files = [(entry.url(), f"the NLPL archive {entry.name}",
                  lambda: zip_archives.MAX_TOTAL_BYTES, zip_archives.inspect)]  # fmt: skip
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


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """Where a model is read from: bilm-tf's ``options`` and ``weights`` (and simple_elmo's
    ``vocab``, or ``None``), or an ELMoForManyLangs model ``folder``. ``kind`` is
    ``zip_archives.BILM`` or ``zip_archives.EFML``."""

    kind: str
    options: str | None = None
    weights: str | None = None
    vocab: str | None = None
    folder: str | None = None


@contextlib.contextmanager
def open_model(name_or_dir, download=True):
    """The ``ModelFiles`` of any model ``ELMo.from_preset`` takes (see the module docstring),
    for the ``with`` block: an archive given as a path is unpacked into a temporary directory
    removed after it. ``None`` for a published model without ``download``."""
    name = os.fspath(name_or_dir) if isinstance(name_or_dir, str | os.PathLike) else name_or_dir
    if isinstance(name, str) and nlpl.is_nlpl_name(name) and not os.path.exists(name):
        yield folder_files(nlpl_folder(nlpl_entry(name)))
        return
    if isinstance(name, str) and os.path.isdir(name) and model_folder.is_model_folder(name):
        yield ModelFiles(zip_archives.EFML, folder=name)
        return
    if isinstance(name, str) and os.path.isfile(name) and zip_archives.is_zip(name):
        with tempfile.TemporaryDirectory(prefix="elmo_tf-archive-") as scratch:
            folder = os.path.join(scratch, "model")
            zip_archives.extract(name, folder)
            yield folder_files(folder)
        return
    found = preset_files(name_or_dir, download=download)
    known = name in bundled.BUNDLED_MODELS or published.lookup(name) is not None
    if found is None:
        yield None
    elif not known:  # a directory (its vocab.txt too)
        yield folder_files(name)
    else:
        yield ModelFiles(zip_archives.BILM, *found)


def folder_files(folder):
    """The ``ModelFiles`` of a model folder of either kind."""
    if model_folder.is_model_folder(folder) and not os.path.lexists(
        os.path.join(folder, bundled.OPTIONS_FILE)
    ):
        return ModelFiles(zip_archives.EFML, folder=folder)
    options, weights = _directory_files(folder)
    vocab = None
    for name in VOCABULARY_FILE_NAMES:  # simple_elmo's order: the gzip one first
        if os.path.isfile(path := os.path.join(folder, name)):
            vocab = path
            break
    return ModelFiles(zip_archives.BILM, options, weights, vocab)


# A model folder's vocabulary, as simple_elmo looks for it.
VOCABULARY_FILE_NAMES = ("vocab.txt.gz", "vocab.txt")
# The vocabulary's first tokens whose vectors a load caches (simple_elmo's ``limit``).
VOCABULARY_CACHE_TOKENS = 100
_VOCABULARY_HEAD_BYTES = 1 << 20
_NOT_A_TOKEN = "!!!MAXTERMID"  # bilm-tf's vocabulary marker, which simple_elmo skips


def vocabulary_head(path, count=VOCABULARY_CACHE_TOKENS):
    """The first ``count`` tokens of a simple_elmo vocabulary (``vocab.txt``, or gzip'ed), one
    a line; at most ``_VOCABULARY_HEAD_BYTES`` are read (decompressed). ``ForeignModelError``
    for a file that is not UTF-8 text or not gzip where its name says so."""
    path = os.fspath(path)
    untrusted_files.check_readable(path, "vocabulary", ForeignModelError)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read(_VOCABULARY_HEAD_BYTES)
    except (OSError, EOFError) as e:
        raise ForeignModelError(f"{path}: not a readable vocabulary ({e})") from None
    lines = data.split(b"\n")[:count]
    try:
        tokens = [line.decode("utf-8").strip() for line in lines]
    except UnicodeDecodeError as e:
        raise ForeignModelError(f"{path}: not UTF-8 text ({e.reason})") from None
    return [t for t in tokens if t and t != _NOT_A_TOKEN]


def nlpl_entry(name):
    """The ``nlpl.Entry`` a name means; ``PresetError`` naming the known ones otherwise."""
    entry = nlpl.lookup(name)
    if entry is None:
        raise PresetError(
            f"{name!r} names no NLPL repository entry known here: write nlpl:<release>/<id> "
            f"for any entry (nlpl:20/219), or one of {', '.join(sorted(nlpl.ALIASES)[:6])}, ... "
            f"(docs/models.md)" + checks.did_you_mean(name, nlpl.names())
        )
    return entry


def _download_command(entry):
    return f"elmo-tf download {entry.alias or entry.name}"


def nlpl_folder(entry):
    """The unpacked folder of an NLPL entry's archive: downloaded into the cache on first use
    (its directory checked before it is kept: ``zip_archives.inspect``), unpacked beside it
    once, and the archive checked unchanged at every use (``cache.fetch``)."""
    what = f"the NLPL archive {entry.name}"
    path = cache.fetch(
        entry.url(), what, zip_archives.MAX_TOTAL_BYTES, _download_command(entry),
        zip_archives.inspect,
    )  # fmt: skip
    return cache.unpacked(path, what, zip_archives.extract)


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


# Weight file names in a model directory: ours, then simple_elmo's and the NLPL repository's.
WEIGHT_FILE_NAMES = (bundled.WEIGHTS_FILE, "model.hdf5")


def _directory_files(directory):
    options = os.path.join(directory, bundled.OPTIONS_FILE)
    weights = [os.path.join(directory, f) for f in WEIGHT_FILE_NAMES]
    found = [w for w in weights if os.path.lexists(w)]
    if not os.path.lexists(options) or not found:
        missing = [] if os.path.lexists(options) else [options]
        missing += [] if found else [" or ".join(weights)]
        raise PresetError(
            f"{directory}: a model directory needs {', '.join(missing)} (or ELMoForManyLangs' "
            f"{model_folder.CONFIG_FILE} and {model_folder.CHAR_DIC})"
        )
    # there, but perhaps no file to read (a pipe, a device, a directory, a dangling link)
    untrusted_files.check_readable(options, "options file", PresetError)
    untrusted_files.check_readable(found[0], "weight file", PresetError)
    return options, found[0]


def preset(name):
    """Returns the ElmoConfig of a published model (``published.names()``).

    Raises ``PresetError`` (a ``ValueError``) for any other name.
    """
    model = published.lookup(name)
    if model is None:
        raise PresetError(f"unknown preset {name!r}; choose one of {published.names()}")
    return model.config
