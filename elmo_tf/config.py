"""ElmoConfig: the architecture described by an official ``options.json``, each value checked
once (``validate``), its size bounded (``check_size``); ``elmo_tf.formats.options_file`` reads a
file into one.

An options file is untrusted input: it decides how much memory the model takes, so its sizes
are bounded before anything is built. ``SIZE_LIMITS`` holds the defaults:

* ``parameters``: total weights of the biLM (1e9, about 4 GB of float32; the published
  'original' 2x4096_512 model has 93.6M);
* ``dimension``: each width (``char_cnn.embedding.dim``, each filter count and their sum,
  ``lstm.projection_dim``, ``lstm.dim``; 32768, the 'original' model's largest is 4096);
* ``layers``: ``lstm.n_layers``, ``char_cnn.n_highway`` and the number of CNN filters (32).

Raise them for a larger model with ``size_limits={"parameters": ...}`` (``None`` lifts a
limit), accepted by ``from_file``, ``from_options`` and ``elmo_tf.load_pretrained``, or with
the environment variables ``ELMO_TF_MAX_PARAMETERS``, ``ELMO_TF_MAX_DIMENSION`` and
``ELMO_TF_MAX_LAYERS`` (which also reach the ``elmo-tf`` command). The argument wins over the
environment.
"""

import dataclasses
import json
import math

from elmo_tf import checks
from elmo_tf.errors import OptionsError
from elmo_tf.formats import options_file
from elmo_tf.system import environment, files
from elmo_tf.tokens import characters, codepoints

SIZE_LIMITS = {"parameters": 1_000_000_000, "dimension": 32_768, "layers": 32}
SIZE_LIMIT_ENV = {
    "parameters": "ELMO_TF_MAX_PARAMETERS",
    "dimension": "ELMO_TF_MAX_DIMENSION",
    "layers": "ELMO_TF_MAX_LAYERS",
}


def current_size_limits(overrides=None):
    """The limits in force: ``SIZE_LIMITS``, then the environment, then ``overrides``."""
    limits = dict(SIZE_LIMITS)
    for name, variable in SIZE_LIMIT_ENV.items():
        if (value := environment.value(variable)) is not None:
            limits[name] = value
    for name, value in (overrides or {}).items():
        if name not in SIZE_LIMITS:
            raise OptionsError(f"size_limits: unknown limit {name!r}, expected {list(SIZE_LIMITS)}")
        if value is not None and not checks.is_integer(value):
            raise OptionsError(f"size_limits: {name!r} must be an integer or None, got {value!r}")
        limits[name] = math.inf if value is None else value  # None: no limit
    return limits


class InvalidValue(OptionsError):
    """A value that failed validation; ``from_options`` names the file it came from."""

    def __init__(self, key, message):
        self.key = key
        self.message = message
        super().__init__(str(self.from_source("ElmoConfig")))

    def from_source(self, source):
        subject = "the model" if self.key is None else f"'{self.key}'"
        return OptionsError(f"{source}: {subject} {self.message}")


