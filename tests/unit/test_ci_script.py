"""CI (``.ci/run``) judges as a new user's machine would: it makes a new virtualenv outside the
tree, activates it before anything is installed, and runs the README's two set-up commands as
the README writes them."""

import re

from support.paths import ROOT

CI = ROOT / ".ci" / "run"


def readme_setup_commands():
    """The command lines of the README's set-up block (its first ``bash`` block)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def ci_lines():
    return [line.strip() for line in CI.read_text(encoding="utf-8").splitlines()]


def test_ci_runs_the_readme_setup_commands_as_written():
    commands = readme_setup_commands()
    assert len(commands) == 2
    assert commands[1].endswith("python3 -m pytest -q")
    lines = ci_lines()
    assert [lines.index(c) for c in commands] == sorted(lines.index(c) for c in commands)


def test_ci_installs_into_a_new_virtualenv_outside_the_tree():
    lines = ci_lines()
    made = next(i for i, line in enumerate(lines) if re.match(r"VENV=.*mktemp -d", line))
    created = lines.index('python3 -m venv "$VENV"')
    activated = lines.index('source "$VENV/bin/activate"')
    first_install = next(i for i, line in enumerate(lines) if "pip install" in line)
    assert made < created < activated < first_install
