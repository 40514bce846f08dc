"""Fuzz target: an ELMoForManyLangs model's token tables as its ONNX file carries them
(``elmo_tf.vocabulary`` metadata, decoded by ``CodepointVocabulary.from_bytes``: the length
checked against the model's config before any array is made, then every check of a weight
file's tables).

The input: the tables' bytes, for the tiny ELMoForManyLangs model's config.

The contract: a vocabulary whose bytes are the input and whose tables map tokens, or a
``WeightFileError`` of one line naming the metadata; nothing else, whatever the bytes.
"""

import pathlib

from elmo_tf.errors import WeightFileError
from elmo_tf.tokens import codepoints

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = "model.onnx: its elmo_tf.vocabulary metadata"


def _model():
    from elmo_tf.foreign import efml_folder
    from elmo_tf.kinds import efml_conversion

    config, arrays = efml_conversion.convert(
        efml_folder.read_folder(ROOT / "tests/fixtures/efml/tiny")
    )
    vocabulary = codepoints.CodepointVocabulary.from_arrays(config, arrays, "fixture")
    return config, vocabulary


CONFIG, VOCABULARY = _model()


def TestOneInput(data):  # noqa: N802 - libFuzzer's name
    try:
        vocabulary = codepoints.CodepointVocabulary.from_bytes(CONFIG, data, SOURCE)
    except WeightFileError as e:
        message = str(e)
        assert message.startswith(SOURCE) and "\n" not in message, repr(message)
        assert len(message) < 1000, len(message)
        return
    assert vocabulary.to_bytes() == data
    mapper = codepoints.CodepointMapper(CONFIG, vocabulary)
    assert mapper.batch_to_ids([["a", "中", "<bos>"]]).shape == (1, 3, CONFIG.id_width)


def seed_corpus():
    """The tiny model's tables."""
    return [VOCABULARY.to_bytes()]
