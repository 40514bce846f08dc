"""Rules the test suite keeps, checked on its own source.

- No test aims code at the machine's own devices or kernel files: a path under ``/dev``,
  ``/proc`` or ``/sys`` as a link target, an input or an output. A regressed check would then
  replace or fill what every process on the machine uses (CI runs as root); special files
  are made under the test's ``tmp_path`` (``support.special_files``).
- No fixed sleep: a test waits for a condition with a deadline (a short poll interval is
  fine), so it neither waits longer than it must nor fails on a slow machine.
"""

import ast
import pathlib
import re

import pytest

TESTS = pathlib.Path(__file__).resolve().parents[1]
SYSTEM_PREFIXES = ("/dev", "/proc", "/sys")
# Longest sleep a polling loop may take between two looks at its condition (seconds).
POLL_INTERVAL = 0.25


def _test_sources():
    return sorted(
        p
        for p in TESTS.rglob("*.py")
        if "fixtures" not in p.relative_to(TESTS).parts and p.name != pathlib.Path(__file__).name
    )


def _strings(tree):
    """Every string constant of ``tree`` and the literal parts of its f-strings, skipping
    docstrings (they may say what a test avoids)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                yield node.lineno, node.value


def _system_paths(source):
    """``(line, text)`` of the strings in ``source`` that name a path under /dev, /proc, /sys."""
    found = []
    for line, text in _strings(ast.parse(source)):
        for word in text.split():
            word = word.strip("'\"")
            if any(word == p or word.startswith(p + "/") for p in SYSTEM_PREFIXES):
                found.append((line, text))
    return found


def _long_sleeps(source):
    """``(line, seconds)`` of the calls ``sleep(N)`` in ``source`` with a constant N longer
    than a poll interval."""
    return [
        (node.lineno, node.args[0].value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "sleep"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, int | float)
        and node.args[0].value > POLL_INTERVAL
    ]


@pytest.mark.parametrize("path", _test_sources(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_names_a_system_path(path):
    assert _system_paths(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", _test_sources(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_fixed_sleep(path):
    assert _long_sleeps(path.read_text(encoding="utf-8")) == []


def test_the_rules_see_what_they_forbid():
    # Source text for the rules to parse, never run; its paths are put together from the
    # prefixes, so that no line of this file names a system path itself.
    dev, proc, sys_ = SYSTEM_PREFIXES
    source = "\n".join(
        [
            "import os, time",
            f'os.symlink("{dev}/null", "x")',
            f'open(f"{proc}/self/fd/{{1}}")',
            f'open("{sys_}")',
            'open("/devices/x")  # not a system path',
            "time.sleep(2.0)",
            "time.sleep(0.05)",
        ]
    )
    assert sorted(line for line, _ in _system_paths(source)) == [2, 3, 4]
    assert _long_sleeps(source) == [(6, 2.0)]


DOCUMENTS = ("README.md", "ARCHITECTURE.md", "docs", "export", "serving", "elmo_tf", ".ci")
NAMED_TEST = re.compile(r"tests/[\w/]+\.py(?:::\w+)?")


def _named_tests():
    root = TESTS.parent
    found = set()
    for top in DOCUMENTS:
        path = root / top
        for document in [path] if path.is_file() else sorted(path.rglob("*")):
            if document.suffix in (".md", ".py", "") and document.is_file():
                found |= set(
                    NAMED_TEST.findall(document.read_text(encoding="utf-8", errors="ignore"))
                )
    return sorted(found)


def test_every_test_the_docs_name_exists():
    """A row of docs/robustness.md (or any document) that names the test checking it names
    a file, and a test in it, that exist."""
    named = _named_tests()
    assert len(named) > 20
    for reference in named:
        path, _, test = reference.partition("::")
        assert (TESTS.parent / path).is_file(), reference
        if test:
            assert f"def {test}(" in (TESTS.parent / path).read_text(encoding="utf-8"), reference
