"""Commit subjects stay one short line (72 characters), the detail in the body: read from the
repository's history since the rule began (``git log``, a process: this level)."""

import shutil
import subprocess

import pytest
from support.paths import ROOT

# The last commit before the rule: its history keeps the subjects it had.
RULE_SINCE = "0f60683"
MAX_SUBJECT = 72


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_commit_subjects_are_one_short_line():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    if _git("cat-file", "-e", f"{RULE_SINCE}^{{commit}}").returncode != 0:
        pytest.skip(f"{RULE_SINCE} is not in this clone's history (a shallow clone)")
    subjects = _git("log", "--format=%s", f"{RULE_SINCE}..HEAD").stdout.splitlines()
    assert subjects, "no commit since the rule began"
    assert [s for s in subjects if len(s) > MAX_SUBJECT] == []
