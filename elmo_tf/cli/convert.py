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
import shutil
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
    from elmo_tf import presets, weight_file, zip_archives
    from elmo_tf.config import ElmoConfig
    from elmo_tf.efml import conversion, model_folder

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
        os.makedirs(args.outdir, exist_ok=True)
        options = os.path.join(args.outdir, "options.json")
        weights = os.path.join(args.outdir, "weights.hdf5")
        if files.kind == zip_archives.EFML:
            folder = model_folder.read_folder(files.folder)
            config, arrays = conversion.convert(folder)
            weight_file.write_arrays(arrays, weights)
            config.save(options)
            # the folder may be a temporary one (an archive's): named as the user named it
            config_name = (
                "EFML's standard one"
                if folder.config_source == "standard"
                else os.path.relpath(folder.config_source, files.folder)
            )
            what = f"ELMoForManyLangs model {args.source} (model config: {config_name})"
        else:
            config = ElmoConfig.from_file(files.options)
            weight_file.check_file(config, files.weights)
            _copy(files.weights, weights)
            config.save(options)
            if files.vocab is not None and files.vocab.endswith("vocab.txt"):
                _copy(files.vocab, os.path.join(args.outdir, "vocab.txt"))
            what = f"bilm-tf model {args.source}"
    print(
        f"{args.outdir}: options.json, weights.hdf5 of the {what}, {config.describe()}",
        file=sys.stderr,
    )
    return 0


def _copy(source, target):
    from elmo_tf import files  # lazy: beside the command's other modules

    with files.atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
