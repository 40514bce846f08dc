"""``elmo-tf convert SRC OUTDIR``: a model of another library as our model directory.

SRC is an ELMoForManyLangs model folder, an NLPL repository archive (``.zip``) of either kind,
an NLPL entry (``nlpl:144``, ``efml-en``: downloaded once into the cache) or a bilm-tf model
folder. OUTDIR gets ``options.json`` and ``weights.hdf5``, which ``--model OUTDIR``,
``ELMo.from_preset(OUTDIR)`` and ``load_pretrained`` load with the same numbers: an
ELMoForManyLangs model in the extended format (docs/models.md, "The format extension"), a
bilm-tf one as it is (and its ``vocab.txt``). It needs no TensorFlow: every file is read and
checked as the loader reads it, and the weights are written as data.
"""

import os
import sys

from elmo_tf.cli.common import CommandError, check_input_name, check_output_directory

WRITTEN = ("options.json", "weights.hdf5", "vocab.txt")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "convert",
        help="write an ELMoForManyLangs or NLPL model as options.json + weights.hdf5",
        description=(
            "Write SRC (an ELMoForManyLangs model folder, an NLPL .zip archive, an NLPL entry "
            "such as nlpl:144 or efml-en, or a bilm-tf model folder) to OUTDIR as "
            "options.json and weights.hdf5, which load again with the same numbers."
        ),
    )
    parser.add_argument("source", metavar="SRC", help="model folder, .zip archive or NLPL name")
    parser.add_argument("outdir", metavar="OUTDIR", help="directory to write (created)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the files OUTDIR already holds (else such an OUTDIR is refused)",
    )
    return parser


def run(args):
    # lazy: the command's modules, after argparse answered (no TensorFlow among them)
    from elmo_tf import presets
    from elmo_tf.kinds import model_kinds

    check_input_name(args.source, "SRC", what="model")
    inputs = [p for p in presets.local_paths(args.source) if os.path.exists(p)]
    check_output_directory(args.outdir, inputs)
    present = [n for n in WRITTEN if os.path.lexists(os.path.join(args.outdir, n))]
    if present and not args.overwrite:
        raise CommandError(
            f"{args.outdir}: already holds {', '.join(present)}: convert into a new directory, "
            "or give --overwrite to replace them"
        )
    with presets.open_model(args.source) as files:
        contents = model_kinds.read(files)  # the folder may be a temporary one (an archive's)
        os.makedirs(args.outdir, exist_ok=True)
        contents.write(args.outdir)
    print(
        f"{args.outdir}: options.json, weights.hdf5 of the {contents.description}, "
        f"{contents.config.describe()}",
        file=sys.stderr,
    )
    return 0
