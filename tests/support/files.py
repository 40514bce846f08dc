"""Files and directories the tests make: a training run's files as a reader finds them."""

import shutil

from support.paths import TINY


def fake_run(directory):
    """A run directory's files as a reader finds them (what is checked before TensorFlow
    reads any of them): its options, vocabulary, training options and ``ckpt-1``."""
    directory.mkdir()
    shutil.copy(TINY / "options.json", directory / "options.json")
    (directory / "vocab.txt").write_text("<S>\n</S>\n<UNK>\na\n", encoding="utf-8")
    (directory / "training_options.json").write_text("{}", encoding="utf-8")
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n', encoding="utf-8")
    for name in ("ckpt-1.index", "ckpt-1.data-00000-of-00001"):
        (directory / name).write_bytes(b"checkpoint bytes")
    return directory
