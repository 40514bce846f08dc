#!/usr/bin/env python3
"""Export an ELMo model as a TFLite flatbuffer: the same as `elmo-tf export tflite`.

    python export/tflite.py OUTFILE [--model NAME_OR_DIR | --options O --weights W] ...

The code lives in ``elmo_tf.export.tflite`` (library) and ``elmo_tf.cli.export`` (flags).
"""

import sys

from elmo_tf.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["export", "tflite", *sys.argv[1:]], as_command=True))