@dataclasses.dataclass(frozen=True)
class ElmoConfig:
    """Hyper-parameters of an ELMo biLM, in the terms of bilm-tf's options.json.

    Args:
        filters: ``((width, num_filters), ...)`` of the character CNN.
        char_embedding_dim: size of a character embedding (``char_cnn.embedding.dim``).
        n_highway: number of highway layers after the CNN.
        activation: ``"relu"`` or ``"tanh"``, applied after max-pooling each filter.
        projection_dim: size P of token embeddings and of each LSTM output.
        lstm_dim: size D of each LSTM cell state.
        n_lstm_layers: LSTM layers per direction.
        cell_clip: clip value for the cell state (``None``: no clipping).
        proj_clip: clip value for the projected output (``None``: no clipping).
        use_skip_connections: add each LSTM layer's input to its output, from layer 2 on.
        max_characters_per_token: character slots per token (50 in every published model).
        n_characters: character ids, 0 (a padded token position) included: 262 at inference
            and 261 in training with UTF-8 bytes; the table's size with code points.
        character_scheme: how a token becomes character ids: ``"utf8-bytes"`` (bilm-tf's,
            ``elmo_tf.tokens.characters``) or ``"codepoints"`` (ELMoForManyLangs', a per-model table
            of code points: ``elmo_tf.tokens.codepoints``).
        special_characters: with code points, the ids of ``codepoints.CHAR_SPECIALS``.
        word_embedding_dim: width of the word embedding concatenated before the token
            projection (ELMoForManyLangs' word branch); 0: none.
        n_words: word ids, 0 (a padded position) included; 0 without a word embedding.
        special_words: with a word embedding, the ids of ``codepoints.WORD_SPECIALS``.
    """

    filters: tuple
    char_embedding_dim: int
    n_highway: int
    activation: str
    projection_dim: int
    lstm_dim: int
    n_lstm_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    max_characters_per_token: int = characters.MAX_CHARS_PER_TOKEN
    n_characters: int = characters.NUM_CHAR_IDS
    character_scheme: str = codepoints.UTF8_BYTES
    special_characters: tuple | None = None
    word_embedding_dim: int = 0
    n_words: int = 0
    special_words: tuple | None = None

    def __post_init__(self):
        try:
            filters = tuple(tuple(_whole(v) for v in f) for f in self.filters)
        except (TypeError, ValueError):
            raise InvalidValue(
                "char_cnn.filters",
                "must be a list of [width, num_filters] integer pairs, got "
                f"{checks.shown(self.filters)}",
            ) from None
        object.__setattr__(self, "filters", filters)
        for name, names in (
            ("special_characters", codepoints.CHAR_SPECIALS),
            ("special_words", codepoints.WORD_SPECIALS),
        ):
            value = getattr(self, name)
            if isinstance(value, dict):
                value = options_file.special_ids_tuple(value, names, name)
            if isinstance(value, list):
                value = tuple(value)
            object.__setattr__(self, name, value)
        self.validate()
        for name in ("cell_clip", "proj_clip"):  # 3 and 3.0 are one config
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(getattr(self, name)))

    @property
    def n_filters(self):
        """F, the width of the CNN output (sum of all filter counts)."""
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self):
        """2P, the width of every ELMo layer (forward and backward concatenated)."""
        return 2 * self.projection_dim

    @property
    def uses_token_projection(self):
        # bilm-tf only projects the CNN output when its width differs from P; a word branch
        # is always projected with it (ELMoForManyLangs).
        return self.word_embedding_dim > 0 or self.n_filters != self.projection_dim

    @property
    def uses_codepoints(self):
        """Whether tokens are mapped by a per-model code-point table
        (``elmo_tf.tokens.codepoints``)."""
        return self.character_scheme == codepoints.CODEPOINTS

    @property
    def id_width(self):
        """Ids per token row the model takes: the character slots, then the word id when the
        model has a word embedding (``elmo_tf.tokens.codepoints``)."""
        return self.max_characters_per_token + (1 if self.word_embedding_dim else 0)

    @property
    def char_table_rows(self):
        """Rows of the model's character table: 262 with UTF-8 bytes (even for 261 ids), the
        ids with code points."""
        return self.n_characters if self.uses_codepoints else characters.NUM_CHAR_IDS

    @property
    def parameter_count(self):
        """Number of weights of the biLM (every variable the weight file fills)."""
        e, f, p, d = self.char_embedding_dim, self.n_filters, self.projection_dim, self.lstm_dim
        count = self.char_table_rows * e  # the model always has a row per id, 0 included
        count += sum(width * e * num + num for width, num in self.filters)
        count += self.n_highway * 2 * (f * f + f)
        count += self.n_words * self.word_embedding_dim
        if self.uses_token_projection:
            count += (f + self.word_embedding_dim) * p + p
        # Per direction and layer: W_0 over [x; h] (2P, 4D), B (4D,), W_P_0 (D, P).
        count += 2 * self.n_lstm_layers * (2 * p * 4 * d + 4 * d + d * p)
        return count

    def describe(self):
        """The architecture in the published models' naming: ``2x4096_512_2048cnn_2xhighway``."""
        described = (
            f"{self.n_lstm_layers}x{self.lstm_dim}_{self.projection_dim}_{self.n_filters}cnn_"
            f"{self.n_highway}xhighway"
        )
        if self.word_embedding_dim:
            described += f"_{self.word_embedding_dim}word"
        return described

    def validate(self):
        """Raises ``OptionsError`` naming the first value that breaks its rule (the rules:
        ``elmo_tf.formats.options_file.FIELDS``)."""
        for field in options_file.FIELDS:
            if problem := field.check(getattr(self, field.attribute)):
                raise InvalidValue(field.key, problem)
        if found := options_file.cross_check(self):
            raise InvalidValue(*found)

    def check_size(self, size_limits=None):
        """Refuses a config larger than the limits (see the module docstring).

        Args:
            size_limits: dict overriding some of ``SIZE_LIMITS`` (``parameters``,
                ``dimension``, ``layers``); the environment variables apply under it.
        """
        limits = current_size_limits(size_limits)

        def over(key, value, limit):
            # shown: a file's integer may have thousands of digits; the line stays one line
            value = checks.shown(value)
            what = f"has {value} parameters" if key is None else f"is {value}"
            raise InvalidValue(
                key,
                f"{what}, above the {limit} limit of {limits[limit]} (raise it with "
                f"size_limits={{'{limit}': ...}} or {SIZE_LIMIT_ENV[limit]})",
            )

        for field in options_file.FIELDS:
            for limit, value in field.sizes(getattr(self, field.attribute)):
                if value > limits[limit]:
                    over(field.key, value, limit)
        if self.parameter_count > limits["parameters"]:
            over(None, self.parameter_count, "parameters")

    @classmethod
    def from_options(cls, options, source="options", size_limits=None):
        """Builds a config from a parsed options.json dict (``source`` names it in errors),
        every value checked and the model's size bounded (``size_limits``); see
        ``elmo_tf.formats.options_file``."""
        return options_file.config_from_options(cls, options, source, size_limits)

    @classmethod
    def from_file(cls, path, size_limits=None):
        """Reads an official options.json; errors name the file and the offending key (see
        ``elmo_tf.formats.options_file``)."""
        return options_file.read_config(cls, path, size_limits)

    def to_options(self):
        """Returns the options.json dict of this config (bilm-tf's schema)."""
        return options_file.to_options(self)

    def save(self, path):
        """Writes the options.json of this config, replacing ``path`` atomically."""
        files.write_text(path, json.dumps(self.to_options(), indent=2) + "\n")

    def get_config(self):
        return self.to_options()


def _whole(value):
    """``value`` as an int, for filter entries given as ints (or numpy ints); not bool/float."""
    if isinstance(value, bool | float | str):
        raise TypeError(value)
    return int(value)
