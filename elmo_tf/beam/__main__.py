"""``python -m elmo_tf.beam``: ``elmo-tf beam`` (the job's flags are in ``elmo_tf.cli.beam``)."""

import sys

from elmo_tf.cli.main import console_main

if __name__ == "__main__":
    console_main(["beam", *sys.argv[1:]])
