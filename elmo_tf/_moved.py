"""Module paths that moved: each imports the new module for one more release.

``import elmo_tf.batching`` (and ``from elmo_tf import batching``) gives the module now at
``elmo_tf.models.length_batches`` (the same module object, so patching one patches the other)
with a ``DeprecationWarning`` naming the new path. A release removes the paths the one before
it moved.
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
    # moved since 0.2.0: the top level's modules grouped by what they are (CHANGELOG.md)
    "elmo_tf.characters": "elmo_tf.tokens.characters",
    "elmo_tf.codepoints": "elmo_tf.tokens.codepoints",
    "elmo_tf.token_mappers": "elmo_tf.tokens.token_mappers",
    "elmo_tf.text_lines": "elmo_tf.tokens.text_lines",
    "elmo_tf.options_file": "elmo_tf.formats.options_file",
    "elmo_tf.weight_file": "elmo_tf.formats.weight_file",
    "elmo_tf.embedding_file": "elmo_tf.formats.embedding_file",
    "elmo_tf.torch_state_dict": "elmo_tf.foreign.torch_state_dict",
    "elmo_tf.zip_archives": "elmo_tf.foreign.zip_archives",
    "elmo_tf.efml": "elmo_tf.foreign",  # a package that moved apart: see PACKAGES
    "elmo_tf.efml.dictionaries": "elmo_tf.foreign.efml_dictionaries",
    "elmo_tf.efml.model_folder": "elmo_tf.foreign.efml_folder",
    "elmo_tf.efml.conversion": "elmo_tf.kinds.efml_conversion",
    "elmo_tf.environment": "elmo_tf.system.environment",
    "elmo_tf.extras": "elmo_tf.system.extras",
    "elmo_tf.files": "elmo_tf.system.files",
    "elmo_tf.untrusted_files": "elmo_tf.system.untrusted_files",
    "elmo_tf.native_logs": "elmo_tf.system.native_logs",
    "elmo_tf.urls": "elmo_tf.system.urls",
    "elmo_tf.cpu_threads": "elmo_tf.system.cpu_threads",
}


# Packages whose modules moved to several places: the old package path imports a stand-in
# package, empty, through which each old module path resolves by the table above.
PACKAGES = {"elmo_tf.efml"}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        return importlib.util.spec_from_loader(name, self, is_package=name in PACKAGES)

    def create_module(self, spec):
        return None  # a placeholder module; exec_module puts the real one in its place

    def exec_module(self, module):
        new = MOVED[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        if module.__name__ in PACKAGES:
            return  # the stand-in stays: its modules' old paths resolve through this finder
        # The import system returns what sys.modules holds after exec_module: the new module.
        sys.modules[module.__name__] = importlib.import_module(new)


def install():
    """Adds the finder once (``import elmo_tf`` calls it)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
