"""``SignatureSpec``: a signature's declared inputs and outputs, and request validation.

Every request is checked here before it runs or joins a batch, so that a bad request fails
alone, with INVALID_ARGUMENT and a message naming the input, and never poisons a batch:

- each input's declared shape, before its values are read: rank and fixed dimensions as the
  signature declares them, and the server's ``RequestLimits`` (``check_declared_shape``);
- every input present, no unknown input; each input's rank and fixed dimensions as declared;
- a non-empty batch, the same batch size in every input;
- the ELMo contract's value constraints (``elmo_tf.export.saved_model_module``), which the
  graph also asserts but only for the whole batch: ``sequence_len`` in ``[0, max_len]`` of its
  row of ``tokens``, ``char_ids`` in ``[0, 261]`` (a code-point model's: its own bounds,
  ``SignatureSpec.id_bounds``), and a code-point model's text UTF-8 (its graph decodes it:
  ``SignatureSpec.utf8_text``).
"""

import dataclasses

import elmo_tf.serving._deps  # noqa: F401 - the [serving] extra and the backend, first

import grpc
from tensorflow.core.framework import types_pb2

from elmo_tf.checks import shown
from elmo_tf.serving.errors import ServingError, invalid_argument
from elmo_tf.serving.tensors import dtype_name
from elmo_tf.tokens.characters import NUM_CHAR_IDS, split_tokens

