"""``elmo-tf dump-weights``: a training checkpoint as official ELMo files.

Writes to OUTDIR ``options.json`` (``n_characters`` 262, as inference expects),
``weights.hdf5`` in bilm-tf's layout (readable by ``elmo_tf.load_pretrained``, AllenNLP and
bilm-tf), ``vocab.txt`` and ``softmax.hdf5`` (``softmax/W`` ``(V, P)``, ``softmax/b``
``(V,)``; not part of the official files, but ``elmo-tf evaluate OUTDIR`` and
``elmo-tf train --init-from`` use it).
"""

import sys

from elmo_tf.cli.common import check_input_name, check_output_directory
from elmo_tf.training.run_directory import check_dump_directory, find_checkpoint, run_files


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "dump-weights",
        help="write a training checkpoint as options.json + weights.hdf5",
        description=(
            "Write the biLM of CHECKPOINT (a checkpoint directory, for its newest checkpoint, "
            "or a ckpt-N prefix) to OUTDIR as options.json, weights.hdf5 (the official "
            "layout), vocab.txt and softmax.hdf5."
        ),
    )
    parser.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory or prefix")
    parser.add_argument("outdir", metavar="OUTDIR", help="directory to write (created)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the files OUTDIR already holds (else such an OUTDIR is refused)",
    )
    parser.add_argument(
        "--softmax-float16",
        action="store_true",
        help="store softmax.hdf5 in float16: half the size, perplexity within rounding",
    )
    return parser


def run(args):
    # before TensorFlow: the run and its checkpoint exist, and OUTDIR can take the files
    # (writable, none of them a file of the run)
    check_input_name(args.checkpoint, "CHECKPOINT", what="run directory")
    directory = find_checkpoint(args.checkpoint)[0]
    check_output_directory(args.outdir)
    check_dump_directory(args.outdir, args.overwrite, run_files(directory))
    from elmo_tf.training.checkpoints import dump_weights  # lazy: restoring needs TensorFlow

    dtype = "float16" if args.softmax_float16 else "float32"
    outdir, step = dump_weights(
        args.checkpoint, args.outdir, softmax_dtype=dtype, overwrite=args.overwrite
    )
    print(
        f"{outdir}: options.json, weights.hdf5, vocab.txt, softmax.hdf5 (step {step})",
        file=sys.stderr,
    )
    return 0
