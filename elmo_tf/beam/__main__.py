"""``python -m elmo_tf.beam``: see ``elmo_tf.beam.pipeline``."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow's first import

from elmo_tf.beam.pipeline import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
