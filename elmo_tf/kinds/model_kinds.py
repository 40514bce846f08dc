"""The kinds of model elmo-tf reads, and the one place that knows them.

A kind is a family of model folders (and of NLPL archives of one): its files, and how they
become a model. Two kinds:

- **bilm-tf's** (AllenNLP's published files, bilm-tf's and simple_elmo's folders, NLPL's
  release 20): ``options.json`` and the weights (``weights.hdf5``, or simple_elmo's and NLPL's
  ``model.hdf5``), with simple_elmo's vocabulary beside them, whose first words a load caches;
- **ELMoForManyLangs'** (NLPL's release 11): ``config.json``, the model config it names,
  ``char.dic``, ``word.dic`` and two PyTorch state_dicts, converted in memory
  (``efml_conversion``).

``KINDS`` holds each kind's files: what tells the kind (``markers``), what a model of it must
hold and may hold, and what loading reads. ``folder_files`` tells a folder's kind and finds its
files; ``archive_kind`` tells an archive's from its members, and ``unpack_archive`` writes what
loading reads of it; ``read`` turns the files of any kind into a ``ModelContents``: the
``ElmoConfig``, the weights and the token tables, which every caller (``ELMo.from_preset``,
``elmo-tf convert``, Beam through ``from_preset``) takes without asking which kind it was. A
third kind is a row of ``KINDS``, its reader under ``elmo_tf.foreign`` and its branch of
``read``.
"""

import dataclasses
import os
import shutil

from elmo_tf import checks
from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ForeignModelError, PresetError
from elmo_tf.foreign import efml_folder, simple_elmo_vocab, zip_archives
from elmo_tf.formats import options_file, weight_file
from elmo_tf.kinds import efml_conversion
from elmo_tf.system import files, untrusted_files
from elmo_tf.tokens.codepoints import CodepointVocabulary


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of model folder.

    Args:
        name: how messages name it.
        markers: the files that tell the kind (all of them present).
        required: what a model of the kind holds: file names, or a tuple of alternatives.
        optional: what it may hold besides (documents aside).
        read: what loading it reads (all an archive's unpacking writes).
        nested: files that may start as an archive does (gzip'ed, or PyTorch's zip layout).
        subfolders: folders it may hold files in, one level down.
        model_configs: whether any other ``*.json`` may be its model config (EFML's is named
            by its ``config.json``).
    """

    name: str
    markers: tuple
    required: tuple
    optional: tuple
    read: tuple
    nested: tuple = ()
    subfolders: tuple = ()
    model_configs: bool = False

    def shown_required(self):
        """``options.json, weights.hdf5 or model.hdf5``: what it holds, as a message says."""
        return ", ".join(" or ".join(r) if isinstance(r, tuple) else r for r in self.required)


BILM_WEIGHTS = (weight_file.FILE_NAME, "model.hdf5")  # ours, then simple_elmo's and NLPL's
BILM = Kind(
    name="bilm-tf",
    markers=(options_file.FILE_NAME,),
    required=(options_file.FILE_NAME, BILM_WEIGHTS),
    optional=(*simple_elmo_vocab.FILE_NAMES, "meta.json"),
    read=(options_file.FILE_NAME, *BILM_WEIGHTS, *simple_elmo_vocab.FILE_NAMES),
    nested=("vocab.txt.gz",),
)
EFML = Kind(
    name="ELMoForManyLangs",
    markers=(efml_folder.CONFIG_FILE, efml_folder.CHAR_DIC),
    required=(
        efml_folder.CONFIG_FILE,
        efml_folder.CHAR_DIC,
        efml_folder.TOKEN_EMBEDDER,
        efml_folder.ENCODER,
    ),  # fmt: skip
    optional=(efml_folder.WORD_DIC, "classifier.pkl", "meta.json"),  # classifier: never read
    read=(
        efml_folder.CONFIG_FILE,
        efml_folder.CHAR_DIC,
        efml_folder.WORD_DIC,
        efml_folder.TOKEN_EMBEDDER,
        efml_folder.ENCODER,
    ),  # fmt: skip
    nested=(efml_folder.TOKEN_EMBEDDER, efml_folder.ENCODER),
    subfolders=("configs",),
    model_configs=True,
)
KINDS = (BILM, EFML)
DOCUMENTS = ("readme", "readme.txt", "readme.md", "license", "license.txt", "license.md")


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """Where a model is read from: its ``kind``, bilm-tf's ``options`` and ``weights`` (and
    simple_elmo's ``vocab``, or ``None``), or an ELMoForManyLangs model ``folder``; ``source``
    is what the user named (a model name, a path, an archive), for messages."""

    kind: Kind
    options: str | None = None
    weights: str | None = None
    vocab: str | None = None
    folder: str | None = None
    source: str = ""

    def paths(self):
        """The files (or the folder) the model is read from."""
        return (self.folder,) if self.folder is not None else (self.options, self.weights)


@dataclasses.dataclass(frozen=True)
class ModelContents:
    """What a model is made of, whatever kind it came as.

    Args:
        config: its ``ElmoConfig``.
        weights: a weight file's path, ``{dataset: array}`` converted in memory, or ``None``
            (the architecture alone).
        vocabulary: a code-point model's token tables (``CodepointVocabulary``), else ``None``.
        vocab_file: simple_elmo's vocabulary beside the weights, whose first tokens a load
            caches, or ``None``.
        description: what it is, as a message names it (``bilm-tf model small``).
        where: the path its arrays' errors name.
    """

    config: ElmoConfig
    weights: object
    vocabulary: CodepointVocabulary | None
    vocab_file: str | None
    description: str
    where: str

    def load_into(self, model):  # pragma: no mutate block, Keras: tests/model/test_efml_model.py
        """Loads the weights into ``model`` (built from ``config``); returns it."""
        if isinstance(self.weights, dict):
            return weight_file.load_arrays(model, self.weights, self.where)
        return weight_file.load_weights(model, self.weights)

    def cache_tokens(self):
        """The first tokens of simple_elmo's vocabulary, whose vectors a load caches."""
        return simple_elmo_vocab.read_head(self.vocab_file) if self.vocab_file else []

    def write(self, directory):
        """Writes the model into ``directory`` as ``options.json`` and ``weights.hdf5`` (and
        simple_elmo's ``vocab.txt``), each under a temporary name first."""
        weights = os.path.join(directory, weight_file.FILE_NAME)
        if isinstance(self.weights, dict):
            weight_file.write_arrays(self.weights, weights)
        else:
            weight_file.check_file(self.config, self.weights)
            _copy(self.weights, weights)
        self.config.save(os.path.join(directory, options_file.FILE_NAME))
        if self.vocab_file is not None and os.path.basename(self.vocab_file) == "vocab.txt":
            _copy(self.vocab_file, os.path.join(directory, "vocab.txt"))


def _copy(source, target):
    with files.atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)


