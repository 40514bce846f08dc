"""Training ELMo's bidirectional language model (Peters et al. 2018), as bilm-tf does.

==============================  ==========================================================
``vocabulary``                  ``Vocabulary``: bilm-tf's vocabulary file, built or read
``corpus``                      ``read_corpus``: text files -> checked integer arrays
``plan``                        ``plan_training``: a run's settings checked, inputs read
``data``                        the tf.data streams (training) and windows (evaluation)
``log_uniform_sampler``         the sampled softmax's stateless candidate sampler
``bidirectional_language_model``  ``BidirectionalLanguageModel``: ELMo + shared softmax
``trainer``                     ``Trainer``: TBPTT loop, Adagrad, clipping, checkpoints
``distribution``                ``MirroredStrategy`` / ``MultiWorkerMirroredStrategy``
``evaluation``                  held-out perplexity with the full softmax
``unigram``                     the unigram baseline's perplexity on the same predictions
``run_directory``               the training directory's files, its options, its checkpoints
``checkpoints``                 restoring the newest checkpoint; ``dump_weights`` to files
``softmax_file``                the softmax as an HDF5 file (``softmax.hdf5``)
==============================  ==========================================================

Names are imported on first use, so that the command line reads this package's defaults
(``TrainingOptions``) before it imports TensorFlow.
"""

from elmo_tf._lazy import lazy_exports

_EXPORTS = {
    "Vocabulary": "elmo_tf.training.vocabulary",
    "VocabularyError": "elmo_tf.training.vocabulary",
    "Corpus": "elmo_tf.training.corpus",
    "CorpusError": "elmo_tf.training.corpus",
    "read_corpus": "elmo_tf.training.corpus",
    "TrainingOptions": "elmo_tf.training.training_options",
    "TrainingPlan": "elmo_tf.training.plan",
    "plan_training": "elmo_tf.training.plan",
    "LogUniformSampler": "elmo_tf.training.log_uniform_sampler",
    "BidirectionalLanguageModel": "elmo_tf.training.bidirectional_language_model",
    "Trainer": "elmo_tf.training.trainer",
    "evaluate": "elmo_tf.training.evaluation",
    "unigram_perplexity": "elmo_tf.training.unigram",
    "dump_weights": "elmo_tf.training.checkpoints",
    "restore_language_model": "elmo_tf.training.checkpoints",
    "make_strategy": "elmo_tf.training.distribution",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
