"""Named models: the bundled one, the published ones, NLPL's, and where each is read from.

==================  ==============================================================
``resolve``         a name, path, archive or NLPL entry to its files (``open_model``)
``bundled``         the model shipped with the package, ``sotu``; ``TRAINING_DEFAULT``
``published``       AllenNLP's published models: where each lives, its architecture
``nlpl``            the NLPL repository's entries: ids, aliases, addresses
``fetch``           files fetched into the cache, each checked before it is kept
``cache``           the cache's downloads, checked at every use; ``cache_entries`` its files
``transfer``        one HTTP download, bounded, with progress and retries
==================  ==============================================================
"""

from elmo_tf.presets.bundled import TRAINING_DEFAULT
from elmo_tf.presets.fetch import (
    add_to_cache,
    local_files,
    nlpl_folder,
    published_files,
    weight_file_bound,
)
from elmo_tf.presets.nlpl import entry_named as nlpl_entry
from elmo_tf.presets.resolve import (
    PresetNameWarning,
    local_paths,
    open_model,
    preset,
    preset_files,
    shadowed_directory,
)

__all__ = [
    "TRAINING_DEFAULT",
    "PresetNameWarning",
    "add_to_cache",
    "local_files",
    "local_paths",
    "nlpl_entry",
    "nlpl_folder",
    "open_model",
    "preset",
    "preset_files",
    "published_files",
    "shadowed_directory",
    "weight_file_bound",
]
