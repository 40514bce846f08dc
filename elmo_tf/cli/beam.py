"""``elmo-tf beam``: ``python -m elmo_tf.beam`` under the ``elmo-tf`` command.

Every argument after ``beam`` goes to ``elmo_tf.beam.pipeline`` unparsed: besides its own
flags it takes any Beam pipeline option (``--runner``, ``--project``, ...), which this
command's parser cannot know. Needs the ``[beam]`` extra.
"""

import argparse

from elmo_tf.cli.common import require_extra


def add_parser(subparsers):
    # prefix_chars="+": no argument is an option of this parser, so "--input ..." and every
    # Beam option reach the pipeline's own parser through the REMAINDER positional.
    parser = subparsers.add_parser(
        "beam",
        help="embed a whole corpus on Apache Beam (Parquet or TFRecord; 'elmo-tf beam --help')",
        description="Runs python -m elmo_tf.beam with the arguments that follow.",
        prefix_chars="+",
        add_help=False,
    )
    parser.add_argument("beam_args", nargs=argparse.REMAINDER, metavar="ARGS")
    return parser


def run(args):
    require_extra("beam", "apache_beam", "pyarrow")
    from elmo_tf.beam import pipeline

    try:
        pipeline.run(args.beam_args, prog="elmo-tf beam")
    except SystemExit as e:  # --help or a usage error; argparse has printed it
        return e.code if isinstance(e.code, int) else 0
    return 0
