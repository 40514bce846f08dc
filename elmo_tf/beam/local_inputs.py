"""The job's inputs on the local filesystem, checked without Beam: every pattern matches, and
every match is a file that can be read (Beam would crash on a directory and skip a broken link
silently). The command runs this before Beam and TensorFlow start."""

import glob
import os

from elmo_tf.errors import InputFileError


def is_local(pattern):
    return "://" not in pattern or pattern.startswith("file://")


def check_local_inputs(patterns):
    """Raises ``InputFileError`` for a local pattern that matches nothing, or whose matches
    include something that is not a readable file; other filesystems' patterns are Beam's.
    Returns the local matches."""
    found = []
    for pattern in patterns:
        if not is_local(pattern):
            continue
        matches = sorted(glob.glob(pattern.removeprefix("file://")))
        if not matches:
            raise InputFileError(f"{pattern}: no input file matches")
        bad = [(path, _problem(path)) for path in matches]
        bad = [f"{path} ({problem})" for path, problem in bad if problem]
        if bad:
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            raise InputFileError(
                f"{pattern}: matches what is not a readable text file: {', '.join(bad[:3])}{more}"
            )
        found += matches
    return found


def _problem(path):
    """Why a local match cannot be read as an input file, or ``None``."""
    if os.path.isdir(path):
        return "a directory"
    if os.path.islink(path) and not os.path.exists(path):
        return "a broken link"
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        return e.strerror or type(e).__name__
    return None
