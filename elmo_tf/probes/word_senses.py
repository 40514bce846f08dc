"""A word-sense probe: does a model's vector for a word depend on the sense it is used in?

The probe set is a list of sentences, each using one ambiguous word once in one of two
senses ("bank": money or river). For every sentence, the word's vector is taken from each
output layer of the model (``word_emb``, ``lstm_outputs1``, ...), and its nearest neighbour
by cosine similarity among the *other* sentences of the same word is looked up. The
nearest-neighbour accuracy of a layer is the fraction of sentences whose neighbour has the
same sense. A context-free layer gives every occurrence the same vector: all neighbours tie,
and a tie counts as the expected accuracy of breaking it at random, so such a layer scores
chance (here ``5/11``: the other 5 of 11 sentences share the sense).

The bundled probe set (``elmo_tf/probes/word_senses.tsv``, 6 words x 2 senses x 6 sentences)
is hand-written in the register of the bundled model's training text.

>>> model = elmo_tf.ELMo.from_preset("sotu")
>>> accuracies = nearest_neighbour_accuracy(model, load_examples())
>>> accuracies["lstm_outputs2"]
"""

import collections
import dataclasses
import importlib.resources

import numpy as np

from elmo_tf.errors import InputFileError
from elmo_tf.models.outputs import output_keys
from elmo_tf.tokens.text_lines import read_text_lines


@dataclasses.dataclass(frozen=True)
class SenseExample:
    """One use of ``word`` in ``sense``: ``tokens[position] == word``."""

    word: str
    sense: str
    tokens: tuple
    position: int


def default_examples_path():
    """The bundled probe set, as a path."""
    return str(importlib.resources.files(__package__) / "word_senses.tsv")


def load_examples(path=None):
    """Reads a probe set: ``WORD<TAB>SENSE<TAB>tokenised sentence`` per line (``#``: comment).

    Each sentence must use its word exactly once, and each word needs at least two senses
    with two sentences each; otherwise ``InputFileError`` names the line or the word.
    """
    path = path or default_examples_path()
    lines = list(read_text_lines(path, what="probe set"))
    examples = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise InputFileError(f"{path}:{number}: expected WORD<TAB>SENSE<TAB>sentence")
        word, sense, sentence = (field.strip() for field in fields)
        tokens = tuple(sentence.split())
        if tokens.count(word) != 1:
            raise InputFileError(
                f"{path}:{number}: the sentence must use {word!r} exactly once "
                f"(found {tokens.count(word)})"
            )
        examples.append(SenseExample(word, sense, tokens, tokens.index(word)))
    senses = collections.defaultdict(collections.Counter)
    for example in examples:
        senses[example.word][example.sense] += 1
    for word, counts in senses.items():
        if len(counts) < 2 or min(counts.values()) < 2:
            raise InputFileError(
                f"{path}: {word!r} needs two senses with at least two sentences each, "
                f"got {dict(counts)}"
            )
    if not examples:
        raise InputFileError(f"{path}: no examples")
    return examples


def word_vectors(model, examples, batch_size=64):
    """``{output key: (N, D) array}``: each example's word vector in each layer of ``model``
    (an ``ELMo``; every sentence embedded on its own, from the zero state)."""
    outputs = model.embed([list(e.tokens) for e in examples], batch_size=batch_size)
    rows = np.arange(len(examples))
    positions = np.array([e.position for e in examples])
    keys = output_keys(model.config.n_lstm_layers)[: model.config.n_lstm_layers + 1]
    return {key: outputs[key][rows, positions] for key in keys}


def nearest_neighbour_accuracy(model, examples, batch_size=64):
    """``{output key: accuracy}`` of the probe (see the module docstring) for each layer."""
    labels = [(e.word, e.sense) for e in examples]
    words = np.array([e.word for e in examples])
    return {
        key: _accuracy(vectors, words, labels)
        for key, vectors in word_vectors(model, examples, batch_size).items()
    }


def _accuracy(vectors, words, labels):
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.maximum(norms, 1e-12)
    similarity = unit @ unit.T
    scores = []
    for i in range(len(labels)):
        others = np.flatnonzero((words == words[i]) & (np.arange(len(labels)) != i))
        best = similarity[i, others].max()
        # Ties within float rounding are ties (a context-free layer gives equal vectors).
        tied = others[similarity[i, others] >= best - 1e-6]
        scores.append(np.mean([labels[j] == labels[i] for j in tied]))
    return float(np.mean(scores))
