"""Package names imported on first use (PEP 562), for packages whose submodules the command
line needs before TensorFlow: ``__getattr__, __dir__ = lazy_exports(__name__, {name: module})``.
"""

import importlib
import sys


def lazy_exports(package, exports):
    """The ``__getattr__`` and ``__dir__`` of ``package`` that import ``exports``' names
    (``{name: module}``) on first use and keep them."""

    def __getattr__(name):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
