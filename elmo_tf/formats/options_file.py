"""The official ``options.json`` format: its fields in one table (``FIELDS``), and reading a
file into an ``ElmoConfig``.

Each row of ``FIELDS`` is one value of the format: its key in the file, the ``ElmoConfig``
attribute that holds it, its value when the file leaves it out, the rule it must meet, the size
limits it counts against and how it is written back. Reading (``config_from_options``), the
config's checks (``ElmoConfig.validate``, ``ElmoConfig.check_size``), the typo check
(``KNOWN_KEYS``) and writing (``to_options``) all go through it.

Two optional sections extend bilm-tf's format for models converted from ELMoForManyLangs
(``elmo-tf convert``; docs/models.md, "The format extension"): ``characters`` (the character
scheme: ``utf8-bytes``, bilm-tf's and the default, or ``codepoints`` with the ids of the six
special characters) and ``word_embedding`` (the word branch: its width, its number of ids and
the ids of its four special words). A file without them is read as before, and a config
without them writes none of their keys.

The file is untrusted input: it is read no further than ``MAX_OPTIONS_BYTES``
(``elmo_tf.system.untrusted_files``), parsed as strict JSON (a key given twice refused), its
structure walked (``lstm`` and ``char_cnn`` objects, the required keys), a key one typo away from a
key the format defines refused, and its values handed to ``ElmoConfig``, which checks each of them
once and bounds the model's size. Errors name the file and the key.
"""

import dataclasses
import math

from elmo_tf import checks
from elmo_tf.errors import OptionsError
from elmo_tf.system import untrusted_files
from elmo_tf.tokens import characters, codepoints

# An official options.json is a few hundred bytes; reading stops well before memory is at risk.
FILE_NAME = "options.json"  # in a model directory (a weight file's name: weight_file.FILE_NAME)
MAX_OPTIONS_BYTES = 1 << 20

ACTIVATIONS = ("relu", "tanh")
N_CHARACTERS = (261, 262)  # bilm-tf trains with 261 ids, and runs with 262
REQUIRED = object()  # the default of a key every file must give


def _count_problem(value, minimum):
    """The rule of a count: an integer of at least ``minimum`` (0 or 1); what is wrong with
    ``value``, or ``None``."""
    if not checks.is_integer(value):
        return f"must be an integer, got {checks.shown(value)}"
    if value < minimum:
        rule = {0: "a non-negative integer", 1: "a positive integer"}[minimum]
        return f"must be {rule}, got {checks.shown(value)}"
    return None


# Module-level functions, not closures made at import: a closure made at import keeps the
# original code under every mutant (mutmut forks its workers after the imports).
def _positive(value):
    return _count_problem(value, 1)


def _non_negative(value):
    return _count_problem(value, 0)


def _max_characters(value):
    if not checks.is_integer(value) or value != characters.MAX_CHARS_PER_TOKEN:
        return (
            f"must be {characters.MAX_CHARS_PER_TOKEN} (the character mapping is fixed), "
            f"got {checks.shown(value)}"
        )
    return None


def _filters(filters):
    if not filters:
        return "must list at least one [width, num_filters] pair"
    for entry in filters:
        if len(entry) != 2:
            return f"has an entry {checks.shown(list(entry))}, not [width, num]"
        width, num = entry
        # max_characters_per_token is that constant (its own rule), so a width never exceeds it.
        if not 1 <= width <= characters.MAX_CHARS_PER_TOKEN or num < 1:
            return f"has an invalid entry [{width}, {num}]"
    return None


def _activation(value):
    if not isinstance(value, str) or value not in ACTIVATIONS:
        return f"must be one of {ACTIVATIONS}, got {checks.shown(value)}"
    return None


def _n_characters(value):
    if not checks.is_integer(value):
        return f"must be an integer, got {checks.shown(value)}"
    if value < 1:  # each scheme's own rule: cross_check
        return f"must be a positive integer, got {checks.shown(value)}"
    return None


