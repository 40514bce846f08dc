"""An ELMoForManyLangs model folder, read and cross-checked as data.

A folder (what the NLPL repository's release-11 archives unpack to) holds:

- ``config.json``: the trainer's argparse dump; only ``config_path`` counts. It names the model
  config on the authors' machine (``/Users/.../cnn_50_100_512_4096_sample.json``). EFML tries
  ``os.path.join(folder, config_path)`` (an absolute path replaces the folder), then
  ``<folder>/<basename>``, then its own bundled copy. Here the model config is looked for
  inside the folder only, and a path that leads outside it (absolute, ``..``, a link) is never
  opened: ``config_path`` relative to the folder, ``<folder>/configs/<basename>``,
  ``<folder>/<basename>``; for EFML's standard names with no such file,
  ``STANDARD_CONFIG`` (what EFML's bundled copies hold; several released archives ship none).
- the model config: ``encoder`` (``elmo``: ``projection_dim``, ``dim``, ``n_layers``,
  ``cell_clip``, ``proj_clip``) and ``token_embedder`` (``cnn``: ``filters``, ``n_highway``,
  ``activation``, ``word_dim``, ``char_dim``, ``max_characters_per_token``);
- ``char.dic`` and, with ``word_dim > 0``, ``word.dic`` (``elmo_tf.foreign.efml_dictionaries``);
- ``token_embedder.pkl`` and ``encoder.pkl``: PyTorch 0.4 state_dicts
  (``elmo_tf.foreign.torch_state_dict``, read as data).

``read_folder`` checks every size against every other before anything is converted (each
table's rows against its dictionary, each convolution, highway and projection against the
config, the projection's input against ``word_dim + sum(filters)``, each LSTM matrix): the
config and the dictionaries are read first, and each state_dict's tensors are checked against
the shapes they give before any tensor's values are read. Each problem is one
``ForeignModelError`` line naming the file.
"""

import dataclasses
import functools
import os

import numpy as np

from elmo_tf import checks
from elmo_tf.errors import ForeignModelError
from elmo_tf.foreign import efml_dictionaries
from elmo_tf.foreign.torch_state_dict import read_state_dict
from elmo_tf.system import files, untrusted_files

CONFIG_FILE = "config.json"
CHAR_DIC = "char.dic"
WORD_DIC = "word.dic"
TOKEN_EMBEDDER = "token_embedder.pkl"
ENCODER = "encoder.pkl"
MAX_CONFIG_BYTES = 1 << 20

# EFML's bundled elmoformanylangs/configs/cnn_50_100_512_4096_sample.json (cnn_0_100_... is a
# byte-identical copy despite its name): every released model's hyper-parameters.
STANDARD_CONFIG_NAMES = ("cnn_50_100_512_4096_sample.json", "cnn_0_100_512_4096_sample.json")
STANDARD_CONFIG = {
    "encoder": {
        "name": "elmo",
        "projection_dim": 512,
        "cell_clip": 3,
        "proj_clip": 3,
        "dim": 4096,
        "n_layers": 2,
    },
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
}
MAX_CHARACTERS_PER_TOKEN = 50  # EFML's read_list cuts tokens to this minus 2
CHAR_SPECIAL_TOKENS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")
WORD_REQUIRED_TOKENS = ("<oov>", "<pad>")  # EmbeddingLayer looks both up


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The hyper-parameters of an EFML model config (``encoder`` and ``token_embedder``)."""

    filters: tuple
    n_highway: int
    activation: str
    word_dim: int
    char_dim: int
    projection_dim: int
    dim: int
    n_layers: int
    cell_clip: float | None
    proj_clip: float | None

    @property
    def n_filters(self):
        return sum(n for _, n in self.filters)


@dataclasses.dataclass(frozen=True)
class ModelFolder:
    """What ``read_folder`` read: the config, where it came from, the dictionaries
    (``{token: id}``; ``word_lexicon`` ``None`` without a word branch) and the two
    state_dicts (``{name: array}``)."""

    folder: str
    config: ModelConfig
    config_source: str
    char_lexicon: dict
    word_lexicon: dict | None
    token_embedder: dict
    encoder: dict


def read_folder(folder):
    """The ``ModelFolder`` of ``folder``, every file checked against the others."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ForeignModelError(f"{folder}: not a directory (an ELMoForManyLangs model folder)")
    config, source = resolve_config(folder)
    # A table has a row of `dim` values (2 bytes each at least) per entry in
    # token_embedder.pkl: its size bounds the entries, checked before the tables are built.
    table_bytes = os.path.getsize(_inside(folder, TOKEN_EMBEDDER))
    char_lexicon = efml_dictionaries.read_dictionary(
        _inside(folder, CHAR_DIC), max_entries=table_bytes // (2 * config.char_dim)
    )
    _require(char_lexicon, CHAR_SPECIAL_TOKENS, os.path.join(folder, CHAR_DIC))
    word_lexicon = None
    if config.word_dim:
        word_lexicon = efml_dictionaries.read_dictionary(
            _inside(folder, WORD_DIC), max_entries=table_bytes // (2 * config.word_dim)
        )
        _require(word_lexicon, WORD_REQUIRED_TOKENS, os.path.join(folder, WORD_DIC))
    _check_ids(folder, char_lexicon, word_lexicon)
    n_words = len(word_lexicon) if word_lexicon else 0  # pragma: no mutate, unused without words
    expected = expected_shapes(config, len(char_lexicon), n_words)
    where = f"the model config ({source})"
    state_dicts = []
    for file, shapes in zip((TOKEN_EMBEDDER, ENCODER), expected):
        path = _inside(folder, file)
        # every tensor's shape checked before any value is read
        check = functools.partial(check_tensors, path, shapes, where)
        state_dicts.append(_finite(path, read_state_dict(path, check=check)))
    return ModelFolder(folder, config, source, char_lexicon, word_lexicon, *state_dicts)


