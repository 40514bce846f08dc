"""The tiny training set-up the training tests share: an architecture small enough to train
in seconds, its ``elmo-tf train`` flags, a corpus, a trainer, a checkpoint's values."""

import random

TINY_OPTIONS = {
    "lstm": {"projection_dim": 8, "dim": 16, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
    "char_cnn": {
        "activation": "relu",
        "filters": [[1, 4], [2, 4]],
        "n_highway": 1,
        "embedding": {"dim": 4},
        "n_characters": 262,
    },
}
# The tiny architecture as `elmo-tf train` flags.
ARCH = ["--filters", "1:4,2:4", "--char-embedding-dim", "4", "--projection-dim", "8"]
ARCH += ["--lstm-dim", "16"]
FAST = ["--batch-size", "4", "--unroll-steps", "5", "--num-sampled", "8", "--log-every", "1"]

WORDS = "the a cat dog sat ran on under mat house big small red old new".split()


def tiny_config():
    from elmo_tf.config import ElmoConfig

    return ElmoConfig.from_options(TINY_OPTIONS)


def make_corpus(path, n=50, seed=0, words=WORDS):
    """``n`` random lines of ``words`` written to ``path``; returns ``path``."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 8))) for _ in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def options(**changes):
    """``TrainingOptions`` of the tiny runs, with ``changes``."""
    from elmo_tf.training.training_options import TrainingOptions

    base = dict(batch_size=4, unroll_steps=5, num_sampled=8, checkpoint_every=1000)
    return TrainingOptions(**{**base, **changes})


def make_trainer(corpus_file, directory, opts):
    """``(Trainer, corpus, vocabulary)`` of the tiny architecture on ``corpus_file``."""
    from elmo_tf.training import data
    from elmo_tf.training.corpus import read_corpus
    from elmo_tf.training.trainer import Trainer, new_model
    from elmo_tf.training.vocabulary import Vocabulary

    corpus = read_corpus([corpus_file])
    vocabulary = Vocabulary.from_counts(corpus.counts())
    tables = data.StreamTables(corpus, corpus.type_targets(vocabulary))
    build = new_model(tiny_config(), len(vocabulary), opts)
    return Trainer(build, tables, opts, str(directory), logdir=""), corpus, vocabulary


def checkpoint_values(prefix):
    """``{name: array}`` of every value a checkpoint holds but its bookkeeping."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    names = [n for n in reader.get_variable_to_shape_map() if not n.startswith("_")]
    return {n: reader.get_tensor(n) for n in names}


def run_cli(argv, capsys):
    """``(status, stdout, stderr)`` of ``elmo-tf ARGV`` run in this process."""
    from elmo_tf.cli.main import main

    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err