def _scheme(value):
    if not isinstance(value, str) or value not in codepoints.SCHEMES:
        return f"must be one of {codepoints.SCHEMES}, got {checks.shown(value)}"
    return None


def _special_ids_problem(value, names):
    """The rule of a special-ids table: ``None`` (absent) or one positive id per name, as
    ``ElmoConfig`` holds it (a tuple in ``names``' order; the file's object is converted
    first, ``special_ids_tuple``); what is wrong with ``value``, or ``None``."""
    if value is None:
        return None
    if not isinstance(value, tuple) or len(value) != len(names):
        return f"must be an object with the ids of {', '.join(names)}"
    if not all(checks.is_integer(v) and v >= 1 for v in value):
        return f"must give a positive integer id for each of {', '.join(names)}"
    if len(set(value)) != len(value) and names == codepoints.CHAR_SPECIALS:
        return "must give each special character its own id"
    return None


def _special_character_ids(value):
    return _special_ids_problem(value, codepoints.CHAR_SPECIALS)


def _special_word_ids(value):
    return _special_ids_problem(value, codepoints.WORD_SPECIALS)


def special_ids_tuple(value, names, key):
    """A special-ids object of the file (``{"bos": 3, ...}``) as the config's tuple in
    ``names``' order; ``OptionsError`` naming ``key`` for other keys; other values as they are
    (the field's rule refuses them)."""
    if not isinstance(value, dict):
        return value
    if sorted(value) != sorted(names):
        raise OptionsError(
            f"'{key}' must have the keys {', '.join(names)}, got {checks.shown(sorted(value))}"
        )
    return tuple(value[name] for name in names)


def _named_characters(value):
    return dict(zip(codepoints.CHAR_SPECIALS, value))


def _named_words(value):
    return dict(zip(codepoints.WORD_SPECIALS, value))


def cross_check(config):
    """``(key, problem)`` for the first rule between fields that ``config`` breaks, else
    ``None``: the character scheme against ``n_characters`` and its special ids, the word
    branch's width against its ids."""
    n_chars, specials = config.n_characters, config.special_characters
    if config.character_scheme == codepoints.UTF8_BYTES:
        if n_chars not in N_CHARACTERS:
            return "char_cnn.n_characters", f"must be 261 or 262, got {checks.shown(n_chars)}"
        if specials is not None:
            return "characters.special_ids", "is for the codepoints scheme only"
        if config.word_embedding_dim:
            return "word_embedding.dim", (
                "needs the codepoints character scheme (its word vocabulary comes with it)"
            )
    else:
        if n_chars < len(codepoints.CHAR_SPECIALS) + 1:
            return "char_cnn.n_characters", (
                f"must be at least {len(codepoints.CHAR_SPECIALS) + 1} with code points (id 0 "
                f"and the special characters), got {n_chars}"
            )
        if specials is None:
            return "characters.special_ids", "is required with the codepoints scheme"
        if max(specials) >= n_chars:
            return "characters.special_ids", f"must be ids below n_characters ({n_chars})"
    words, dim, word_specials = config.n_words, config.word_embedding_dim, config.special_words
    if bool(words) != bool(dim):
        return "word_embedding.n_words", "and 'word_embedding.dim' must both be given, or neither"
    if words and word_specials is None:
        return "word_embedding.special_ids", "is required with a word embedding"
    if not words and word_specials is not None:
        return "word_embedding.special_ids", "is for a word embedding only"
    if words and max(word_specials) >= words:
        return "word_embedding.special_ids", f"must be ids below n_words ({words})"
    return None


def _boolean(value):
    if not isinstance(value, bool):
        return f"must be true or false, got {checks.shown(value)}"
    return None


def _clip(value):
    if value is None:
        return None
    if not checks.is_number(value):
        return f"must be a number, got {checks.shown(value)}"
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer beyond float range: JSON allows any length
        return f"must be a finite positive number, got {checks.shown(value)}"
    # NaN passes every comparison and inf (also what JSON's 1e400 parses to) clips nothing:
    # both would hide a broken file, so only finite positive numbers pass.
    if not finite or value <= 0:
        return f"must be a finite positive number or absent, got {checks.shown(value)}"
    return None


