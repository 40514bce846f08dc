"""``python -m elmo_tf``: the ``elmo-tf`` command line."""

from elmo_tf.cli.main import console_main

if __name__ == "__main__":
    console_main()
