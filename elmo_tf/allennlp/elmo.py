"""Elmo: AllenNLP's ``allennlp.modules.elmo.Elmo``, argument for argument and output for output,
as a ``torch.nn.Module`` computed by elmo-tf's model."""

import math
import os
import warnings

import keras
import numpy as np
import torch

from elmo_tf import checks, precision, presets
from elmo_tf.allennlp import checkpoint_layout
from elmo_tf.config import ElmoConfig
from elmo_tf.formats.weight_file import load_weights
from elmo_tf.models.char_ids import check_char_ids
from elmo_tf.models.elmo import ELMo
from elmo_tf.models.outputs import LSTMState
from elmo_tf.tokens.characters import BOS_CHAR_IDS, EOS_CHAR_IDS, batch_to_ids

MAX_OUTPUT_REPRESENTATIONS = 64
# Words per character-CNN call when the vocabulary's vectors are cached (AllenNLP's 32 x 32).
_VOCAB_ROWS = 1024


class Elmo(torch.nn.Module):
    """ELMo representations from a pretrained biLM, as AllenNLP's ``Elmo`` computes them.

    A drop-in for ``allennlp.modules.elmo.Elmo``: the same arguments, outputs, parameter names
    and ``state_dict`` (keys and tensor layouts), so a checkpoint of a model that embedded
    AllenNLP's ``Elmo`` loads with ``strict=True`` and ours loads into AllenNLP's. The
    parameters are AllenNLP's tensors; each call computes the ``ELMo`` model's weights from
    them (``checkpoint_layout``) and runs it (``keras.StatelessScope``), so gradients reach
    them and ``.to(device)``, ``.cuda()``, ``.double()`` behave as for any module.

    Reduced precision: ``elmo.to(torch.bfloat16)`` computes in bfloat16 (the parameters, the
    LSTM states and the representations too), PyTorch's own way, on a GPU or on a CPU with
    AVX-512 BF16 or AMX (elsewhere bfloat16 matmuls are emulated, many times slower than
    float32: a ``UserWarning`` says so once); ``.to(torch.float32)`` brings it back. How far
    it moves the representations, and how fast it runs against AllenNLP's ``Elmo``:
    docs/performance.md, "Reduced precision".

    Args:
        options_file: the biLM's options.json: a path, or a URL (AllenNLP's URLs of the
            published models go through elmo-tf's cache, mirror and offline settings).
        weight_file: its HDF5 weight file, likewise.
        num_output_representations: how many independently mixed representations to return.
        requires_grad: train the biLM's weights too (the scalar mixes always train, unless
            ``scalar_mix_parameters`` fixes them).
        do_layer_norm: layer-normalise each layer before mixing (statistics over every
            position, ``<S>`` and ``</S>`` included, as AllenNLP does).
        dropout: dropout on each representation; on in ``train()`` mode, off in ``eval()``.
        vocab_to_cache: words whose token vectors are computed once here; ``forward`` then
            reads ``word_inputs`` (indices into this list) instead of running the character
            CNN, and falls back to the characters for an index past the list.
        keep_sentence_boundaries: keep the ``<S>`` and ``</S>`` positions in the outputs.
        scalar_mix_parameters: fixed (not trained) pre-softmax mix weights, one per layer.
        module: AllenNLP's own biLM module in place of the files; not supported.
        stateful: elmo-tf's own keyword. ``True`` (default, as AllenNLP): each batch row starts
            from the LSTM state that row ended the previous call with, so a sentence's
            vectors depend on the earlier calls (``reset_states()`` forgets them). ``False``:
            every call starts from zero, and a sentence's vectors depend on it alone.

    Call arguments:
        inputs: int character ids ``(batch, timesteps, 50)`` (``batch_to_ids``), or with
            more leading axes ``(..., timesteps, 50)``.
        word_inputs: with ``vocab_to_cache``, int ``(batch, timesteps)`` (or more leading axes)
            indices into the cached vocabulary, 0 for padding.

    Returns:
        ``{"elmo_representations": [num_output_representations tensors (..., timesteps,
        2P)], "mask": bool (..., timesteps)}``; with ``keep_sentence_boundaries`` the
        timesteps axis holds ``<S>`` and ``</S>`` too (``timesteps + 2``).

    Example:
    >>> elmo = Elmo(options_file, weight_file, num_output_representations=1, dropout=0.0)
    >>> elmo(batch_to_ids([["Hello", "world", "!"]]))["elmo_representations"][0].shape
    torch.Size([1, 3, 256])
    """

    def __init__(
        self,
        options_file,
        weight_file,
        num_output_representations,
        requires_grad=False,
        do_layer_norm=False,
        dropout=0.5,
        vocab_to_cache=None,
        keep_sentence_boundaries=False,
        scalar_mix_parameters=None,
        module=None,
        *,
        stateful=True,
    ):
        super().__init__()
        if module is not None:
            raise ValueError(
                "Elmo(module=...) is not supported: elmo_tf.allennlp.Elmo runs elmo-tf's biLM "
                "from options_file and weight_file"
            )
        checks.integer(
            "num_output_representations", num_output_representations, 0, MAX_OUTPUT_REPRESENTATIONS
        )
        checks.number("dropout", dropout, minimum=0, maximum=1)
        for name, value in [
            ("requires_grad", requires_grad),
            ("keep_sentence_boundaries", keep_sentence_boundaries),
            ("stateful", stateful),
        ]:
            checks.boolean(name, value)
        if isinstance(vocab_to_cache, (str, bytes)):
            raise TypeError(
                f"vocab_to_cache must be a list of tokens, got one string "
                f'({checks.shown(vocab_to_cache)}); e.g. ["<S>", "</S>", "the", ...]'
            )
        if vocab_to_cache is not None and not isinstance(vocab_to_cache, list | tuple):
            # a word's index is its place in the list: a set has none, a generator is read once
            raise TypeError(
                "vocab_to_cache must be a list of tokens (a word's index in word_inputs is its "
                f"place in the list), got {type(vocab_to_cache).__name__}"
            )
        for name, value in [("options_file", options_file), ("weight_file", weight_file)]:
            if not isinstance(value, str | os.PathLike):
                raise TypeError(
                    f"{name} must be a path or an http(s) URL, got {type(value).__name__}"
                )
            if not os.fspath(value):
                raise ValueError(f"{name} is empty: give a path or an http(s) URL")
        options_file, weight_file = presets.local_files(options_file, weight_file)
        config = ElmoConfig.from_file(options_file)
        if config.uses_codepoints:
            raise ValueError(
                f"{options_file}: a model with its own code-point table (converted from "
                "ELMoForManyLangs): AllenNLP's Elmo and batch_to_ids map UTF-8 bytes; use "
                "elmo_tf.ELMo.from_preset and its batch_to_ids"
            )
        if not config.uses_token_projection:
            raise ValueError(
                f"{options_file}: AllenNLP's Elmo needs a token projection (the char CNN's "
                f"{config.n_filters} filters to projection_dim {config.projection_dim})"
            )
        n_layers = config.n_lstm_layers + 1
        if scalar_mix_parameters is not None:
            scalar_mix_parameters = _mix_parameters(scalar_mix_parameters, config.n_lstm_layers)
        self.num_output_representations = num_output_representations
        self.stateful = stateful
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._do_layer_norm = do_layer_norm
        self._config = config
        self._models = {}  # Keras models by dtype (they hold no weights of their own use)
        model = load_weights(self._model(torch.float32), weight_file)

        # The parameters in AllenNLP's module tree and layout (checkpoint_layout).
        self._table = {}
        tensors = checkpoint_layout.allennlp_tensors(model, num_output_representations)
        initial = [0.0] * n_layers if scalar_mix_parameters is None else scalar_mix_parameters
        for k in range(num_output_representations):
            tensors[f"scalar_mix_{k}.gamma"] = torch.ones(1)
            for i, value in enumerate(initial):
                tensors[f"scalar_mix_{k}.scalar_parameters.{i}"] = torch.tensor([float(value)])
        if vocab_to_cache:
            tensors = _with_word_embedding(tensors, model, vocab_to_cache)
        mix_trainable = scalar_mix_parameters is None
        for key, value in tensors.items():
            trains = mix_trainable if key.startswith("scalar_mix_") else requires_grad
            _add_parameter(self, key, torch.nn.Parameter(value, requires_grad=trains))
        self._vocab_size = len(vocab_to_cache) if vocab_to_cache else 0
        self._dropout = torch.nn.Dropout(p=dropout)
        self._state = None

    # ------------------------------------------------------------------ AllenNLP's interface

    def get_output_dim(self):
        """The size of each representation: 2P."""
        return self._config.output_dim

    def reset_states(self):
        """Forgets the LSTM states the earlier calls left (``stateful=True``)."""
        self._state = None

    def forward(self, inputs, word_inputs=None):
        if inputs is None or isinstance(inputs, str | bytes):
            raise TypeError(
                "inputs must be character ids (batch, timesteps, 50) (batch_to_ids makes them), "
                f"got {type(inputs).__name__}"
            )
        char_ids = torch.as_tensor(inputs)
        if char_ids.dtype == torch.bfloat16:  # 8 bits of mantissa: 257, 259, 261 are not there
            raise TypeError(
                "inputs must be character ids (batch, timesteps, 50) (batch_to_ids makes them), "
                "got bfloat16, which cannot hold ids above 256 exactly: pass integers"
            )
        if char_ids.dim() < 3:
            raise ValueError(
                "inputs must be character ids (batch, timesteps, 50) (batch_to_ids makes them), "
                f"got shape {tuple(char_ids.shape)}"
            )
        leading = tuple(char_ids.shape[:-2])
        # math.prod, not -1: a batch of empty sentences, (batch, 0, 50), holds no element.
        char_ids = char_ids.reshape(math.prod(leading), *char_ids.shape[-2:])
        check_char_ids(char_ids.detach().cpu().numpy(), self._config)
        words = self._word_ids(word_inputs, char_ids.shape[:2])

        parameter = next(self.parameters())
        model = self._model(parameter.dtype)
        if parameter.dtype == torch.bfloat16 and parameter.device.type == "cpu":
            self._warn_emulated_bfloat16()
        tensors = dict(self.named_parameters())
        table = checkpoint_layout.groups(model, self.num_output_representations)
        rows = char_ids.shape[0]
        initial = self._initial_state(rows, parameter) if self.stateful else None
        with keras.device(str(parameter.device)):
            with keras.StatelessScope(checkpoint_layout.keras_values(table, tensors)):
                char_ids = char_ids.to(parameter.device)
                if words is None:
                    bilm = model.bilm(char_ids, initial)
                else:
                    bilm = self._bilm_from_words(model, words.to(parameter.device), initial)
                activations, mask = bilm["activations"], bilm["mask"]
                mixed = [
                    mix(activations, token_mask=mask)
                    for mix in model.scalar_mixes[: self.num_output_representations]
                ]
        if self.stateful:
            self._keep_state(bilm["state"], rows)
        if not self._keep_sentence_boundaries:
            mixed = [_without_boundaries(x, mask) for x in mixed]
            mask = _mask_without_boundaries(mask)
        representations = [self._dropout(x) for x in mixed]
        return {
            "elmo_representations": [x.reshape(*leading, *x.shape[1:]) for x in representations],
            "mask": mask.reshape(*leading, mask.shape[-1]),
        }

    # ------------------------------------------------------------------ the parts

    def _model(self, dtype):
        """The ``ELMo`` that computes in ``dtype`` (built on first use; its own weights are
        never read: every call maps them from the parameters)."""
        name = str(dtype).removeprefix("torch.")
        if name not in self._models:
            # Not a submodule: its variables are not this module's parameters.
            self._models[name] = ELMo(
                self._config,
                num_output_representations=max(self.num_output_representations, 1),
                do_layer_norm=self._do_layer_norm,
                dtype=name,
                name="elmo",
            )
        return self._models[name]

    def _warn_emulated_bfloat16(self):
        """Once per module: a ``UserWarning`` (``elmo_tf.precision``'s line) where this CPU
        has no native bfloat16 (``.to(torch.bfloat16)`` is PyTorch's to refuse, not ours)."""
        if getattr(self, "_bfloat16_checked", False):
            return
        self._bfloat16_checked = True
        try:
            precision.check("bfloat16", "torch", "cpu")
        except precision.PrecisionError as e:
            warnings.warn(f"elmo_tf.allennlp.Elmo in bfloat16 on this CPU: {e}", stacklevel=3)

    def _word_ids(self, word_inputs, shape):
        """The cached vocabulary's indices ``(rows, timesteps)``, or ``None`` to run the
        character CNN (no cache, no word inputs, or an index the cache does not hold)."""
        if word_inputs is None:
            return None
        if not self._vocab_size:
            warnings.warn(
                "word_inputs were passed to Elmo, but it has no vocab_to_cache: they are ignored",
                stacklevel=3,
            )
            return None
        words = torch.as_tensor(word_inputs)
        if words.is_floating_point() or words.is_complex() or words.dtype == torch.bool:
            raise ValueError(f"word_inputs must be integer word indices, got {words.dtype}")
        given = tuple(words.shape)
        words = words.reshape(-1, words.shape[-1]) if words.dim() else words
        if tuple(words.shape) != tuple(shape):
            raise ValueError(
                f"word_inputs of shape {given} do not match the character ids' batch and "
                f"timesteps {tuple(shape)}"
            )
        if words.numel() and (words.min() < 0 or words.max() >= self._vocab_size):
            return None  # a word the cache does not hold: the characters, as AllenNLP does
        return words

    def _bilm_from_words(self, model, words, initial_state):
        """The biLM on the cached vocabulary's token vectors, framed by ``<S>`` and ``</S>``
        computed now from the character CNN (they follow its current weights)."""
        table = self.get_parameter(checkpoint_layout.WORD_EMBEDDING)
        lengths = (words > 0).sum(dim=1)
        vectors = torch.nn.functional.embedding(words, table)  # (B, T, P)
        boundaries = model.character_encoder(
            torch.as_tensor(np.stack([BOS_CHAR_IDS, EOS_CHAR_IDS]), device=words.device)
        )  # (2, P)
        rows, steps = words.shape
        framed = torch.zeros(rows, steps + 2, vectors.shape[-1], dtype=vectors.dtype,
                             device=vectors.device)  # fmt: skip
        framed[:, 0] = boundaries[0]
        positions = torch.arange(steps, device=words.device)[None, :]
        framed[:, 1:-1] = vectors * (positions < lengths[:, None])[..., None]
        framed[torch.arange(rows), lengths + 1] = boundaries[1]
        return model.bilm_from_embeddings(framed, lengths, initial_state)

    def _initial_state(self, rows, like):
        """The state each of ``rows`` rows starts from: what that row ended the last call
        with (zero for a row no call has had yet)."""
        if self._state is None:
            return None
        cell, hidden = self._state
        if cell.shape[0] < rows:
            extra = rows - cell.shape[0]
            cell = torch.cat([cell, cell.new_zeros(extra, *cell.shape[1:])])
            hidden = torch.cat([hidden, hidden.new_zeros(extra, *hidden.shape[1:])])
            self._state = (cell, hidden)
        return LSTMState(cell[:rows].to(like), hidden[:rows].to(like))

    def _keep_state(self, state, rows):
        cell, hidden = (s.detach() for s in state)
        if self._state is None or self._state[0].shape[0] <= rows:
            self._state = (cell, hidden)
        else:  # the rows past this batch keep their states
            old_cell, old_hidden = self._state
            self._state = (
                torch.cat([cell, old_cell[rows:].to(cell)]),
                torch.cat([hidden, old_hidden[rows:].to(hidden)]),
            )