def _layers(value):
    return [("layers", value)]


def _width(value):
    return [("dimension", value)]


def _filter_sizes(filters):
    """Their number (layers), each count and their sum, the CNN's output width (dimension)."""
    nums = [num for _, num in filters]
    return [
        ("layers", len(filters)),
        *(("dimension", num) for num in nums),
        ("dimension", sum(nums)),
    ]


def _plain_number(value):
    return int(value) if float(value).is_integer() else value


def _lists(filters):
    return [list(f) for f in filters]


@dataclasses.dataclass(frozen=True)
class Field:
    """One value of the options format.

    Args:
        key: its place in the file, sections joined by dots (``"lstm.cell_clip"``).
        attribute: the ``ElmoConfig`` attribute that holds it.
        default: its value when the file leaves it out (``REQUIRED``: the file must give it).
        check: ``value -> None``, or what is wrong with it (``"must be ..., got ..."``).
        sizes: ``value -> [(limit, number)]``, the numbers ``ElmoConfig.check_size`` bounds
            (``limit`` a key of ``elmo_tf.config.SIZE_LIMITS``).
        written: ``value -> its JSON value`` (a value of ``None`` is left out of the file).
    """

    key: str
    attribute: str
    default: object
    check: object
    sizes: object = lambda value: []
    written: object = lambda value: value
    optional: bool = False  # written only when it is not its default (the extension's keys)


# In the published files' order (written back in it), except that filters come first in
# char_cnn: a file without that section is then told the key it must give first.
FIELDS = (
    Field("lstm.use_skip_connections", "use_skip_connections", True, _boolean),
    Field("lstm.projection_dim", "projection_dim", REQUIRED, _positive, _width),
    Field("lstm.cell_clip", "cell_clip", None, _clip, written=_plain_number),
    Field("lstm.proj_clip", "proj_clip", None, _clip, written=_plain_number),
    Field("lstm.dim", "lstm_dim", REQUIRED, _positive, _width),
    Field("lstm.n_layers", "n_lstm_layers", 2, _positive, _layers),
    Field("char_cnn.filters", "filters", REQUIRED, _filters, _filter_sizes, written=_lists),
    Field("char_cnn.activation", "activation", REQUIRED, _activation),
    Field("char_cnn.n_highway", "n_highway", REQUIRED, _non_negative, _layers),
    Field("char_cnn.embedding.dim", "char_embedding_dim", REQUIRED, _positive, _width),
    Field("char_cnn.n_characters", "n_characters", characters.NUM_CHAR_IDS, _n_characters),
    Field(
        "char_cnn.max_characters_per_token",
        "max_characters_per_token",
        characters.MAX_CHARS_PER_TOKEN,
        _max_characters,
    ),
    Field("characters.scheme", "character_scheme", codepoints.UTF8_BYTES, _scheme, optional=True),
    Field(
        "characters.special_ids",
        "special_characters",
        None,
        _special_character_ids,
        written=_named_characters,
    ),
    Field("word_embedding.dim", "word_embedding_dim", 0, _non_negative, _width, optional=True),
    Field("word_embedding.n_words", "n_words", 0, _non_negative, optional=True),
    Field(
        "word_embedding.special_ids",
        "special_words",
        None,
        _special_word_ids,
        written=_named_words,
    ),
)


def _sections():  # pragma: no mutate block, run at import, before mutmut forks a mutant
    """``{section: (its keys, sorted)}``; a nested section is a key of its parent."""
    sections = {}
    for field in FIELDS:
        parts = field.key.split(".")
        for depth in range(1, len(parts)):
            sections.setdefault(".".join(parts[:depth]), set()).add(parts[depth])
    return {section: tuple(sorted(keys)) for section, keys in sections.items()}


