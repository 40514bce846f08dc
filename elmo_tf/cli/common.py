"""What every ``elmo-tf`` subcommand shares: its usage error, and the check of its extra."""

import os

from elmo_tf.errors import ElmoError, InputFileError
from elmo_tf.system import extras, files


class CommandError(ElmoError):
    """A command-line usage error found after parsing (flags that contradict each other).

    Only the CLI raises it; the library raises the other ``ElmoError`` classes, which
    ``main`` reports the same way: one line on stderr, exit status 1.
    """


def require_extra(extra):
    """Raises ``MissingExtraError`` (one line naming ``extra`` and its install command) when
    the extra the running command needs is not installed; call it before any work."""
    extras.require(extra, "this command")


# The name that stands for standard input (``embed INPUT``, ``client``) and never for standard
# output: every output is written under a temporary name and renamed into place.
STANDARD_INPUT = "-"


def check_output_name(name, label, what="file"):
    """Raises ``CommandError`` for an output ``name`` that names no ``what`` (``"file"``,
    ``"directory"``), before any work: empty, or ``-`` (a stream cannot take a file renamed
    into place; ``./-`` names one called ``-``). ``label`` is the argument as the usage line
    names it (``OUTPUT``, ``--output``)."""
    if not name:
        raise CommandError(f"{label} is empty; name the {what} to write")
    if name == STANDARD_INPUT:
        raise CommandError(
            f"{label} is '-': elmo-tf writes no output to standard output (an output is "
            f"written under a temporary name and renamed into place); name a {what} (./- "
            "for one named -)"
        )


def check_input_name(name, label, stdin=False, what="file"):
    """Raises ``CommandError`` for an input ``name`` that names no ``what``: empty, or ``-``
    where the command reads no standard input (``stdin``: it does, as ``embed INPUT``)."""
    if not name:
        raise CommandError(f"{label} is empty; name the {what} to read")
    if name == STANDARD_INPUT and not stdin:
        raise CommandError(
            f"{label} is '-': this command reads no standard input (elmo-tf embed and client "
            f"read it from '-'); name a {what} (./- for one named -)"
        )


def check_output_path(output, inputs, kind, label="OUTPUT"):
    """Raises ``CommandError`` unless ``output`` names a file that can be created or replaced,
    before any work: an empty name or ``-`` (``check_output_name``), a directory that does not
    exist, a directory name (it expected ``kind``), one of the files ``inputs`` the command
    reads or a place inside one of its input directories (``files.check_not_input``), a
    device, pipe or socket (``files.output_target``), or a directory this process cannot
    write into."""
    check_output_name(output, label)
    if output.endswith(("/", os.sep)) or os.path.isdir(output):
        raise CommandError(f"{output}: names a directory, expected {kind}")
    directory = os.path.dirname(os.path.abspath(files.output_target(output)))
    if not os.path.isdir(directory):
        raise CommandError(f"{output}: output directory {directory} does not exist")
    files.check_not_input(output, [p for p in inputs if p != STANDARD_INPUT], CommandError)
    _check_can_write(output, directory)


def check_output_directory(outdir, inputs=(), label="OUTDIR"):
    """Raises ``CommandError`` unless ``outdir`` names a directory (present, or made with its
    missing parents) that this process can write into, outside the ``inputs`` (files and
    directories) the command reads, before any work."""
    check_output_name(outdir, label, "directory")
    files.check_not_input(outdir, [p for p in inputs if p != STANDARD_INPUT], CommandError)
    existing = _nearest_existing(os.path.abspath(outdir))
    if not os.path.isdir(existing):
        if existing == os.path.abspath(outdir):
            raise CommandError(f"{outdir}: exists and is not a directory: choose a directory")
        raise CommandError(f"{outdir}: {existing} is a file, not a directory")
    _check_can_write(outdir, existing)


def _nearest_existing(path):
    """``path`` or its nearest parent that exists."""
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def _check_can_write(output, directory):
    """``CommandError`` unless a file can be made in ``directory`` (a read-only filesystem and
    missing permissions refuse it; made and removed at once)."""
    try:
        with files.atomic_path(os.path.join(directory, ".elmo-tf-write-check")) as probe:
            open(probe, "xb").close()
            raise _Probed
    except _Probed:
        pass
    except OSError as e:
        raise CommandError(f"{output}: cannot write to {directory} ({e.strerror or e})") from None


def check_input_exists(path, label="INPUT"):
    """Raises ``InputFileError`` for an input that does not exist or is a directory, before
    any work (the reader checks the rest as it reads: a pipe can be read only once); ``-`` is
    standard input."""
    check_input_name(path, label, stdin=True)
    if path == STANDARD_INPUT:
        return
    if not os.path.lexists(path) or (os.path.islink(path) and not os.path.exists(path)):
        raise InputFileError(f"{path}: input file not found")
    if os.path.isdir(path):
        raise InputFileError(f"{path}: input is a directory, expected a text file")


def check_output_prefix(prefix, inputs=()):
    """Raises ``CommandError`` unless the files ``PREFIX-*`` can be written under ``prefix``'s
    directory (made if missing), before any work: an empty prefix or ``-``, a part of its path
    that is a file, a directory this process cannot write into, or a name ``PREFIX-*`` that
    one of the local files ``inputs`` has (a job would read an earlier job's outputs, or
    replace its own input). A remote prefix (``gs://...``) is its runner's to check."""
    check_output_name(prefix, "--output", "file prefix")
    if "://" in prefix:
        return
    if prefix.endswith(("/", os.sep)) or os.path.isdir(prefix):
        raise CommandError(f"--output {prefix}: names a directory, expected a file prefix")
    directory = os.path.dirname(os.path.abspath(prefix))
    existing = _nearest_existing(directory)
    if not os.path.isdir(existing):
        raise CommandError(f"--output {prefix}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CommandError(f"--output {prefix}: cannot write under {existing}")
    outputs = os.path.join(os.path.realpath(directory), os.path.basename(prefix) + "-")
    for path in inputs:
        if os.path.realpath(path).startswith(outputs):
            raise CommandError(
                f"--output {prefix}: the input {path} is named as this job's outputs are "
                f"({prefix}-*): it would read an earlier job's output as text, or replace it; "
                "choose another --output or narrow --input"
            )


class _Probed(Exception):
    """Ends the write check without renaming its file into place (it is removed)."""