def _inside(folder, name):
    """``folder/name``, a file in the folder: ``ForeignModelError`` for one missing, or a link
    that leads out of the folder (never opened)."""
    path = os.path.join(folder, name)
    if not os.path.lexists(path):
        raise ForeignModelError(f"{path}: missing (an ELMoForManyLangs model folder holds it)")
    if not files.inside(path, folder):
        raise ForeignModelError(f"{path}: leads outside the model folder; not read")
    return path


def _require(lexicon, tokens, path):
    missing = [t for t in tokens if t not in lexicon]
    if missing:
        raise ForeignModelError(
            f"{path}: lacks {', '.join(missing)} (EFML's model needs {', '.join(tokens)})"
        )


def config_candidates(config_path):
    """Where a model folder may hold the model config ``config_path`` names, relative to the
    folder, in the order they are tried: ``config_path`` itself when it is relative and stays
    inside, ``configs/<its file name>``, ``<its file name>``."""
    base = config_path.replace("\\", "/").rsplit(
        "/",
        1,  # pragma: no mutate, equivalent: any maxsplit leaves the same last part
    )[-1]
    found = []
    if not os.path.isabs(config_path) and not config_path.startswith(("/", "\\")):
        relative = os.path.normpath(config_path)
        if relative not in (os.curdir, os.pardir) and not relative.startswith(os.pardir + os.sep):
            found.append(relative)
    if base not in ("", os.curdir, os.pardir):  # a file's name, not the folder or its parent
        found += [os.path.join("configs", base), base]
    return list(dict.fromkeys(found))


def resolve_config(folder):
    """``(ModelConfig, where it came from)``: the model config ``config.json`` names, looked for
    inside ``folder`` only (see the module docstring)."""
    config_json = _inside(folder, CONFIG_FILE)
    config_path = parse_train_config(_read_json_bytes(config_json), config_json)
    candidates = config_candidates(config_path)
    for candidate in candidates:
        path = os.path.join(folder, candidate)
        # Never outside the folder: a link leading out is not followed.
        if files.inside(path, folder) and os.path.isfile(path):
            return parse_model_config(_read_json_bytes(path), path), path
    base = config_path.replace("\\", "/").rsplit(
        "/",
        1,  # pragma: no mutate, equivalent: any maxsplit leaves the same last part
    )[-1]
    if base in STANDARD_CONFIG_NAMES:
        return _model_config(
            STANDARD_CONFIG,
            f"EFML's standard {base}",  # pragma: no mutate, the valid config never shows it
        ), "standard"
    raise ForeignModelError(
        f"{config_json}: config_path {checks.shown(config_path, 60)} names no model config in "
        f"the folder ({', '.join(candidates) or 'no file name'}); put it there"
    )