def _add_parameter(module, key, parameter):
    """Registers ``parameter`` under the dotted ``key``, making the intermediate modules: the
    names and order of AllenNLP's module tree."""
    *path, name = key.split(".")
    for part in path:
        child = module._modules.get(part)
        if child is None:
            child = torch.nn.Module()
            module.add_module(part, child)
        module = child
    module.register_parameter(name, parameter)


def _with_word_embedding(tensors, model, vocab):
    """``tensors`` with the cached vocabulary's token vectors at AllenNLP's key (placed where
    AllenNLP's module registers it: after the character encoder)."""
    vectors = []
    for start in range(0, len(vocab), _VOCAB_ROWS):  # bounded memory: the CNN's activations
        ids = batch_to_ids([[word] for word in vocab[start : start + _VOCAB_ROWS]])[:, 0]
        vectors.append(keras.ops.convert_to_numpy(model.character_encoder(ids)))
    vectors = np.concatenate(vectors)  # (V, P)
    result = {}
    for key, value in tensors.items():
        if key.startswith(checkpoint_layout.BILM + "_elmo_lstm.") and (
            checkpoint_layout.WORD_EMBEDDING not in result
        ):
            result[checkpoint_layout.WORD_EMBEDDING] = torch.as_tensor(vectors)
        result[key] = value
    return result


