"""Module paths of release 0.1 that moved in 0.2: they import the new module for one more release.

``import elmo_tf.batching`` (and ``from elmo_tf import batching``) gives the module now at
``elmo_tf.models.length_batches`` (the same module object, so patching one patches the other)
with a ``DeprecationWarning`` naming the new path. The next release removes this table.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "elmo_tf.batching": "elmo_tf.models.length_batches",
    "elmo_tf.embedder": "elmo_tf.models.embedder",
    "elmo_tf.token_cache": "elmo_tf.models.token_cache",
    "elmo_tf.saved_model_module": "elmo_tf.export.saved_model_module",
    "elmo_tf.elmo_layer": "elmo_tf.export.elmo_layer",
    "elmo_tf.pretrained": "elmo_tf.presets.bundled",
    "elmo_tf.word_senses": "elmo_tf.probes.word_senses",
    "elmo_tf.serving.batching": "elmo_tf.serving.request_batching",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        return None  # a placeholder module; exec_module puts the real one in its place

    def exec_module(self, module):
        new = MOVED[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system returns what sys.modules holds after exec_module: the new module.
        sys.modules[module.__name__] = importlib.import_module(new)


def install():
    """Adds the finder once (``import elmo_tf`` calls it)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
