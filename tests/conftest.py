"""The suite's root: the shared fixtures (``support.fixtures``) for every level, and the test
files of optional extras left out when the extra is not installed.

The levels are folders: ``unit`` (no model, no process, no socket), ``model`` (models and
layers in this process) and ``integration`` (the real stack: processes, servers, exports,
Beam jobs, training runs); ``support`` is what they share.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from support.extras import TEST_FILES_NEEDING, installed  # noqa: E402

pytest_plugins = ["support.fixtures", "support.durations"]

# Optional extras stay optional: without them their test modules are not collected.
collect_ignore = [path for path, needs in TEST_FILES_NEEDING.items() if not installed(*needs)]