def folder_files(folder, source=None):
    """The ``ModelFiles`` of a model folder of either kind: ELMoForManyLangs' where its markers
    are files and bilm-tf's is not there, else bilm-tf's, whose files must be there
    (``PresetError`` naming what is missing)."""
    folder = os.fspath(folder)
    source = folder if source is None else source
    efml = all(os.path.isfile(os.path.join(folder, f)) for f in EFML.markers)
    if efml and not any(os.path.lexists(os.path.join(folder, f)) for f in BILM.markers):
        return ModelFiles(EFML, folder=folder, source=source)
    options, weights = bilm_files(folder)
    vocab = next(
        (p for n in simple_elmo_vocab.FILE_NAMES if os.path.isfile(p := os.path.join(folder, n))),
        None,
    )
    return ModelFiles(BILM, options, weights, vocab, source=source)


def bilm_files(directory):
    """``(options, weights)`` of a bilm-tf model directory: ``PresetError`` naming what a model
    directory needs where a file is missing or is no file to read."""
    options = os.path.join(directory, options_file.FILE_NAME)
    weights = [os.path.join(directory, f) for f in BILM_WEIGHTS]
    found = [w for w in weights if os.path.lexists(w)]
    if not os.path.lexists(options) or not found:
        missing = [] if os.path.lexists(options) else [options]
        missing += [] if found else [" or ".join(weights)]
        raise PresetError(
            f"{directory}: a model directory needs {', '.join(missing)} (or "
            f"{EFML.name}' {' and '.join(EFML.markers)})"
        )
    # there, but perhaps no file to read (a pipe, a device, a directory, a dangling link)
    untrusted_files.check_readable(options, "options file", PresetError)
    untrusted_files.check_readable(found[0], "weight file", PresetError)
    return options, found[0]


