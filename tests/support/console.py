"""The installed ``elmo-tf`` console script, run as a user runs it."""

import os
import shutil
import subprocess
import sys

SCRIPT = shutil.which("elmo-tf", path=os.path.dirname(sys.executable)) or shutil.which("elmo-tf")


def run_script(argv, cwd, block_tensorflow=False, env=None, timeout=120):
    """``subprocess.run`` of ``elmo-tf ARGV`` in ``cwd`` with a user's environment (no
    ``TF_CPP_MIN_LOG_LEVEL``; ``env`` adds to it); ``block_tensorflow`` makes TensorFlow and
    Keras unimportable in it (a ``sitecustomize`` beside ``cwd``), to show what answers
    before TensorFlow starts."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env or {})
    if block_tensorflow:
        blocker = cwd.parent / f"{cwd.name}-blocker"
        blocker.mkdir(exist_ok=True)
        (blocker / "sitecustomize.py").write_text(
            "import sys\nfor name in ('tensorflow', 'keras'):\n    sys.modules[name] = None\n"
        )
        environment["PYTHONPATH"] = os.pathsep.join(
            [str(blocker), environment.get("PYTHONPATH", "")]
        )
    return subprocess.run(
        [SCRIPT, *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
