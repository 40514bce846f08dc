"""The standard checks every public layer passes (after keras-hub's ``run_layer_test``)."""

import keras
import numpy as np
from numerics import assert_same


def run_layer_checks(layer_cls, init_kwargs, inputs, expected_shape, tmp_path):
    """Config round-trip, call, one fit step, and .keras save/load with equal outputs."""
    layer = layer_cls(**init_kwargs)
    output = layer(inputs)
    assert tuple(output.shape) == tuple(expected_shape)

    clone = layer_cls.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    clone(inputs)
    clone.set_weights(layer.get_weights())
    assert_same(clone(inputs), output)

    input_layer = keras.Input(shape=inputs.shape[1:], dtype=str(inputs.dtype))
    model = keras.Model(input_layer, layer_cls(**init_kwargs)(input_layer))
    model.compile(optimizer="adam", loss="mse")
    before = [w.copy() for w in model.get_weights()]
    model.fit(inputs, np.zeros(expected_shape, "float32"), epochs=1, verbose=0)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))

    path = tmp_path / f"{layer_cls.__name__}.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert_same(restored(inputs), model(inputs))
