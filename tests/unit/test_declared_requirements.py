"""Every third-party module the project's code imports is provided by a requirement that
``setup.py`` names (the base install or any extra): a fresh virtualenv with ``pip install -e
".[dev]"`` then holds everything the suite imports, whatever this machine has besides.

The rule reads the source (``ast``), never imports it, so that it fails on a machine where the
undeclared package happens to be installed. It covers ``elmo_tf/``, ``tests/``, ``fuzz/``,
``serving/``, ``export/`` and ``scripts/``. The scripts that made committed fixtures once, with
the libraries whose numbers they record (``tests/fixtures/**/make_*.py``: PyTorch,
ELMoForManyLangs), are exempt: the suite never runs them.
"""

import ast
import os
import pathlib
import re
import sys

import pytest
from support.paths import ROOT

ROOTS = ("elmo_tf", "tests", "fuzz", "serving", "export", "scripts")
# Import names whose distribution is named otherwise (any other: its name, "_" as "-").
DISTRIBUTIONS = {
    "grpc": "grpcio",
    "google.protobuf": "protobuf",
    "google.crc32c": "google-crc32c",
    "tensorflow_serving": "tensorflow-serving-api",
    "pkg_resources": "setuptools",
    "yaml": "pyyaml",
}
# The repository's own top-level names, and the test suite's (``tests`` is on the path).
OWN = {"elmo_tf", "support", "conftest"}


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared():
    """The distribution names ``setup.py`` requires, in the base install or any extra."""
    from distutils.core import run_setup  # setup.py as pip reads it (setuptools)

    setup = run_setup(os.path.join(ROOT, "setup.py"), stop_after="init")
    requirements = list(setup.install_requires)
    for extra in setup.extras_require.values():
        requirements += extra
    return {_normalized(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r).group()) for r in requirements}


def _exempt(path):
    relative = path.relative_to(ROOT)
    return relative.parts[:2] == ("tests", "fixtures") and path.name.startswith("make_")


def _sources():
    for top in ROOTS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if not _exempt(path):
                yield path


def imported_names(source, siblings=()):
    """The third-party import names of ``source`` (``google.protobuf``, not ``google``):
    absolute imports that are neither the standard library, ours, nor a module beside it
    (``siblings``: a script's own helpers)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            top = ".".join(parts[:2]) if parts[0] == "google" and len(parts) > 1 else parts[0]
            if parts[0] in sys.stdlib_module_names or parts[0] in OWN or parts[0] in siblings:
                continue
            found.add(top)
    return found


def distribution(name):
    return _normalized(DISTRIBUTIONS.get(name, name))


def undeclared(declared):
    """``{import name: first file importing it}`` of the names no requirement provides."""
    missing = {}
    for path in _sources():
        siblings = {p.stem for p in path.parent.glob("*.py")}
        for name in imported_names(path.read_text(encoding="utf-8"), siblings):
            if distribution(name) not in declared:
                missing.setdefault(name, str(path.relative_to(ROOT)))
    return missing


@pytest.fixture(scope="module")
def declared():
    return _declared()


def test_every_imported_package_is_declared(declared):
    assert undeclared(declared) == {}


def test_the_rule_sees_an_undeclared_import(declared):
    """A package that is installed here but named by no requirement is reported, and so are
    the names that differ from their distribution's."""
    source = "\n".join(
        [
            "import os.path, json",  # the standard library
            "import numpy as np",  # declared
            "from elmo_tf import checks",  # ours
            "import support.paths",  # the suite's own
            "import helper",  # a module beside the file
            "from hypothesis import given",
            "import requests",
            "from google.protobuf import text_format",
            "from . import sibling",  # relative: ours
        ]
    )
    names = imported_names(source, siblings={"helper"})
    assert names == {"numpy", "hypothesis", "requests", "google.protobuf"}
    without = declared - {"hypothesis", "requests", "protobuf"}
    assert sorted(n for n in names if distribution(n) not in without) == [
        "google.protobuf",
        "hypothesis",
        "requests",
    ]


def test_the_fixture_makers_are_the_only_exemption():
    exempt = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py") if _exempt(p))
    assert exempt and all(re.fullmatch(r"tests/fixtures/(\w+/)?make_\w+\.py", p) for p in exempt)
    assert not _exempt(pathlib.Path(ROOT / "tests" / "unit" / "make_x.py"))
