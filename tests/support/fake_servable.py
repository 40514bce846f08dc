"""A stand-in for a loaded SavedModel version, for the model manager's version rules (as
KServe's tests drive their model server with a dummy model): loading is reading a file, so a
test can copy, remove and break hundreds of versions in the time one SavedModel loads."""

import os
import threading

FAKE_MODEL = "saved_model.pb"  # what the manager looks for in a version directory


def make_version(base, name, content="fake"):
    """A version directory ``base/name`` the manager lists (it holds a ``saved_model.pb``);
    ``content`` "broken" makes it fail to load."""
    directory = os.path.join(base, name)
    os.makedirs(directory)
    with open(os.path.join(directory, FAKE_MODEL), "w") as f:
        f.write(content)
    return directory


class FakeServable:
    """Loads ``path`` as a ``Servable`` would (``ModelManager(load=FakeServable)``): fails
    as a version without its variables does when ``saved_model.pb`` says "broken"."""

    def __init__(self, name, version, path, batching=None):
        with open(os.path.join(path, FAKE_MODEL)) as f:
            if f.read() == "broken":
                raise ValueError(f"{path}/variables: no variables to restore")
        self.name, self.version, self.path = name, version, path
        self.users = 0
        self.unloaded = threading.Event()

    def warm_up(self, limits=None):
        return 0

    def acquire(self):
        self.users += 1

    def release(self):
        self.users -= 1

    def unload(self, timeout=None):
        self.unloaded.set()
