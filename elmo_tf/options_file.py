"""Reading an official ``options.json`` into an ``ElmoConfig``.

The file is untrusted input: it is read no further than ``MAX_OPTIONS_BYTES``
(``elmo_tf.untrusted_files``), parsed as strict JSON (a key given twice refused), its structure
walked (``lstm`` and ``char_cnn`` objects, the required keys), a key one typo away from a key
the format defines refused, and its values handed to ``ElmoConfig``, which checks each of them
once (``ElmoConfig.validate``) and bounds the model's size (``ElmoConfig.check_size``). Errors
name the file and the key.
"""

from elmo_tf import characters, checks, untrusted_files
from elmo_tf.errors import OptionsError

# An official options.json is a few hundred bytes; reading stops well before memory is at risk.
MAX_OPTIONS_BYTES = 1 << 20


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
    in errors): its values go to the class, which checks them (its ``OptionsError`` names the
    key, ``from_source`` names the file too)."""
    if not isinstance(options, dict):
        raise OptionsError(f"{source}: expected a JSON object, got {type(options).__name__}")

    def get(path, default=KeyError):
        node = options
        parts = path.split(".")
        for i, part in enumerate(parts):
            if not isinstance(node, dict):
                parent = ".".join(parts[:i])
                raise OptionsError(
                    f"{source}: '{parent}' must be a JSON object, got {checks.shown(node)}"
                )
            if part not in node:
                if default is KeyError:
                    raise OptionsError(f"{source}: missing key '{path}'")
                return default
            node = node[part]
        return node

    _check_key_spelling(options, source)
    filters = get("char_cnn.filters")
    if not isinstance(filters, list) or not all(
        isinstance(f, list) and len(f) == 2 and all(map(checks.is_integer, f)) for f in filters
    ):
        raise OptionsError(
            f"{source}: 'char_cnn.filters' must be a list of [width, num_filters] integer "
            f"pairs, got {checks.shown(filters)}"
        )
    try:
        config = config_class(
            filters=filters,
            char_embedding_dim=get("char_cnn.embedding.dim"),
            n_highway=get("char_cnn.n_highway"),
            activation=get("char_cnn.activation"),
            projection_dim=get("lstm.projection_dim"),
            lstm_dim=get("lstm.dim"),
            n_lstm_layers=get("lstm.n_layers", 2),
            cell_clip=get("lstm.cell_clip", None),
            proj_clip=get("lstm.proj_clip", None),
            use_skip_connections=get("lstm.use_skip_connections", True),
            max_characters_per_token=get(
                "char_cnn.max_characters_per_token", characters.MAX_CHARS_PER_TOKEN
            ),
            n_characters=get("char_cnn.n_characters", characters.NUM_CHAR_IDS),
        )
        config.check_size(size_limits)
    except OptionsError as e:
        if not hasattr(e, "from_source"):
            raise
        raise e.from_source(source) from None
    return config


# The keys the options format defines in its model sections. Other keys stay accepted (official
# files carry bilm-tf's training settings beside them), except one a typo away from a defined
# key: "cel_clip" silently meant "no cell clipping" and outputs 1e-3 off.
KNOWN_KEYS = {
    "lstm": ("cell_clip", "dim", "n_layers", "proj_clip", "projection_dim", "use_skip_connections"),
    "char_cnn": (
        "activation",
        "embedding",
        "filters",
        "max_characters_per_token",
        "n_characters",
        "n_highway",
    ),
    "char_cnn.embedding": ("dim",),
}


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
                raise OptionsError(
                    f"{source}: '{section}.{key[:60]}' is not a key of the options format; "
                    f"did you mean '{section}.{close}'? (misspelt, it would be ignored)"
                )