# The inputs of the ``tokens`` signature (elmo_tf.export.saved_model_module).
TOKENS_INPUTS = ("tokens", "sequence_len")


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One input or output of a signature: its alias, ``DataType`` enum and shape.

    ``shape`` is a tuple with ``None`` for an unknown dimension, or ``None`` for an unknown rank.
    """

    alias: str
    dtype: int
    shape: tuple | None

    @classmethod
    def from_tensor_info(cls, alias, info):
        if info.tensor_shape.unknown_rank:
            return cls(alias, info.dtype, None)
        dims = tuple(None if d.size < 0 else d.size for d in info.tensor_shape.dim)
        return cls(alias, info.dtype, dims)

    def describe(self):
        """``"int32 [batch, max_len]"``-style text for error messages."""
        if self.shape is None:
            return f"{dtype_name(self.dtype)} of any shape"
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{dtype_name(self.dtype)} [{dims}]"


class SignatureSpec:
    """The inputs and outputs of one signature, from its ``SignatureDef``.

    Args:
        name: the signature key (``"default"``, ``"serving_default"``, ...).
        signature_def: the ``tensorflow.SignatureDef`` proto from ``saved_model.pb``.
    """

    def __init__(self, name, signature_def, id_bounds=(NUM_CHAR_IDS, None), utf8_text=False):
        self.name = name
        self.signature_def = signature_def
        self.id_bounds = id_bounds
        self.utf8_text = utf8_text
        self.inputs = {
            a: TensorSpec.from_tensor_info(a, i) for a, i in signature_def.inputs.items()
        }
        self.outputs = {
            a: TensorSpec.from_tensor_info(a, i) for a, i in signature_def.outputs.items()
        }

    def padded_inputs(self):
        """Aliases of the inputs with a variable second dimension (padded when batching)."""
        return _variable_axis1(self.inputs)

    def padded_outputs(self):
        """Aliases of the outputs with a variable second dimension (trimmed when batching)."""
        return _variable_axis1(self.outputs)

    def check_output_filter(self, output_filter):
        """The output aliases to return (all when ``output_filter`` is empty)."""
        unknown = [a for a in output_filter if a not in self.outputs]
        if unknown:
            raise invalid_argument(
                f"output {shown(unknown[0])} is not an output of signature '{self.name}' "
                f"(outputs: {', '.join(sorted(self.outputs))})"
            )
        return list(dict.fromkeys(output_filter)) or sorted(self.outputs)

    def check_names(self, aliases):
        """Raises INVALID_ARGUMENT for an unknown or a missing input among ``aliases``."""
        for alias in aliases:
            if alias not in self.inputs:
                hint = self._tokens_hint() if alias in TOKENS_INPUTS else ""
                raise invalid_argument(
                    f"input {shown(alias)} is not an input of signature '{self.name}' "
                    f"(inputs: {self._expected()}){hint}"
                )
        for alias in self.inputs:
            if alias not in aliases:
                raise invalid_argument(
                    f"input '{alias}' is missing: signature '{self.name}' expects "
                    f"{self._expected()}"
                )

    def check_declared_shape(self, alias, shape, limits):
        """Checks the declared ``shape`` of input ``alias`` before its values are read: rank and
        fixed dimensions (INVALID_ARGUMENT), then ``limits`` (RESOURCE_EXHAUSTED)."""
        try:
            limits.check_shape(alias, list(shape), self.inputs[alias].shape)
        except ServingError as error:
            if len(shape) == 2 and error.code == grpc.StatusCode.INVALID_ARGUMENT:
                raise invalid_argument(error.message + self._tokens_hint()) from None
            raise

    def _takes_sentences(self):
        """Whether this is a sentence signature (``default``): one string input ``[batch]``."""
        specs = list(self.inputs.values())
        return (
            len(specs) == 1 and specs[0].dtype == types_pb2.DT_STRING and specs[0].shape == (None,)
        )

    def _tokens_hint(self):
        """Where token lists go, for a request that sends them to a sentence signature."""
        if not self._takes_sentences():
            return ""
        return (
            "; this signature takes whole sentences, one string each: send token lists to the "
            '\'tokens\' signature ("signature_name": "tokens", inputs tokens and sequence_len)'
        )

    def validate(self, inputs, limits=None):
        """Checks ``inputs`` (alias -> numpy array, dtypes already checked); returns the batch size.

        Raises ``ServingError``: INVALID_ARGUMENT naming the first offending input,
        RESOURCE_EXHAUSTED naming the limit of ``limits`` (a ``RequestLimits``) a request is
        over; the strings of a rank-1 string input (``sentences``) are split into tokens to
        count them, as the model splits them.
        """
        self.check_names(inputs)
        batch = None
        for alias, spec in sorted(self.inputs.items()):
            shape = inputs[alias].shape
            if spec.shape is not None:
                if len(shape) != len(spec.shape):
                    hint = self._tokens_hint() if len(shape) == 2 else ""
                    raise invalid_argument(
                        f"input '{alias}' must have rank {len(spec.shape)} "
                        f"({spec.describe()}), got shape {list(shape)}{hint}"
                    )
                for axis, (got, want) in enumerate(zip(shape, spec.shape)):
                    if want is not None and got != want:
                        raise invalid_argument(
                            f"input '{alias}' must have size {want} in dimension {axis} "
                            f"({spec.describe()}), got shape {list(shape)}"
                        )
            if not shape:
                raise invalid_argument(f"input '{alias}' must have a batch dimension")
            if shape[0] == 0:
                raise invalid_argument(f"input '{alias}' has an empty batch; send at least one row")
            if batch is None:
                batch, first = shape[0], alias
            elif shape[0] != batch:
                raise invalid_argument(
                    f"input '{alias}' has batch size {shape[0]} but input '{first}' has {batch}"
                )
        _check_elmo_values(inputs, self.id_bounds)
        if self.utf8_text:
            for alias, spec in sorted(self.inputs.items()):
                if is_string(spec):
                    _check_utf8(alias, inputs[alias])
        if limits is not None:
            for alias, spec in self.inputs.items():
                if is_string(spec):
                    _check_strings(alias, inputs[alias], limits)
        return batch

    def _expected(self):
        return ", ".join(f"'{a}' {s.describe()}" for a, s in sorted(self.inputs.items()))


def input_rules(config):
    """``((character ids, word ids or None), utf8_text)`` of a model of ``config`` (an
    ``ElmoConfig``): the ids its ``char_ids`` take (bilm-tf's 262 for every model but a
    code-point one, ELMoForManyLangs', whose own tables bound them), and whether its text must
    be UTF-8 (a code-point model decodes it; bilm-tf's reads any bytes)."""
    words = config.n_words if config.word_embedding_dim else None
    return (config.char_table_rows, words), config.uses_codepoints


def _variable_axis1(specs):
    return [a for a, s in specs.items() if s.shape and len(s.shape) >= 2 and s.shape[1] is None]


def _check_elmo_values(inputs, id_bounds):
    lengths = inputs.get("sequence_len")
    tokens = inputs.get("tokens")
    if lengths is not None and tokens is not None and lengths.dtype != object:
        if lengths.min() < 0:
            raise invalid_argument("input 'sequence_len' must not be negative")
        if lengths.ndim == 1 and tokens.ndim == 2 and lengths.max() > tokens.shape[1]:
            raise invalid_argument(
                f"input 'sequence_len' holds {lengths.max()}, longer than the rows of 'tokens' "
                f"({tokens.shape[1]})"
            )
    char_ids = inputs.get("char_ids")
    if char_ids is not None and char_ids.size and char_ids.dtype != object:
        n_chars, n_words = id_bounds
        chars = char_ids if n_words is None or char_ids.ndim != 3 else char_ids[..., :-1]
        if chars.min() < 0 or chars.max() >= n_chars:
            raise invalid_argument(f"input 'char_ids' must hold ids in [0, {n_chars - 1}]")
        if n_words is not None and char_ids.ndim == 3:
            words = char_ids[..., -1]
            if words.min() < 0 or words.max() >= n_words:
                raise invalid_argument(
                    f"input 'char_ids' must hold word ids in [0, {n_words - 1}] in its last column"
                )


def _check_utf8(alias, array):
    """INVALID_ARGUMENT for text that is not UTF-8: a code-point model's graph decodes it."""
    for index, value in enumerate(array.flat):
        if isinstance(value, bytes):
            try:
                value.decode("utf-8")  # pragma: no mutate, equivalent: codec names ignore case
            except UnicodeDecodeError as e:
                raise invalid_argument(
                    f"input '{alias}' must be UTF-8 text for this model, which maps code points "
                    f"(ELMoForManyLangs'); its string {index} is not (byte {e.start})"
                ) from None


def _check_strings(alias, array, limits):
    """Limits on tokens: a rank-1 string input holds sentences the model splits into tokens."""
    if array.ndim == 1:
        token_lists = [split_tokens(_text(s)) for s in array]
        counts = [len(tokens) for tokens in token_lists]
        longest = max((len(t.encode("utf-8", "surrogateescape")) for ts in token_lists for t in ts),
                      default=0)  # fmt: skip
        limits.check_token_lists(alias, counts, longest)
    else:
        longest = max((len(t) for t in array.flat), default=0)
        limits.check("max_token_bytes", longest, f"input '{alias}' has a {longest}-byte token")


def _text(value):
    if isinstance(value, bytes):
        return value.decode(
            "utf-8",  # pragma: no mutate, equivalent: codec names ignore case
            "surrogateescape",
        )
    return str(value)


def is_string(spec):
    """Whether a ``TensorSpec`` holds strings."""
    return spec.dtype == types_pb2.DT_STRING
