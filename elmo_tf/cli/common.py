"""What every ``elmo-tf`` subcommand shares: its usage error, and the check of its extra."""

import os

from elmo_tf import extras, files
from elmo_tf.errors import ElmoError, InputFileError


class CommandError(ElmoError):
    """A command-line usage error found after parsing (flags that contradict each other).

    Only the CLI raises it; the library raises the other ``ElmoError`` classes, which
    ``main`` reports the same way: one line on stderr, exit status 1.
    """


def require_extra(extra):
    """Raises ``MissingExtraError`` (one line naming ``extra`` and its install command) when
    the extra the running command needs is not installed; call it before any work."""
    extras.require(extra, "this command")


def check_output_path(output, inputs, kind):
    """Raises ``CommandError`` unless ``output`` names a file that can be created or replaced,
    before any work: a directory that does not exist, a directory name (it expected ``kind``),
    one of the files ``inputs`` the command reads, a device,
    pipe or socket (``files.output_target``), or a directory this process cannot write into."""
    if output.endswith(("/", os.sep)) or os.path.isdir(output):
        raise CommandError(f"{output}: names a directory, expected {kind}")
    directory = os.path.dirname(os.path.abspath(files.output_target(output)))
    if not os.path.isdir(directory):
        raise CommandError(f"{output}: output directory {directory} does not exist")
    for input_path in inputs:
        if (
            os.path.exists(output)
            and os.path.exists(input_path)
            and os.path.samefile(output, input_path)
        ):
            raise CommandError(f"{output}: is an input file; choose another output name")
    try:
        with files.atomic_path(os.path.join(directory, ".elmo-tf-write-check")) as probe:
            open(probe, "xb").close()
            raise _Probed
    except _Probed:
        pass
    except OSError as e:
        raise CommandError(f"{output}: cannot write to {directory} ({e.strerror or e})") from None


def check_input_exists(path):
    """Raises ``InputFileError`` for an input that does not exist or is a directory, before
    any work (the reader checks the rest as it reads: a pipe can be read only once)."""
    if not os.path.lexists(path) or (os.path.islink(path) and not os.path.exists(path)):
        raise InputFileError(f"{path}: input file not found")
    if os.path.isdir(path):
        raise InputFileError(f"{path}: input is a directory, expected a text file")


def check_output_prefix(prefix):
    """Raises ``CommandError`` unless the files ``PREFIX-*`` can be written under ``prefix``'s
    directory (made if missing), before any work: a part of its path that is a file, or a
    directory this process cannot write into. A remote prefix (``gs://...``) is its runner's
    to check."""
    if "://" in prefix:
        return
    if prefix.endswith(("/", os.sep)):
        raise CommandError(f"--output {prefix}: names a directory, expected a file prefix")
    directory = os.path.dirname(os.path.abspath(prefix))
    existing = directory
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise CommandError(f"--output {prefix}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CommandError(f"--output {prefix}: cannot write under {existing}")


class _Probed(Exception):
    """Ends the write check without renaming its file into place (it is removed)."""