def archive_kind(members, source):
    """The ``Kind`` of an archive's ``members`` (``{name: ZipInfo}``, of
    ``zip_archives.inspect``); ``ForeignModelError`` naming ``source`` for files missing or
    extra for its kind, or a kind that cannot be told."""
    kinds = [kind for kind in KINDS if all(m in members for m in kind.markers)]
    if len(kinds) != 1:
        told = " nor ".join(
            f"{checks.with_article(k.name)} {'one' if i else 'model'} ({k.shown_required()})"
            for i, k in enumerate(KINDS)
        )
        if not kinds:
            raise ForeignModelError(f"{source}: holds neither {told}")
        both = " and ".join(checks.with_article(k.name) for k in kinds)
        raise ForeignModelError(f"{source}: holds both {both} model")
    (kind,) = kinds
    for entry in kind.required:
        names = entry if isinstance(entry, tuple) else (entry,)
        if not any(name in members for name in names):
            raise ForeignModelError(
                f"{source}: lacks {' or '.join(names)} ({checks.with_article(kind.name)} model "
                f"archive holds {kind.shown_required()})"
            )
    allowed = {n for r in kind.required for n in (r if isinstance(r, tuple) else (r,))}
    for name in members:
        if name in allowed or name in kind.optional or name.lower() in DOCUMENTS:
            continue
        if kind.model_configs and name.endswith(".json"):  # the model config, under its name
            continue
        shown = checks.shown(name, 80, quote=False)  # pragma: no mutate, quote=None is falsy too
        raise ForeignModelError(
            f"{source}: holds '{shown}', which {checks.with_article(kind.name)} model archive has "
            "no place for"
        )
    return kind


def check_archive(path):
    """``(members, kind)`` of the archive at ``path``, its directory checked
    (``zip_archives.inspect``) and its kind told; ``ForeignModelError`` otherwise."""
    members = zip_archives.inspect(path, _SUBFOLDERS)
    return members, archive_kind(members, os.fspath(path))


def parse_archive(data, source="archive"):
    """``check_archive`` of an archive's bytes: ``(members, kind)``."""
    members = zip_archives.parse_archive(data, source, _SUBFOLDERS)
    return members, archive_kind(members, source)


_SUBFOLDERS = tuple(sorted({s for kind in KINDS for s in kind.subfolders}))


def members_read(kind, members, path):
    """The names of the members of the archive at ``path`` that loading a model of ``kind``
    reads, in the archive's order: its kind's ``read`` files and, for ELMoForManyLangs, the one
    model config its ``config.json`` names (the first of ``efml_folder.config_candidates``
    the archive holds); no other member is written."""
    wanted = set(kind.read)
    if kind.model_configs:
        data = zip_archives.read_member(
            path, members[efml_folder.CONFIG_FILE], efml_folder.MAX_CONFIG_BYTES
        )
        config_path = efml_folder.parse_train_config(data, f"{path}: {efml_folder.CONFIG_FILE}")
        candidates = [c.replace(os.sep, "/") for c in efml_folder.config_candidates(config_path)]
        wanted.update(next(([c] for c in candidates if c in members), []))
    return [name for name in members if name in wanted]


def unpack_archive(path, destination):
    """Checks the archive at ``path`` (``check_archive``) and writes what loading its model
    reads (``members_read``) into the new directory ``destination``; returns its ``Kind``."""
    members, kind = check_archive(path)
    names = members_read(kind, members, os.fspath(path))
    zip_archives.extract(path, destination, members, names, kind.nested)
    return kind


def read(model_files, load_weights=True, size_limits=None):
    """The ``ModelContents`` of ``model_files`` (a ``ModelFiles``): its config, and with
    ``load_weights`` its weights (for bilm-tf's kind the weight file, checked as it loads; for
    ELMoForManyLangs' the arrays converted in memory), its token tables and its vocabulary.
    ``size_limits`` raises the bounds on the model's size (``elmo_tf.config``)."""
    if model_files.kind is EFML:
        folder = efml_folder.read_folder(model_files.folder)
        config, arrays = efml_conversion.convert(folder, size_limits)
        vocabulary = CodepointVocabulary.from_arrays(config, arrays, model_files.folder)
        config_name = (
            "EFML's standard one"
            if folder.config_source == "standard"
            else os.path.relpath(folder.config_source, model_files.folder)
        )
        return ModelContents(
            config,
            arrays if load_weights else None,
            vocabulary,
            None,
            f"{EFML.name} model {model_files.source} (model config: {config_name})",
            model_files.folder,
        )
    config = ElmoConfig.from_file(model_files.options, size_limits=size_limits)
    return ModelContents(
        config,
        model_files.weights if load_weights else None,
        None,
        model_files.vocab if load_weights else None,
        f"{BILM.name} model {model_files.source}",
        model_files.weights,
    )
