"""What an ordinary user gets where the file system says no: an unreadable options or weight
file, an output directory it cannot write, another user's model cache. CI runs as root, which
reads and writes anyway, so each check runs as an unprivileged user (``support.unprivileged``:
a child process that drops to that user's uid; run by an ordinary user, the test itself)."""

import contextlib
import io
import os
import shutil

import pytest
from support.paths import TINY
from support.unprivileged import as_user, shared_directory

from elmo_tf.cli.main import main
from elmo_tf.config import ElmoConfig
from elmo_tf.formats.weight_file import check_file

pytestmark = pytest.mark.permissions


def _cli(argv, env=None):
    """``(status, stderr)`` of ``elmo-tf ARGV`` in this process, ``env`` set first."""
    os.environ.update(env or {})
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main([str(a) for a in argv])
    return status, err.getvalue()


@pytest.fixture
def model_dir():
    """A directory the unprivileged user can read: the tiny model's files and a sentence."""
    directory = shared_directory()
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(TINY / name, os.path.join(directory, name))
    with open(os.path.join(directory, "in.txt"), "w", encoding="utf-8") as f:
        f.write("a b\n")
    for name in os.listdir(directory):
        os.chmod(os.path.join(directory, name), 0o644)
    yield directory
    shutil.rmtree(directory)


def test_an_unreadable_options_file_is_one_line(model_dir):
    path = os.path.join(model_dir, "options.json")
    os.chmod(path, 0o600)  # the test's user's, private
    assert as_user(ElmoConfig.from_file, path) == (
        "raised",
        "OptionsError",
        f"{path}: cannot read options file (Permission denied)",
    )


def test_an_unreadable_weight_file_is_one_line(model_dir):
    path = os.path.join(model_dir, "weights.hdf5")
    config = ElmoConfig.from_file(os.path.join(model_dir, "options.json"))
    os.chmod(path, 0o600)
    assert as_user(check_file, config, path) == (
        "raised",
        "WeightFileError",
        f"{path}: cannot read weight file (Permission denied)",
    )


def test_an_output_directory_that_cannot_be_written_is_refused_before_any_work(model_dir):
    output = os.path.join(model_dir, "out")
    os.mkdir(output)
    os.chmod(output, 0o755)  # the test's user's: others read it, cannot write into it
    files = ["--options", f"{model_dir}/options.json", "--weights", f"{model_dir}/weights.hdf5"]
    status, err = as_user(_cli, ["embed", f"{model_dir}/in.txt", f"{output}/e.hdf5", *files])
    assert (status, err) == (
        1,
        f"elmo-tf embed: error: {output}/e.hdf5: cannot write to {output} (Permission denied)\n",
    )
    assert os.listdir(output) == []


def test_another_users_cache_is_read_only_and_said_so(model_dir, model_mirror):
    """A cache directory another user made (and its entries, private to them): downloading
    into it, listing and removing say so in one line; nothing is written."""
    cache = os.path.join(model_dir, "cache")
    env = {"ELMO_TF_CACHE_DIR": cache, "ELMO_TF_MODEL_BASE_URL": model_mirror.base_url}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        assert _cli(["download", "small"])[0] == 0  # the test's user fills it
    os.chmod(cache, 0o755)
    before = sorted(os.walk(cache))
    status, err = as_user(_cli, ["download", "medium"], env)
    assert status == 1 and err.count("\n") == 1, err
    assert f"the model cache {cache} is read-only (Permission denied)" in err
    status, err = as_user(_cli, ["cache", "remove", "small"], env)
    assert status == 1 and err.count("\n") == 1, err
    assert "(Permission denied)" in err
    status, err = as_user(_cli, ["cache", "list"], env)
    assert (status, err) == (0, "")
    assert sorted(os.walk(cache)) == before
