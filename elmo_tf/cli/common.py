"""What every ``elmo-tf`` subcommand shares: its usage error, and the check of its extra."""

from elmo_tf import extras
from elmo_tf.errors import ElmoError


class CommandError(ElmoError):
    """A command-line usage error found after parsing (flags that contradict each other).

    Only the CLI raises it; the library raises the other ``ElmoError`` classes, which
    ``main`` reports the same way: one line on stderr, exit status 1.
    """


def require_extra(extra):
    """Raises ``MissingExtraError`` (one line naming ``extra`` and its install command) when
    the extra the running command needs is not installed; call it before any work."""
    extras.require(extra, "this command")
