"""The errors a user can cause and fix, all under one base class.

Every exception elmo-tf raises for bad input (a file, an option, a name, a request) derives
from ``ElmoError``; the ``elmo-tf`` command catches that one class and prints its message as
one line. Anything else that escapes is a bug and keeps its traceback. The classes also derive
from ``ValueError`` where they did before, so existing ``except ValueError`` code still works.
"""


class ElmoError(Exception):
    """Base of every user-facing elmo-tf error; the message names what was wrong."""


class OptionsError(ElmoError, ValueError):
    """An options.json is unreadable, incomplete or inconsistent."""


class WeightFileError(ElmoError, ValueError):
    """A weight file is missing, unreadable, or does not fit the model."""


class ForeignModelError(ElmoError, ValueError):
    """A model file of another library (ELMoForManyLangs' PyTorch pickles, dictionaries and
    config, an NLPL repository archive) that cannot be read as that library wrote it; nothing
    in it was run."""


class PresetError(ElmoError, ValueError):
    """A preset name or directory that names no usable model."""


class InputFileError(ElmoError, ValueError):
    """A text input file is missing, unreadable or not UTF-8 (the message names file and line)."""


class OutputFileError(ElmoError, OSError):
    """An output file that could not be written (disk full, a size limit, an I/O error); the
    partial file is removed and a previous file under the name is left untouched."""


class ExportError(ElmoError, ValueError):
    """An export target that cannot be written (an existing version, a missing directory)."""


class ModelFileError(ElmoError, ValueError):
    """An exported model file (ONNX) that its runtime cannot load, or that is not an ELMo export."""


class VocabularyError(ElmoError, ValueError):
    """A vocabulary file is missing, unreadable or lacks a required token."""


class CorpusError(ElmoError, ValueError):
    """Training or held-out text is missing, empty or not UTF-8 text."""


class CheckpointError(ElmoError, ValueError):
    """A checkpoint or training directory is missing or incomplete."""


class DistributionError(ElmoError, ValueError):
    """The requested devices cannot be set up."""


class TrainingPlanError(ElmoError, ValueError):
    """Training settings that contradict each other or the run being resumed."""


class ListenError(ElmoError, OSError):
    """A server cannot listen on its address (the port is in use, the host is not local)."""


class DownloadError(ElmoError, OSError):
    """A file could not be downloaded (HTTP error, no network, timeout, a body over its bound,
    full disk); nothing was left in the cache."""


class CacheError(ElmoError, OSError):
    """The model cache cannot be used (read-only, not a directory), or a cached file changed
    since it was downloaded."""