def _read_json_bytes(path):
    return untrusted_files.read_bounded(path, "JSON config", MAX_CONFIG_BYTES, ForeignModelError)


def parse_train_config(data, source="config.json"):
    """``config_path`` of a ``config.json``'s bytes (the trainer's argparse dump). The fuzz
    target of that file."""
    options = untrusted_files.parse_json(bytes(data), source, "config.json", ForeignModelError)
    if not isinstance(options, dict):
        raise ForeignModelError(f"{source}: expected a JSON object, got {type(options).__name__}")
    path = options.get("config_path")
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise ForeignModelError(
            f"{source}: 'config_path' must name the model config, got {checks.shown(path)}"
        )
    return path


def parse_model_config(data, source="model config"):
    """The ``ModelConfig`` of a model config's bytes. The fuzz target of that file."""
    config = untrusted_files.parse_json(bytes(data), source, "model config", ForeignModelError)
    return _model_config(config, source)


def _model_config(config, source):
    def section(name):
        value = config.get(name) if isinstance(config, dict) else None
        if not isinstance(value, dict):
            raise ForeignModelError(f"{source}: '{name}' must be a JSON object")
        return value

    encoder, embedder = section("encoder"), section("token_embedder")

    def value(sec, name, key, rule, minimum=1):
        found = sec.get(key)
        if rule == "int" and not (checks.is_integer(found) and found >= minimum):
            at_least = "a positive" if minimum else "a non-negative"
            raise ForeignModelError(
                f"{source}: '{name}.{key}' must be {at_least} integer, got {checks.shown(found)}"
            )
        return found

    # frontend.py compares encoder.name with 'elmo' as written (its layer 0 is then the token
    # embedding doubled); the token embedder's name is compared lowercased.
    if encoder.get("name") != "elmo":
        raise ForeignModelError(
            f"{source}: 'encoder.name' is {checks.shown(encoder.get('name'))}; only EFML's "
            "'elmo' encoder (every released model) is supported"
        )
    name = embedder.get("name")
    if not isinstance(name, str) or name.lower() != "cnn":
        raise ForeignModelError(
            f"{source}: 'token_embedder.name' is {checks.shown(name)}; only EFML's 'cnn' token "
            "embedder (every released model) is supported"
        )
    filters = embedder.get("filters")
    if not (
        isinstance(filters, list)
        and filters
        and all(
            isinstance(f, list) and len(f) == 2 and all(checks.is_integer(v) for v in f)
            for f in filters
        )
        and all(1 <= w <= MAX_CHARACTERS_PER_TOKEN and n >= 1 for w, n in filters)
    ):
        raise ForeignModelError(
            f"{source}: 'token_embedder.filters' must be [width, count] pairs, widths 1 to "
            f"{MAX_CHARACTERS_PER_TOKEN}, got {checks.shown(filters)}"
        )
    activation = embedder.get("activation")
    if activation not in ("relu", "tanh"):
        raise ForeignModelError(
            f"{source}: 'token_embedder.activation' must be 'relu' or 'tanh', got "
            f"{checks.shown(activation)}"
        )
    if embedder.get("max_characters_per_token") != MAX_CHARACTERS_PER_TOKEN:
        raise ForeignModelError(
            f"{source}: 'token_embedder.max_characters_per_token' must be "
            f"{MAX_CHARACTERS_PER_TOKEN} (every released model's), got "
            f"{checks.shown(embedder.get('max_characters_per_token'))}"
        )
    clips = []
    for key in ("cell_clip", "proj_clip"):
        clip = encoder.get(key)
        if clip is not None and not (
            checks.is_number(clip) and 0 <= clip < float("inf")  # pragma: no mutate, INF is inf
        ):
            raise ForeignModelError(
                f"{source}: 'encoder.{key}' must be a non-negative number or null, got "
                f"{checks.shown(clip)}"
            )
        clips.append(float(clip) if clip else None)  # EFML: `if clip:`, so 0 clips nothing
    return ModelConfig(
        filters=tuple((int(w), int(n)) for w, n in filters),
        n_highway=value(embedder, "token_embedder", "n_highway", "int", 0),
        activation=activation,
        word_dim=value(embedder, "token_embedder", "word_dim", "int", 0),
        char_dim=value(embedder, "token_embedder", "char_dim", "int"),
        projection_dim=value(encoder, "encoder", "projection_dim", "int"),
        dim=value(encoder, "encoder", "dim", "int"),
        n_layers=value(encoder, "encoder", "n_layers", "int"),
        cell_clip=clips[0],
        proj_clip=clips[1],
    )


