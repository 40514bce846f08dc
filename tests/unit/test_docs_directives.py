"""The docs' code blocks are all accounted for: each says whether it runs (and how), the README
stays short, and most blocks run (tests/integration/test_docs_*.py run them)."""

from support.docs import BLOCKS, COMMAND_BLOCKS, DOCUMENTS, DOCUMENTS_BY_TEST_FILE
from support.paths import ROOT

from elmo_tf.system.extras import EXTRAS


def test_every_command_block_says_whether_it_runs():
    unmarked = [b.id for b in COMMAND_BLOCKS if b.directive is None]
    assert unmarked == [], "each needs <!-- test: run --> or <!-- test: skip REASON -->"
    for block in COMMAND_BLOCKS:
        words = block.words
        assert words[0] in ("run", "skip"), f"{block.id}: unknown directive {block.directive!r}"
        if words[0] == "skip":
            assert len(words) > 1, f"{block.id}: a skip needs its reason"
        for word in words[1:] if words[0] == "run" else []:
            assert word in ("fresh", "background", "needs-cpu=bfloat16") or word.startswith(
                "needs="
            ), block.id
            if word.startswith("needs="):
                assert word[6:] in EXTRAS, f"{block.id}: unknown extra {word[6:]}"
    outputs = [b for b in BLOCKS if b.directive == "output"]
    for block in outputs:
        previous = BLOCKS[BLOCKS.index(block) - 1]
        assert previous.document == block.document and previous.words[:1] == ["run"], block.id


def test_the_readme_stays_short():
    """The README says what it is, how to start and where to read on: 300 lines at most."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_the_docs_run_most_of_their_examples():
    run = [b for b in COMMAND_BLOCKS if b.words[:1] == ["run"]]
    assert len(run) >= 20 and len(run) >= 0.6 * len(COMMAND_BLOCKS)


def test_the_two_docs_test_files_run_every_document_once():
    halves = [document for documents in DOCUMENTS_BY_TEST_FILE.values() for document in documents]
    assert sorted(halves) == sorted(DOCUMENTS)


def test_no_install_line_in_the_docs_asks_the_package_index_for_elmo_tf():
    """The package is not on PyPI: every install line that names it installs a clone (``-e .``,
    ``".[extra]"``) or a built wheel, as the README's do."""
    import re

    from support.paths import ROOT

    pages = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("*/README.md")]
    found = []
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for command in re.findall(r"pip install[^`\n&;|]*", line):
                if re.search(r"""(?<![\w./-])["']?elmo[-_]tf(\[|["'\s]|$)""", command):
                    found.append(f"{page.relative_to(ROOT)}:{number}: {command}")
    assert not found, found
