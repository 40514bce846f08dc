"""The NLPL vector repository's ELMo models, by name.

``nlpl:<id>`` (a known entry), ``nlpl:<release>/<id>`` (any entry) and readable aliases
(``efml-en`` is ``nlpl:144``) name ``<base>/<release>/<id>.zip``, the base being
``ELMO_TF_NLPL_BASE_URL`` (a mirror keeps the ``<release>/<id>.zip`` layout) or
``BASE_URL``. Release 11 holds ELMoForManyLangs' 44 models (ids 136 to 179, ``EFML``), release
20 ELMo models trained with bilm-tf's code (``RELEASE_20``: the entries named in public
material; docs/models.md says which were checked how). The archive is downloaded once through
the model cache (``elmo_tf.presets.cache``), checked and unpacked there.
"""

import dataclasses
import re

from elmo_tf import checks
from elmo_tf.errors import PresetError
from elmo_tf.system import environment

BASE_URL = "http://vectors.nlpl.eu/repository"
BASE_URL_VARIABLE = "ELMO_TF_NLPL_BASE_URL"
PREFIX = "nlpl:"

# ELMoForManyLangs' README: id -> (alias suffix, language). Release 11.
EFML = {
    136: ("ar", "Arabic"),
    137: ("bg", "Bulgarian"),
    138: ("ca", "Catalan"),
    139: ("cs", "Czech"),
    140: ("cu", "Old Church Slavonic"),
    141: ("da", "Danish"),
    142: ("de", "German"),
    143: ("el", "Greek"),
    144: ("en", "English"),
    145: ("es", "Spanish"),
    146: ("et", "Estonian"),
    147: ("eu", "Basque"),
    148: ("fa", "Persian"),
    149: ("fi", "Finnish"),
    150: ("fr", "French"),
    151: ("ga", "Irish"),
    152: ("gl", "Galician"),
    153: ("grc", "Ancient Greek"),
    154: ("he", "Hebrew"),
    155: ("hi", "Hindi"),
    156: ("hr", "Croatian"),
    157: ("hu", "Hungarian"),
    158: ("id", "Indonesian"),
    159: ("it", "Italian"),
    160: ("ja", "Japanese"),
    161: ("ko", "Korean"),
    162: ("la", "Latin"),
    163: ("lv", "Latvian"),
    164: ("nl", "Dutch"),
    165: ("nb", "Norwegian Bokmål"),
    166: ("nn", "Norwegian Nynorsk"),
    167: ("pl", "Polish"),
    168: ("pt", "Portuguese"),
    169: ("ro", "Romanian"),
    170: ("ru", "Russian"),
    171: ("sk", "Slovak"),
    172: ("sl", "Slovene"),
    173: ("sv", "Swedish"),
    174: ("tr", "Turkish"),
    175: ("ug", "Uyghur"),
    176: ("uk", "Ukrainian"),
    177: ("ur", "Urdu"),
    178: ("vi", "Vietnamese"),
    179: ("zh-hant", "Chinese (traditional)"),
}
EFML_RELEASE = 11

# Release 20's bilm-tf models named in public material: id -> (alias, what it is).
RELEASE_20 = {
    195: ("ru-wiki-ruscorpora-tokens", "Russian Wikipedia and National Corpus, tokens"),
    196: ("ru-wiki-ruscorpora-lemmas", "Russian Wikipedia and National Corpus, lemmas"),
    201: ("semeval2020-de", "German (SemEval-2020 task 1)"),
    202: ("semeval2020-sv", "Swedish (SemEval-2020 task 1)"),
    203: ("semeval2020-la", "Latin (SemEval-2020 task 1)"),
    209: ("semeval2020-en", "English (SemEval-2020 task 1)"),
    210: ("no-wiki-lemmas", "Norwegian Wikipedia, lemmas"),
    211: ("no-wiki-tokens", "Norwegian Wikipedia, tokens"),
    212: ("ru-araneum-lemmas", "Russian: Araneum, lemmas"),
    217: ("norelmo30", "NorELMo30, Norwegian"),
    218: ("norelmo100", "NorELMo100, Norwegian"),
}
RELEASE_20_ID = 20


@dataclasses.dataclass(frozen=True)
class Entry:
    """One repository entry: ``<release>/<id>.zip``, and what it is (``None``: not known)."""

    release: int
    id: int
    alias: str | None = None
    description: str | None = None

    @property
    def name(self):
        return f"{PREFIX}{self.id}" if self.alias else f"{PREFIX}{self.release}/{self.id}"

    def url(self, base_url=None):
        base = (base_url or base_url_now()).rstrip("/")
        return f"{base}/{self.release}/{self.id}.zip"


def _entries():  # pragma: no mutate block, run at import, before mutmut forks a mutant
    found = {}
    for number, (code, language) in EFML.items():
        found[number] = Entry(EFML_RELEASE, number, f"efml-{code}", f"ELMoForManyLangs, {language}")
    for number, (alias, description) in RELEASE_20.items():
        found[number] = Entry(RELEASE_20_ID, number, alias, description)
    return found


ENTRIES = _entries()
ALIASES = {entry.alias: entry for entry in ENTRIES.values()}
_NAME = re.compile(r"nlpl:(?:(\d{1,4})/)?(\d{1,6})")


def base_url_now():
    """Where the archives live: ``ELMO_TF_NLPL_BASE_URL`` if set, else the repository."""
    return environment.value(BASE_URL_VARIABLE) or BASE_URL


def entry_named(name):
    """The ``Entry`` a name means; ``PresetError`` naming the known ones otherwise."""
    entry = lookup(name)
    if entry is None:
        raise PresetError(
            f"{name!r} names no NLPL repository entry known here: write nlpl:<release>/<id> "
            f"for any entry (nlpl:20/219), or one of {', '.join(sorted(ALIASES)[:6])}, ... "
            f"(docs/models.md)" + checks.did_you_mean(name, names())
        )
    return entry


def lookup(name):
    """The ``Entry`` a name means (``nlpl:144``, ``nlpl:20/219``, ``efml-en``), else ``None``
    (``nlpl:<id>`` of an entry not known here names none: its release is not known)."""
    if not isinstance(name, str):
        return None
    if name in ALIASES:
        return ALIASES[name]
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    release, number = match.group(1), int(match.group(2))
    known = ENTRIES.get(number)
    if release is None:
        return known
    if known is not None and known.release == int(release):
        return known
    return Entry(int(release), number)


def is_nlpl_name(name):
    """Whether ``name`` is written as an NLPL name (``nlpl:...``, ``efml-...``, or a known
    alias)."""
    return isinstance(name, str) and (name.startswith((PREFIX, "efml-")) or name in ALIASES)


def names():
    """The known names: each entry's ``nlpl:<id>`` and alias, sorted."""
    return sorted([*ALIASES, *(e.name for e in ENTRIES.values())])
