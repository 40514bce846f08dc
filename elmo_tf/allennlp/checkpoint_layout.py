"""AllenNLP's ``Elmo`` checkpoint layout: its ``state_dict`` keys and tensor layouts, mapped to
the variables of an ``ELMo`` model.

Each ``Group`` is a few AllenNLP tensors and the model variables they hold, with the transform
each way; ``to_keras`` is differentiable (PyTorch ops), so ``elmo_tf.allennlp.Elmo`` keeps its
parameters in AllenNLP's layout and computes the model's values from them at every call.

=======================================================  =====================================
AllenNLP key (under ``_elmo_lstm.``)                     model variable (transform)
=======================================================  =====================================
``_token_embedder._char_embedding_weights`` (262, E)     char embeddings (as is: row 0 zeros)
``_token_embedder.char_conv_{i}.weight`` (n, E, w)       CNN kernel (w, E, n): axes reversed
``_token_embedder._highways._layers.{k}.weight`` (2F,F)  ``[W_transform.T; -W_carry.T]``: the
``... .bias`` (2F,)                                      gate is bilm-tf's 1 - carry, so the
                                                         carry half is negated
``_token_embedder._projection.weight`` (P, F)           token projection kernel, transposed
``_elmo_lstm.{forward,backward}_layer_{l}.``             the cell's kernel over ``[x; h]``,
``input_linearity.weight`` (4D, in),                     transposed and split at ``in``; gate
``state_linearity.weight`` (4D, P)                       blocks i, f, j, o (ours i, j, f, o)
``... state_linearity.bias`` (4D,)                       the cell's bias, gates reordered, the
                                                         forget bias (+1) folded in
``... state_projection.weight`` (P, D)                   the output projection, transposed
``scalar_mix_{k}.gamma`` (1,),                           the ScalarMix's gamma () and weights
``scalar_mix_{k}.scalar_parameters.{n}`` (1,)            (N,), one tensor per layer
=======================================================  =====================================

(``_elmo_lstm._word_embedding.weight``, the cached vocabulary's token vectors, is no model
variable: ``Elmo`` holds it itself.)
"""

import dataclasses
import typing

import torch

BILM = "_elmo_lstm."
TOKEN_EMBEDDER = BILM + "_token_embedder."
WORD_EMBEDDING = BILM + "_word_embedding.weight"


@dataclasses.dataclass(frozen=True)
class Group:
    keys: tuple  # AllenNLP state_dict keys, relative to the Elmo module
    variables: tuple  # the model variables they hold
    to_keras: typing.Callable  # AllenNLP tensors -> variable values, in variables' order
    to_allennlp: typing.Callable  # variable values -> AllenNLP tensors, in keys' order


def _same(*tensors):
    return list(tensors)


def _swap_gates(x, axis):
    """Blocks 1 and 2 of the four gate blocks along ``axis`` exchanged: bilm-tf's and our
    i, j, f, o order <-> AllenNLP's i, f, j, o (the exchange is its own inverse)."""
    i, j, f, o = torch.chunk(x, 4, dim=axis)
    return torch.cat([i, f, j, o], dim=axis)


def _forget_bias(cell, like):
    """The forget bias as a (4D,) vector in our gate order (i, j, f, o)."""
    d = cell.units
    vector = torch.zeros(4 * d, dtype=like.dtype, device=like.device)
    vector[2 * d : 3 * d] = cell.forget_bias
    return vector


