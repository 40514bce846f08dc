#!/usr/bin/env python3
"""Export an ELMo model as a versioned TF SavedModel: the same as `elmo-tf export saved-model`.

    python export/saved_model.py OUTDIR [--model NAME_OR_DIR | --options O --weights W] ...

The code lives in ``elmo_tf.export.saved_model`` (library) and ``elmo_tf.cli.export`` (flags).
"""

import sys

from elmo_tf.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["export", "saved-model", *sys.argv[1:]], as_command=True))
