"""Running a check as an unprivileged user: the permission tests' helper.

CI runs as root, and root reads a ``chmod 000`` file and writes into another user's directory,
so a permission check is only exercised by a process of an ordinary user. ``as_user`` runs a
function in a child forked from the test process with the uid and gid of the user
``ELMO_TESTS_USER`` names (.ci/run makes one; ``nobody`` by default), its supplementary
groups dropped. Forked from a process that holds TensorFlow's threads, the child runs Python
that needs no TensorFlow op (file checks, the cache, the command line's checks before it loads
a model). Run by an ordinary user, the test's own process is unprivileged already: the
function runs there.
"""

import importlib
import os
import pickle
import pwd
import tempfile

USER_VARIABLE = "ELMO_TESTS_USER"


def user():
    """``pwd`` entry of the user the checks run as."""
    return pwd.getpwnam(os.environ.get(USER_VARIABLE) or "nobody")


def shared_directory():
    """A new directory the unprivileged user can enter and read (pytest's own are 0700 and
    root's), owned by this process's user; the caller sets what it holds."""
    directory = tempfile.mkdtemp(prefix="elmo-tf-permissions-")
    os.chmod(directory, 0o755)
    return directory


# What the checks import on first use: imported before the fork, since the unprivileged child
# may not read the interpreter's own files (CI's Python lives under /root, mode 0700).
PRELOAD = (
    "encodings.utf_8_sig",
    "encodings.idna",
    "tqdm",
    "tqdm.auto",
    "h5py",
    "filelock",
    "pooch",
    "requests",
    "elmo_tf.cli.main",
    "elmo_tf.cli.embed",
    "elmo_tf.cli.cache",
    "elmo_tf.cli.download",
    "elmo_tf.presets.transfer",
)


def as_user(function, *args):
    """``function(*args)`` as the unprivileged user: its result, or ``("raised", type name,
    message)`` for an exception it raised."""
    if os.geteuid() != 0:
        return _call(function, args)
    for module in PRELOAD:
        importlib.import_module(module)
    account = user()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges for good, run, report, exit at once
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            os.environ["HOME"] = shared_directory()
            result = _call(function, args)
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which asserts
            result = ("raised", type(e).__name__, str(e))
        with os.fdopen(write, "wb") as out:
            pickle.dump(result, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        data = answer.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and data, f"the unprivileged child failed (status {status})"
    return pickle.loads(data)


def _call(function, args):
    try:
        return function(*args)
    except BaseException as e:  # noqa: BLE001 - the caller asserts on it
        return ("raised", type(e).__name__, str(e))
