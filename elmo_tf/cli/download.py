"""``elmo-tf download NAME...``: download published models and NLPL entries into the cache
ahead of use.

Fills the cache (``elmo_tf.presets.cache``) the way a first ``ELMo.from_preset(NAME)`` does,
checking each file as the loader does, so that what is cached is known to load: a Docker image
build, or a cluster's workers before a job, then run with ``ELMO_TF_OFFLINE=1``. Prints where
each file is and its size. It needs no TensorFlow.
"""

import os
import sys

from elmo_tf.cli.model_flags import published_model
from elmo_tf.presets import cache_entries, nlpl, nlpl_entry, nlpl_folder, preset_files, published


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "download",
        help="download published models into the cache ahead of use",
        description="Download published models into the cache ahead of use.",
    )
    parser.add_argument(
        "names",
        metavar="NAME",
        nargs="+",
        help=f"published models ({', '.join(published.names())}) or NLPL entries (nlpl:144, "
        "efml-en, ...: docs/models.md)",
    )
    return parser


def run(args):
    for name in args.names:  # every name checked before anything is downloaded
        if nlpl.is_nlpl_name(name):
            nlpl_entry(name)
        else:
            published_model(name, "download")
    for name in args.names:
        if nlpl.is_nlpl_name(name):  # the archive, checked, and its folder, unpacked
            folder = nlpl_folder(nlpl_entry(name))
            archive = folder[: -len(cache_entries.UNPACKED_SUFFIX)]
            print(f"{name}\t{os.path.getsize(archive):,}\t{archive}")
            continue
        # Downloads what is missing, and checks the files as the loader does (the options
        # parse to the model's architecture, the weight file holds every dataset, finite):
        # what is cached is known to load, without TensorFlow.
        for path in preset_files(name):
            print(f"{name}\t{os.path.getsize(path):,}\t{path}")
    sys.stdout.flush()
    return 0