def _mask_without_boundaries(mask):
    """``mask`` ``(B, T + 2)`` of framed rows as the mask of their tokens ``(B, T)``."""
    lengths = mask.sum(dim=1) - 2
    return torch.arange(mask.shape[1] - 2, device=mask.device)[None, :] < lengths[:, None]


def _without_boundaries(x, mask):
    """``x`` ``(B, T + 2, dim)`` without ``<S>`` and ``</S>``: each row's positions
    ``1 .. length``, zeros after (AllenNLP's ``remove_sentence_boundaries``)."""
    keep = _mask_without_boundaries(mask)
    return x[:, 1:-1] * keep[..., None].to(x.dtype)


def _mix_parameters(values, n_lstm_layers):
    """``scalar_mix_parameters`` as a list of floats, one per layer; ``ValueError`` naming the
    argument for another count, a string, or a value that is not a finite number (a NaN mix
    weight made every representation NaN)."""
    n_layers = n_lstm_layers + 1
    where = f"one per layer: the tokens and {n_lstm_layers} LSTM layers"
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(
            f"scalar_mix_parameters must be a list of {n_layers} numbers ({where}), got "
            f"{checks.shown(values)}"
        )
    if len(values) != n_layers:
        raise ValueError(
            f"scalar_mix_parameters must hold {n_layers} values ({where}), got {len(values)}"
        )
    return [float(checks.number(f"scalar_mix_parameters[{i}]", v)) for i, v in enumerate(values)]