# The keys the options format defines in its model sections. Other keys stay accepted (official
# files carry bilm-tf's training settings beside them), except one a typo away from a defined
# key: "cel_clip" silently meant "no cell clipping" and outputs 1e-3 off.
KNOWN_KEYS = _sections()


def read_config(config_class, path, size_limits=None):
    """The ``config_class`` (``ElmoConfig``) of the options file ``path``; errors name the file
    and the offending key. ``size_limits`` raises the bounds on the model's size
    (``elmo_tf.config``)."""
    data = untrusted_files.read_bounded(
        path,
        "options file",
        MAX_OPTIONS_BYTES,
        OptionsError,
        hint=" (an options.json is a few hundred bytes)",
    )
    options = untrusted_files.parse_json(data, path, "options file", OptionsError)
    return config_from_options(config_class, options, source=str(path), size_limits=size_limits)


def config_from_options(config_class, options, source="options", size_limits=None):
    """The ``config_class`` (``ElmoConfig``) of a parsed options.json dict (``source`` names it
    in errors): each field's value (``FIELDS``) goes to the class, which checks them (its
    ``OptionsError`` names the key, ``from_source`` names the file too)."""
    if not isinstance(options, dict):
        raise OptionsError(f"{source}: expected a JSON object, got {type(options).__name__}")
    _check_key_spelling(options, source)
    values = {field.attribute: _value(options, field, source) for field in FIELDS}
    for attribute, key, names in (
        ("special_characters", "characters.special_ids", codepoints.CHAR_SPECIALS),
        ("special_words", "word_embedding.special_ids", codepoints.WORD_SPECIALS),
    ):
        try:
            values[attribute] = special_ids_tuple(values[attribute], names, key)
        except OptionsError as e:
            raise OptionsError(f"{source}: {e}") from None
    filters = values["filters"]
    # The file's form of the filters (JSON lists of two integers); the config checks them once
    # converted, a file's [1, 8, 3] is no pair to convert.
    if not isinstance(filters, list) or not all(
        isinstance(f, list) and len(f) == 2 and all(map(checks.is_integer, f)) for f in filters
    ):
        raise OptionsError(
            f"{source}: 'char_cnn.filters' must be a list of [width, num_filters] integer "
            f"pairs, got {checks.shown(filters)}"
        )
    try:
        config = config_class(**values)
        config.check_size(size_limits)
    except OptionsError as e:
        if not hasattr(e, "from_source"):
            raise
        raise e.from_source(source) from None
    return config


def _value(options, field, source):
    """The value of ``field`` in ``options``, its default if the file leaves it out."""
    node = options
    parts = field.key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict):
            parent = ".".join(parts[:i])
            raise OptionsError(
                f"{source}: '{parent}' must be a JSON object, got {checks.shown(node)}"
            )
        if part not in node:
            if field.default is REQUIRED:
                raise OptionsError(f"{source}: missing key '{field.key}'")
            return field.default
        node = node[part]
    return node


def to_options(config):
    """The options.json dict of ``config`` (every field; a clip of ``None`` left out, and the
    extension's keys when they hold their defaults)."""
    options = {}
    for field in FIELDS:
        value = getattr(config, field.attribute)
        if value is None or (field.optional and value == field.default):
            continue
        *sections, name = field.key.split(".")
        node = options
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = field.written(value)
    return options


def _check_key_spelling(options, source):
    """Raises ``OptionsError`` for a key that is a typo of a key the format defines."""
    for section, known in KNOWN_KEYS.items():
        node = options
        for part in section.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        for key in node:
            if key in known or not isinstance(key, str):
                continue
            close = checks.closest(key, known)
            if close:
                typo = checks.shown(  # pragma: no mutate, equivalent: typos are short; None=False
                    key,
                    60,  # pragma: no mutate, equivalent: a typo is under 40 characters
                    quote=False,
                )
                raise OptionsError(
                    f"{source}: '{section}.{typo}' is not a key of the options format; "
                    f"did you mean '{section}.{close}'? (misspelt, it would be ignored)"
                )
