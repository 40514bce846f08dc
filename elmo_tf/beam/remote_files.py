"""Model files on a Beam filesystem (``gs://``...), copied to local disk where a worker loads
them: ``is_remote``, ``join`` and ``local_copies``. ``http(s)://`` URLs are not remote here:
they go through the model cache (``elmo_tf.presets.cache``)."""

import os
import shutil
import tempfile

from apache_beam.io.filesystems import FileSystems

from elmo_tf.system import urls


def is_remote(path):
    """A path on a Beam filesystem (``gs://``...), not an ``http(s)://`` URL."""
    return "://" in path and not urls.is_url(path)


def join(directory, name):
    return FileSystems.join(directory, name)


class local_copies:
    """Context: local paths of ``paths``; remote ones are copied to a temporary directory,
    removed on exit."""

    def __init__(self, paths):
        self.paths = [os.fspath(p) for p in paths]
        self.tmp = None

    def __enter__(self):
        if not any(is_remote(p) for p in self.paths):
            return self.paths
        self.tmp = tempfile.mkdtemp(prefix="elmo_tf_model_")
        local = []
        for path in self.paths:
            if not is_remote(path):
                local.append(path)
                continue
            target = os.path.join(self.tmp, FileSystems.split(path)[1])
            with FileSystems.open(path) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            local.append(target)
        return local

    def __exit__(self, *exc):
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
