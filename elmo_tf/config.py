"""ElmoConfig: the architecture described by an official ``options.json``."""

import dataclasses
import json
import os

from elmo_tf import characters, files
from elmo_tf.errors import OptionsError

ACTIVATIONS = ("relu", "tanh")


class _InvalidValue(OptionsError):
    """A value that failed validation; ``from_options`` names the file it came from."""

    def __init__(self, key, message):
        super().__init__(f"ElmoConfig: '{key}' {message}")
        self.key = key
        self.message = message

    def from_source(self, source):
        return OptionsError(f"{source}: '{self.key}' {self.message}")


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
        n_characters: character vocabulary size (262 at inference; bilm-tf trains with 261).
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

    def __post_init__(self):
        object.__setattr__(self, "filters", tuple(tuple(int(v) for v in f) for f in self.filters))
        self.validate()

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
        # bilm-tf only projects the CNN output when its width differs from P.
        return self.n_filters != self.projection_dim

    def validate(self):
        def fail(key, message):
            raise _InvalidValue(key, message)

        if not self.filters:
            fail("char_cnn.filters", "must list at least one [width, num_filters] pair")
        for width, num in self.filters:
            if not 1 <= width <= self.max_characters_per_token or num < 1:
                fail("char_cnn.filters", f"has an invalid entry [{width}, {num}]")
        for key, value in [
            ("char_cnn.embedding.dim", self.char_embedding_dim),
            ("lstm.projection_dim", self.projection_dim),
            ("lstm.dim", self.lstm_dim),
            ("lstm.n_layers", self.n_lstm_layers),
        ]:
            if not isinstance(value, int) or value < 1:
                fail(key, f"must be a positive integer, got {value!r}")
        if not isinstance(self.n_highway, int) or self.n_highway < 0:
            fail("char_cnn.n_highway", f"must be a non-negative integer, got {self.n_highway!r}")
        if self.activation not in ACTIVATIONS:
            fail("char_cnn.activation", f"must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.max_characters_per_token != characters.MAX_CHARS_PER_TOKEN:
            fail(
                "char_cnn.max_characters_per_token",
                f"must be {characters.MAX_CHARS_PER_TOKEN} (the character mapping is fixed), "
                f"got {self.max_characters_per_token!r}",
            )
        if self.n_characters not in (261, 262):
            fail("char_cnn.n_characters", f"must be 261 or 262, got {self.n_characters!r}")
        for key, value in [("lstm.cell_clip", self.cell_clip), ("lstm.proj_clip", self.proj_clip)]:
            if value is not None and value <= 0:
                fail(key, f"must be positive or absent, got {value!r}")

    @classmethod
    def from_options(cls, options, source="options"):
        """Builds a config from a parsed options.json dict (``source`` names it in errors)."""
        if not isinstance(options, dict):
            raise OptionsError(f"{source}: expected a JSON object, got {type(options).__name__}")

        def get(path, default=KeyError):
            node = options
            for part in path.split("."):
                if not isinstance(node, dict) or part not in node:
                    if default is KeyError:
                        raise OptionsError(f"{source}: missing key '{path}'")
                    return default
                node = node[part]
            return node

        def integer(path, default=KeyError):
            value = get(path, default)
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionsError(f"{source}: '{path}' must be an integer, got {value!r}")
            return value

        filters = get("char_cnn.filters")
        if not isinstance(filters, list) or not all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(v, int) for v in f)
            for f in filters
        ):
            raise OptionsError(
                f"{source}: 'char_cnn.filters' must be a list of [width, num_filters] integer "
                f"pairs, got {filters!r}"
            )
        cell_clip = get("lstm.cell_clip", None)
        proj_clip = get("lstm.proj_clip", None)
        for path, value in [("lstm.cell_clip", cell_clip), ("lstm.proj_clip", proj_clip)]:
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise OptionsError(f"{source}: '{path}' must be a number, got {value!r}")
        try:
            return cls(
                filters=filters,
                char_embedding_dim=integer("char_cnn.embedding.dim"),
                n_highway=integer("char_cnn.n_highway"),
                activation=get("char_cnn.activation"),
                projection_dim=integer("lstm.projection_dim"),
                lstm_dim=integer("lstm.dim"),
                n_lstm_layers=integer("lstm.n_layers", 2),
                cell_clip=None if cell_clip is None else float(cell_clip),
                proj_clip=None if proj_clip is None else float(proj_clip),
                use_skip_connections=bool(get("lstm.use_skip_connections", True)),
                max_characters_per_token=integer(
                    "char_cnn.max_characters_per_token", characters.MAX_CHARS_PER_TOKEN
                ),
                n_characters=integer("char_cnn.n_characters", characters.NUM_CHAR_IDS),
            )
        except _InvalidValue as e:
            raise e.from_source(source) from None

    @classmethod
    def from_file(cls, path):
        """Reads an official options.json; errors name the file and the offending key."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                options = json.load(f)
        except FileNotFoundError:
            raise OptionsError(f"{path}: options file not found") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise OptionsError(f"{path}: not a valid JSON options file ({e})") from None
        except OSError as e:
            raise OptionsError(f"{path}: cannot read options file ({e.strerror})") from None
        return cls.from_options(options, source=path)

    def to_options(self):
        """Returns the options.json dict of this config (bilm-tf's schema)."""
        lstm = {
            "use_skip_connections": self.use_skip_connections,
            "projection_dim": self.projection_dim,
            "dim": self.lstm_dim,
            "n_layers": self.n_lstm_layers,
        }
        if self.cell_clip is not None:
            lstm["cell_clip"] = _plain_number(self.cell_clip)
        if self.proj_clip is not None:
            lstm["proj_clip"] = _plain_number(self.proj_clip)
        return {
            "lstm": lstm,
            "char_cnn": {
                "activation": self.activation,
                "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway,
                "embedding": {"dim": self.char_embedding_dim},
                "n_characters": self.n_characters,
                "max_characters_per_token": self.max_characters_per_token,
            },
        }

    def save(self, path):
        """Writes the options.json of this config, replacing ``path`` atomically."""
        files.write_text(path, json.dumps(self.to_options(), indent=2) + "\n")

    def get_config(self):
        return self.to_options()


def _plain_number(value):
    return int(value) if float(value).is_integer() else value
