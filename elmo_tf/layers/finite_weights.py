"""FiniteWeights: the values a saved Keras model (``.keras``) loads into a layer, checked finite
first.

A weight file (``weights.hdf5``) with NaN or inf is refused as it is read
(``elmo_tf.formats.weight_file``); a ``.keras`` file's weights go through Keras' loader instead,
which assigns whatever is stored. NaN does not always show in the outputs (XLA's max-pooling on JAX
passes over a NaN in a filter that TensorFlow propagates), so such a file would load and run with
different numbers on each backend. Every layer of the model that owns weights takes this mixin: the
load raises ``ValueError`` naming the layer and the weight, and assigns nothing of that layer.
"""

import keras
import numpy as np


class FiniteWeights:
    """Mixin for a ``keras.layers.Layer``: ``load_own_variables`` refuses NaN or inf."""

    def load_own_variables(self, store):
        refused = getattr(self, "_refused_weights", None)
        if refused and not len(store.keys()):
            # Keras tries a layer it failed to load again through its other paths (ELMo's
            # list of layers), with an empty store, and reports that attempt's error (or, if
            # it passed, loads the model): the refusal stands, in its own words.
            raise ValueError(refused)
        weights = self.weights  # a leaf layer's own, in the order Keras stores them
        for key in store.keys():
            value = np.asarray(store[key])
            if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
                index = int(key) if str(key).isdigit() else len(weights)
                name = weights[index].path if index < len(weights) else key
                self._refused_weights = (
                    f"the saved weight {name} holds NaN or inf; a saved model's "
                    "weights are finite numbers (the file is damaged or was saved after a "
                    "diverged training step)"
                )
                raise ValueError(self._refused_weights)
        super().load_own_variables(store)


class FiniteDense(FiniteWeights, keras.layers.Dense):
    """``keras.layers.Dense`` whose loaded weights are checked finite (the character encoder's
    projection)."""
