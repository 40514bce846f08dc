"""The installed ``elmo-tf`` console script, run as a user runs it."""

import os
import shutil
import subprocess
import sys

SCRIPT = shutil.which("elmo-tf", path=os.path.dirname(sys.executable)) or shutil.which("elmo-tf")


def blocker(directory, modules=("tensorflow", "keras")):
    """A ``sitecustomize`` in ``directory`` that makes ``modules`` unimportable in a process
    whose ``PYTHONPATH`` names it: TensorFlow and Keras, to show what the command does before
    they start; TensorFlow alone, as on a machine without it (Keras then names the extra)."""
    directory.mkdir(exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        f"import sys\nfor name in {tuple(modules)!r}:\n    sys.modules[name] = None\n"
    )
    return directory


def run_python(code, tmp_path, block_tensorflow=False, env=None, timeout=120, **kwargs):
    """``subprocess.run`` of ``python -c code`` with a user's environment (``env`` adds to it);
    ``block_tensorflow`` runs it as on a machine without TensorFlow. Other arguments go to
    ``subprocess.run``."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env or {})
    if block_tensorflow:
        path = str(blocker(tmp_path / "blocker", ("tensorflow",)))
        environment["PYTHONPATH"] = os.pathsep.join([path, environment.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def run_script(argv, cwd, block_tensorflow=False, env=None, timeout=120):
    """``subprocess.run`` of ``elmo-tf ARGV`` in ``cwd`` with a user's environment (no
    ``TF_CPP_MIN_LOG_LEVEL``; ``env`` adds to it); ``block_tensorflow`` makes TensorFlow and
    Keras unimportable in it (a ``sitecustomize`` beside ``cwd``), to show what answers
    before TensorFlow starts."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env or {})
    if block_tensorflow:
        path = str(blocker(cwd.parent / f"{cwd.name}-blocker"))
        environment["PYTHONPATH"] = os.pathsep.join([path, environment.get("PYTHONPATH", "")])
    return subprocess.run(
        [SCRIPT, *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