def groups(model, num_mixes):
    """The ``Group`` list of ``model`` (an ``ELMo``) with its first ``num_mixes`` scalar mixes,
    in the order of AllenNLP's ``state_dict``."""
    encoder = model.character_encoder
    table = []

    def add(keys, variables, to_keras=_same, to_allennlp=_same):
        table.append(Group(tuple(keys), tuple(variables), to_keras, to_allennlp))

    add([TOKEN_EMBEDDER + "_char_embedding_weights"], [encoder.char_embedding.embeddings])
    for i, (kernel, bias) in enumerate(zip(encoder.cnn.kernels, encoder.cnn.biases)):
        # torch's Conv1d weight is (out, in, width); ours (width, in, out).
        add(
            [TOKEN_EMBEDDER + f"char_conv_{i}.weight", TOKEN_EMBEDDER + f"char_conv_{i}.bias"],
            [kernel, bias],
            to_keras=lambda w, b: [w.permute(2, 1, 0), b],
            to_allennlp=lambda k, b: [k.permute(2, 1, 0), b],
        )
    for k, highway in enumerate(encoder.highways):
        # AllenNLP computes g * x + (1 - g) * relu(transform) with g = sigmoid of its second
        # half; bilm-tf c * relu(transform) + (1 - c) * x with c = sigmoid(carry): g = 1 - c,
        # so AllenNLP's second half is the carry negated.
        def to_keras(weight, bias):
            f = weight.shape[1]
            return [-weight[f:].T, -bias[f:], weight[:f].T, bias[:f]]

        def to_allennlp(carry_kernel, carry_bias, transform_kernel, transform_bias):
            return [
                torch.cat([transform_kernel.T, -carry_kernel.T], 0),
                torch.cat([transform_bias, -carry_bias], 0),
            ]

        add(
            [TOKEN_EMBEDDER + f"_highways._layers.{k}.{name}" for name in ("weight", "bias")],
            [
                highway.carry_kernel,
                highway.carry_bias,
                highway.transform_kernel,
                highway.transform_bias,
            ],  # fmt: skip
            to_keras,
            to_allennlp,
        )
    add(
        [TOKEN_EMBEDDER + "_projection.weight", TOKEN_EMBEDDER + "_projection.bias"],
        [encoder.projection.kernel, encoder.projection.bias],
        to_keras=lambda w, b: [w.T, b],
        to_allennlp=lambda k, b: [k.T, b],
    )
    bilstm = model.bilstm
    for layer in range(bilstm.num_layers):
        for direction, cell in (("forward", bilstm.forward_cells[layer]),
                                ("backward", bilstm.backward_cells[layer])):  # fmt: skip
            prefix = f"{BILM}_elmo_lstm.{direction}_layer_{layer}."
            add(
                [
                    prefix + name
                    for name in (
                        "input_linearity.weight",
                        "state_linearity.weight",
                        "state_linearity.bias",
                        "state_projection.weight",
                    )
                ],
                [cell.kernel, cell.bias, cell.projection_kernel],
                *_lstm_transforms(cell),
            )
    for k, mix in enumerate(model.scalar_mixes[:num_mixes]):
        n = mix.num_layers
        add(
            [f"scalar_mix_{k}.gamma", *(f"scalar_mix_{k}.scalar_parameters.{i}" for i in range(n))],
            [mix.scalar_weights, mix.gamma],
            to_keras=lambda gamma, *weights: [torch.cat(weights), gamma.reshape(())],
            to_allennlp=lambda weights, gamma: [gamma.reshape(1), *weights.reshape(-1, 1)],
        )
    return table


def _lstm_transforms(cell):
    """``(to_keras, to_allennlp)`` of one LSTM cell: AllenNLP keeps the input and recurrent
    matrices apart, transposed, with its gate order, and the forget bias in the bias; our
    cell has one kernel over ``[x; h]`` and adds the forget bias at run time (as bilm-tf)."""
    n_in = cell.input_dim

    def to_keras(input_weight, state_weight, bias, projection):
        kernel = _swap_gates(torch.cat([input_weight, state_weight], 1), 0).T  # (in + P, 4D)
        bias = _swap_gates(bias, 0)
        return [kernel, bias - _forget_bias(cell, bias), projection.T]

    def to_allennlp(kernel, bias, projection_kernel):
        gates = _swap_gates(kernel.T, 0)  # (4D, in + P)
        bias = _swap_gates(bias + _forget_bias(cell, bias), 0)
        return [gates[:, :n_in], gates[:, n_in:], bias, projection_kernel.T]

    return to_keras, to_allennlp


def allennlp_tensors(model, num_mixes):
    """``{AllenNLP key: tensor}`` of ``model``'s current values (copies)."""
    tensors = {}
    for group in groups(model, num_mixes):
        values = [torch.as_tensor(v.numpy()) for v in group.variables]
        tensors.update(zip(group.keys, group.to_allennlp(*values), strict=True))
    return {key: value.detach().clone().contiguous() for key, value in tensors.items()}


def keras_values(table, tensors):
    """``[(variable, value)]`` for ``keras.StatelessScope``: every variable of ``table``
    computed from ``tensors`` (``{AllenNLP key: tensor}``), differentiably."""
    mapping = []
    for group in table:
        values = group.to_keras(*(tensors[key] for key in group.keys))
        mapping.extend(zip(group.variables, values, strict=True))
    return mapping
