#!/usr/bin/env python3
"""Export an ELMo model as a TFLite flatbuffer: the same as `elmo-tf export tflite`.

    python export/tflite.py OUTFILE [--model NAME_OR_DIR | --options O --weights W] ...

The code lives in ``elmo_tf.export.tflite`` (library) and ``elmo_tf.cli.export`` (flags).
"""

import os
import sys

if __name__ == "__main__":
    # The command itself, so that it starts as it does (--help without TensorFlow).
    command = [sys.executable, "-m", "elmo_tf", "export", "tflite", *sys.argv[1:]]
    os.execv(sys.executable, command)
