"""The package's structure rules, read from the source (no TensorFlow needed):

- argparse (imports or parser calls) lives only in ``elmo_tf/cli/``;
- no import circle anywhere in ``elmo_tf``, function-level imports included;
- a function-level import says why it is one (``# lazy: ...`` on its line or the line above):
  an optional extra, or a command line that starts without TensorFlow (which
  tests/integration/test_command_start.py checks in a process).
"""

import ast
import re

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "elmo_tf"


def _modules():
    """``{dotted name: path}`` of every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _function_level_imports(tree):
    nodes = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            nodes += [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
    return nodes


def _imported_modules(node):
    """The package modules an import statement imports (``from a import b``: ``a.b`` if it is
    a module, else ``a``)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if not node.module:
            return []
        subs = [f"{node.module}.{alias.name}" for alias in node.names]
        names = [name for name in subs if name in MODULES]
        if len(names) < len(subs):
            names.append(node.module)
    found = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            found.append(name)
    return found


def test_argparse_only_in_the_command_line_package():
    offenders = []
    for name, path in MODULES.items():
        if name.startswith("elmo_tf.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
                offenders.append(f"{name}:{node.lineno} imports argparse")
            if isinstance(node, ast.ImportFrom) and node.module == "argparse":
                offenders.append(f"{name}:{node.lineno} imports from argparse")
            if isinstance(node, ast.Attribute) and node.attr in ("add_argument", "parse_args"):
                offenders.append(f"{name}:{node.lineno} calls {node.attr}")
    assert offenders == []


def test_no_import_circle():
    graph = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[name].update(m for m in _imported_modules(node) if m != name)
    # A cycle is a module reachable from itself; report the first one found.
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            module, trail = stack.pop()
            for target in graph[module]:
                if target == start:
                    pytest.fail("import circle: " + " -> ".join([*trail, start]))
                if target not in seen:
                    seen.add(target)
                    stack.append((target, [*trail, target]))


def test_every_function_level_import_says_why():
    unexplained = []
    for path in MODULES.values():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in _function_level_imports(ast.parse(text)):
            if not _explained(lines, node.lineno - 1):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                unexplained.append(f"{where}: {lines[node.lineno - 1].strip()}")
    assert unexplained == []


def _explained(lines, index):
    """Whether line ``index`` (an import) or the comment heading its group of imports says
    ``# lazy: ...``."""
    if "# lazy:" in lines[index]:
        return True
    for line in reversed(lines[:index]):
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.startswith("# lazy:")
        if not stripped.startswith(("import ", "from ")) and stripped not in ("", ")"):
            if not stripped.endswith(",") and not stripped.endswith("("):
                return False
    return False


# The package's top level: the model's config, its errors, value checks, precision, the
# backend, the package face and its helpers; everything else lives in a folder that names it.
MAX_TOP_LEVEL_MODULES = 12


def test_the_top_level_holds_few_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_package_faces_only_hand_names_on():
    """A package's ``__init__.py`` below the top level defines no function or class: it
    imports and lists names (or declares constants), and the logic lives in a module that
    says what it is."""
    faces = sorted(p for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    assert len(faces) > 10
    defining = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path in faces
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    assert defining == []


def _folders():
    """``(the repository's folders, the package's)``: what a newcomer reads as the design."""

    def listed(directory):
        return sorted(
            p.name
            for p in directory.iterdir()
            if p.is_dir()
            and not p.name.startswith((".", "_"))
            and not p.name.endswith(".egg-info")
            and p.name not in ("mutants", "build", "dist")  # mutmut's copy; build outputs
            and any(p.rglob("*.py")) | any(p.rglob("*.md"))
        )

    return listed(ROOT), listed(PACKAGE)


def test_the_readme_map_and_the_architecture_name_every_folder():
    top, package = _folders()
    assert "elmo_tf" in top and {"tokens", "kinds", "foreign", "system"} <= set(package)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| [ARCHITECTURE.md]")]
    architecture = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for folder in top:
        assert re.search(rf"(?<![\w/]){folder}/", row), folder
        assert f"`{folder}/`" in architecture, folder
    for folder in package:
        assert re.search(rf"(?<![\w/]){folder}/", row), folder
        assert f"`elmo_tf/{folder}/`" in architecture, folder