def expected_shapes(config, n_chars, n_words):
    """``(token_embedder shapes, encoder shapes)``, ``{name: shape}``, of a model of ``config``
    with ``n_chars`` and ``n_words`` dictionary entries (PyTorch's layouts: ``Linear`` ``(out,
    in)``, ``Conv1d`` ``(out, in, width)``)."""
    f, p, d = config.n_filters, config.projection_dim, config.dim
    embedder = {}
    if config.word_dim:
        embedder["word_emb_layer.embedding.weight"] = (n_words, config.word_dim)
    embedder["char_emb_layer.embedding.weight"] = (n_chars, config.char_dim)
    for i, (width, count) in enumerate(config.filters):
        embedder[f"convolutions.{i}.weight"] = (count, config.char_dim, width)
        embedder[f"convolutions.{i}.bias"] = (count,)
    for k in range(config.n_highway):
        embedder[f"highways._layers.{k}.weight"] = (2 * f, f)  # [transform; gate] rows
        embedder[f"highways._layers.{k}.bias"] = (2 * f,)
    embedder["projection.weight"] = (p, config.word_dim + f)  # word columns first
    embedder["projection.bias"] = (p,)
    encoder = {}
    for layer in range(config.n_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            encoder[f"{prefix}.input_linearity.weight"] = (4 * d, p)
            encoder[f"{prefix}.state_linearity.weight"] = (4 * d, p)
            encoder[f"{prefix}.state_linearity.bias"] = (4 * d,)
            encoder[f"{prefix}.state_projection.weight"] = (p, d)
    return embedder, encoder


def check_tensors(path, expected, where, found):
    """``ForeignModelError`` naming the state_dict file ``path`` for the first tensor of
    ``found`` (``{name: (shape, dtype)}``) that is missing, extra or of another shape or dtype
    than ``expected`` (``{name: shape}``) gives it; ``where`` names what gave the shapes."""
    if missing := [k for k in expected if k not in found]:
        raise ForeignModelError(f"{path}: lacks {missing[0]} (the model config names it)")
    if extra := [k for k in found if k not in expected]:
        raise ForeignModelError(f"{path}: holds {extra[0]}, which {where} has no place for")
    for name, shape in expected.items():
        found_shape, dtype = found[name]
        if tuple(found_shape) != shape:
            raise ForeignModelError(
                f"{path}: {name} has shape {tuple(found_shape)}, expected {shape} for {where} "
                "and the dictionaries"
            )
        if dtype.kind != "f":
            raise ForeignModelError(f"{path}: {name} holds {dtype}, not floats")


def _finite(path, tensors):
    """``tensors``, each checked to hold float32 values (no NaN, no infinity, nothing past
    float32's range, which a float64 tensor could hold): the converted weight file holds
    float32, and its loader refuses anything else."""
    for name, array in tensors.items():
        with np.errstate(over="ignore"):  # a float64 beyond float32 becomes inf: refused
            finite = np.all(np.isfinite(array.astype(np.float32)))
        if not finite:
            raise ForeignModelError(
                f"{path}: {name} holds NaN, infinity or values past float32's range; the model "
                "cannot be converted"
            )
    return tensors


def _check_ids(folder, char_lexicon, word_lexicon):
    """``ForeignModelError`` for a dictionary whose ids do not number its entries ``0..n-1``:
    the tables have a row per entry."""
    for dic, lexicon in ((CHAR_DIC, char_lexicon), (WORD_DIC, word_lexicon)):
        if lexicon and max(lexicon.values()) >= len(lexicon):
            raise ForeignModelError(
                f"{os.path.join(folder, dic)}: ids run to {max(lexicon.values())} for "
                f"{len(lexicon)} entries; the table has a row per entry"
            )
