"""``run_layer_test``: the standard checks every public layer passes.

After keras-hub's ``TestCase.run_layer_test`` and ``run_precision_test``
(``keras_hub/src/tests/test_case.py``), so that each layer test is a tiny config plus one call.
"""

import copy
import json
import os

import keras
import numpy as np
import pytest

from support.numerics import assert_half_precision, assert_same

MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")

# TensorFlow picks oneDNN's float16/bfloat16 kernels from the CPU's real features; capping
# oneDNN with ONEDNN_MAX_CPU_ISA (CI's rerun of the numerics tests as narrower CPUs compute)
# then takes away the instructions they were picked for: the float16 convolution cannot build
# its primitive (AbortedError) and the float16 matmul segfaults. A CPU that really lacks them
# gets TensorFlow's Eigen kernels, so the half-precision checks run in the uncapped pass only.
ONEDNN_ISA_CAPPED = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper() not in ("", "ALL") and (
    os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "0"
)
skip_if_onednn_isa_capped = pytest.mark.skipif(
    ONEDNN_ISA_CAPPED, reason="half-precision oneDNN kernels under a capped ISA (see layer_checks)"
)


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    tmp_path,
    call_kwargs=None,
    expected_num_trainable_weights=None,
    expected_symbolic_shape=None,
):
    """Build, symbolic and eager call, one fit step, config, serialisation, save/load, precision.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments. A value that is itself a layer (an RNN's cell) is
            cloned from its config for each instance made, under that instance's dtype policy.
        input_data: the first call argument: an array or a list of arrays, batch first.
        expected_output_shape: the eager output's shape; for a layer returning several tensors,
            the same nesting of lists and tuples with an int tuple per tensor.
        tmp_path: pytest's ``tmp_path``, for the ``.keras`` file.
        call_kwargs: further call arguments (a mask...), arrays or lists of arrays, batch
            first; they become ``keras.Input``s of the symbolic call and the fitted model.
        expected_num_trainable_weights: if given, the count after ``build``.
        expected_symbolic_shape: the symbolic call's shapes, nested like
            ``expected_output_shape``, where the layer cannot infer every static dimension;
            by default ``expected_output_shape`` with a ``None`` batch.

    Checks, in order:

    1. ``build`` from the input shapes creates the weights, and an eager call of the built
       layer gives ``expected_output_shape``.
    2. A call on ``keras.Input``s gives KerasTensors of that shape (batch ``None``), floating
       outputs in the layer's compute dtype.
    3. ``get_config``/``from_config`` and ``serialize_keras_object``/
       ``deserialize_keras_object`` (through JSON) give the same config and, with the same
       weights, bitwise the same outputs.
    4. One ``fit`` step of a ``keras.Model`` around the layer (MSE to zeros) changes every
       trainable weight; the model's ``.keras`` file reloads to bitwise the same outputs.
    5. Under ``mixed_float16`` and ``mixed_bfloat16`` (the ``dtype=`` argument): every sublayer
       has the policy, every variable stays float32, floating outputs are in the compute
       dtype, finite, and within ``assert_half_precision`` of the float32 outputs (not under
       a capped oneDNN ISA, see ``ONEDNN_ISA_CAPPED``).

    The initial weights are seeded, as the callers' inputs are: unseeded, one CI run drew a tiny
    CharacterEncoder whose second highway's transform kernel one fit step left unchanged.
    """
    keras.utils.set_random_seed(0)
    call_kwargs = call_kwargs or {}
    expected_shapes = _flatten_shapes(expected_output_shape)

    def make(dtype=None):
        kwargs = {k: _clone_if_layer(v, dtype) for k, v in init_kwargs.items()}
        if dtype is not None:
            kwargs["dtype"] = dtype
        return layer_cls(**kwargs)

    def call(layer):
        return keras.tree.flatten(layer(input_data, **call_kwargs))

    # 1. build, then an eager call
    layer = make()
    layer.build(keras.tree.map_structure(lambda a: tuple(a.shape), input_data))
    assert layer.built
    assert layer.weights, f"{layer_cls.__name__}.build made no weights"
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights
    outputs = call(layer)
    assert [tuple(o.shape) for o in outputs] == expected_shapes

    # 2. symbolic call
    symbolic_args, symbolic_kwargs = _inputs_like(input_data), _inputs_like(call_kwargs)
    symbolic = keras.tree.flatten(make()(symbolic_args, **symbolic_kwargs))
    if expected_symbolic_shape is None:
        symbolic_shapes = [(None, *s[1:]) for s in expected_shapes]
    else:
        symbolic_shapes = _flatten_shapes(expected_symbolic_shape)
    assert [tuple(o.shape) for o in symbolic] == symbolic_shapes
    for tensor, value in zip(symbolic, outputs):
        expected_dtype = layer.compute_dtype if _is_floating(value) else _dtype(value)
        assert tensor.dtype == expected_dtype, f"{tensor.dtype} != {expected_dtype}"

    # 3. config and serialisation round trips
    config = layer.get_config()
    clone = layer_cls.from_config(copy.deepcopy(config))  # RNN.from_config pops "cell"
    assert clone.get_config() == config
    serialized = _through_json(keras.saving.serialize_keras_object(layer))
    revived = keras.saving.deserialize_keras_object(serialized)
    assert type(revived) is layer_cls
    assert _through_json(revived.get_config()) == _through_json(config)
    for other in (clone, revived):
        call(other)  # builds it
        other.set_weights(layer.get_weights())
        for actual, expected in zip(call(other), outputs):
            assert_same(actual, expected)

    # 4. one fit step, then a .keras round trip of the fitted model
    flat_inputs = keras.tree.flatten((symbolic_args, symbolic_kwargs))
    flat_data = keras.tree.flatten((input_data, call_kwargs))
    model_outputs = make()(symbolic_args, **symbolic_kwargs)
    model = keras.Model(flat_inputs, keras.tree.flatten(model_outputs))
    model.compile(optimizer="adam", loss="mse")
    before = [w.numpy().copy() for w in model.trainable_weights]
    assert before, f"{layer_cls.__name__} has no trainable weights"
    targets = [np.zeros(s, "float32") for s in expected_shapes]
    model.fit(flat_data, targets, batch_size=len(flat_data[0]), epochs=1, verbose=0)
    for old, weight in zip(before, model.trainable_weights):
        assert not np.array_equal(old, weight.numpy()), f"fit left {weight.path} unchanged"
    path = tmp_path / f"{layer_cls.__name__}.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    for actual, expected in zip(restored(flat_data), model(flat_data)):
        assert_same(actual, expected)

    # 5. mixed precision against the float32 outputs of the same weights
    for policy in () if ONEDNN_ISA_CAPPED else MIXED_POLICIES:
        half = make(policy)
        call(half)  # builds it
        half.set_weights(layer.get_weights())
        compute_dtype = keras.DTypePolicy(policy).compute_dtype
        for sublayer in half._flatten_layers():
            assert sublayer.dtype_policy.name == policy, f"{sublayer.name}: {policy}"
        for weight in half.weights:
            assert weight.dtype == "float32", f"{weight.path} is {weight.dtype} under {policy}"
        for actual, expected in zip(call(half), outputs):
            if not _is_floating(expected):
                assert_same(actual, expected)
                continue
            assert _dtype(actual) == compute_dtype, f"{_dtype(actual)} under {policy}"
            actual = keras.ops.convert_to_numpy(keras.ops.cast(actual, "float32"))
            assert np.isfinite(actual).all(), f"non-finite output under {policy}"
            assert_half_precision(actual, expected, compute_dtype, err_msg=policy)


def _through_json(config):
    """What a config becomes in a file (tuples turn into lists)."""
    return json.loads(json.dumps(config))


def _clone_if_layer(value, dtype):
    if not isinstance(value, keras.layers.Layer):
        return value
    config = value.get_config()
    if dtype is not None:
        config["dtype"] = dtype
    return type(value).from_config(config)


def _inputs_like(data):
    return keras.tree.map_structure(
        lambda a: keras.Input(shape=np.shape(a)[1:], dtype=_dtype(a)), data
    )


def _dtype(value):
    return keras.backend.standardize_dtype(value.dtype)


def _is_floating(value):
    return "float" in _dtype(value)


def _flatten_shapes(shapes):
    """``[(2, 3), ((4,), [(5, 6)])]`` -> ``[(2, 3), (4,), (5, 6)]``."""
    if isinstance(shapes, tuple) and all(d is None or isinstance(d, int) for d in shapes):
        return [shapes]
    return [s for part in shapes for s in _flatten_shapes(part)]
