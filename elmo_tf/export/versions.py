"""TF Serving's version directories: ``BASE/N/`` holds version N of a model.

One parser for every place that reads a version (exporting the next one, the server's polls,
its status and REST URLs, the Beam handler choosing the newest): a version is a name of ASCII
digits whose value fits in a signed 64-bit integer, as TF Serving reads it (leading zeros
allowed: ``0007/`` is version 7). Anything else is not a version.
"""

import os

from elmo_tf.errors import ExportError

MAX_VERSION = 2**63 - 1  # TF Serving's versions are int64


def parse_version(name):
    """The version number a directory or URL component ``name`` stands for, or ``None``."""
    if not name or not name.isascii() or not name.isdigit():  # "²".isdigit() is true
        return None
    value = int(name)
    return value if value <= MAX_VERSION else None


def versions_in(names):
    """``{version: name}`` of the names that are versions; of two names for one version
    (``7`` and ``007``) the shorter, then the smaller, wins, so the choice never depends on
    listing order."""
    found = {}
    for name in sorted(names, key=lambda n: (len(n), n)):
        version = parse_version(name)
        if version is not None:
            found.setdefault(version, name)
    return found


def next_version(outdir):
    """One above the highest version under ``outdir`` (1 when it holds none)."""
    names = os.listdir(outdir) if os.path.isdir(outdir) else []
    return max(versions_in(names), default=0) + 1


def version_directory(outdir, version=None):
    """``(version, outdir/version)`` (default: the next version), refusing an existing one."""
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise ExportError(
            f"{outdir}: is a file; OUTDIR is the model's base directory, which holds its "
            "versions OUTDIR/N/"
        )
    if version is None:
        version = next_version(outdir)
        if version > MAX_VERSION:  # the highest version TF Serving reads is taken
            raise ExportError(
                f"{outdir}: holds version {MAX_VERSION:,}, the highest TF Serving reads, so "
                "there is no next one; give a free version number N (--version N)"
            )
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_VERSION:
        raise ExportError(f"version must be an integer from 0 to 2**63 - 1, got {version!r}")
    target = os.path.join(outdir, str(version))
    if os.path.exists(target):
        raise ExportError(f"{target} already exists; choose another version")
    return version, target
