"""The flags that name a model, and the model they name, for every command that takes one
(``embed``, ``export``, ``senses``, ``beam``).

``--model NAME_OR_DIR`` names the bundled model (``sotu``, the default), a published
architecture, an NLPL repository entry (``nlpl:144``, ``efml-en``), a directory holding
``options.json`` and ``weights.hdf5`` or an ELMoForManyLangs model, or an NLPL ``.zip``
archive; ``--options`` with ``--weights`` name official files. ``model_source`` checks the
combination before anything is loaded; ``load_model`` loads it.
"""

import dataclasses
import sys
import warnings

from elmo_tf import checks, precision
from elmo_tf.cli.common import CommandError, check_input_name, check_output_path
from elmo_tf.presets import nlpl, nlpl_entry, published
from elmo_tf.presets.bundled import BUNDLED_MODELS, DEFAULT_MODEL


def cached_urls(name, action):
    """The URLs of the cache entries of ``name`` for ``action`` (``cache remove``): a published
    model's files or an NLPL entry's archive; ``CommandError`` as ``published_model`` says."""
    if nlpl.is_nlpl_name(name):
        return [nlpl_entry(name).url()]
    return list(published_model(name, action, ", or an http(s):// URL").urls())


def published_model(name, action, alternative=""):
    """The ``PublishedModel`` ``name`` for a command that would ``action`` it (``download``,
    ``cache remove``); else ``CommandError`` naming the published models (and
    ``alternative``), with "did you mean", or that the bundled model needs nothing."""
    if (model := published.lookup(name)) is not None:
        return model
    known = ", ".join(published.names())
    if name in BUNDLED_MODELS:
        use = f"nothing to {action} (use it as --model {name}); published models: {known}"
        raise CommandError(f"{name!r} is bundled with the package: {use}")
    unknown = f"unknown model {name!r}; published models: {known}{alternative}"
    raise CommandError(unknown + checks.did_you_mean(name, published.names()))


def add_model_arguments(parser, saved_model=False, onnx=False):
    """Adds ``--model``, ``--options`` and ``--weights`` to ``parser``, and ``--saved-model``
    and ``--onnx`` when the command can run an exported SavedModel or ONNX file."""
    parser.add_argument(
        "--model",
        metavar="NAME_OR_DIR",
        help=f"the bundled model ({DEFAULT_MODEL}, the default), a published model "
        f"({', '.join(published.names())}: downloaded once into the cache), an NLPL entry "
        "(nlpl:144, efml-en, ...: the same), a directory with options.json and weights.hdf5 "
        "or an ELMoForManyLangs model, or an NLPL .zip archive",
    )
    parser.add_argument("--options", metavar="FILE", help="an official options.json")
    parser.add_argument("--weights", metavar="FILE", help="its HDF5 weight file")
    if saved_model:
        parser.add_argument(
            "--saved-model",
            metavar="DIR",
            help="an exported SavedModel (elmo-tf export saved-model DIR; DIR or DIR/N)",
        )
    if onnx:
        parser.add_argument(
            "--onnx",
            metavar="MODEL.onnx",
            help="run an ONNX export (elmo-tf export onnx; float32 or int8) in ONNX Runtime, "
            "without TensorFlow, instead of a model the other flags name (the [onnx] extra)",
        )


def add_precision_argument(parser, choices, help, default=precision.DEFAULT_PRECISION):
    """Adds ``--precision`` (one of ``choices``, a subset of ``elmo_tf.precision.PRECISIONS``;
    default float32) to ``parser``."""
    parser.add_argument("--precision", choices=choices, default=default, help=help)


def check_in_process_precision(value):
    """The early check of a ``--precision`` for a model this process runs (``embed``,
    ``senses``): ``int8`` is refused before TensorFlow starts (it runs through an export); the
    CPU's check of ``bfloat16`` is the model's own, when it loads (``ELMo(precision=...)``)."""
    try:
        precision.dtype_policy(value)
    except precision.PrecisionError as e:
        raise CommandError(f"--precision {value}: {e}") from None


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """What the flags name: exactly one of ``model``, ``options`` with ``weights``,
    ``saved_model`` and ``onnx`` is set."""

    model: str | None = None
    options: str | None = None
    weights: str | None = None
    saved_model: str | None = None
    onnx: str | None = None

    def describe(self):
        return self.onnx or self.saved_model or self.weights or self.model


def model_source(args):
    """The ``ModelSource`` of the flags; ``CommandError`` for a combination that names none or
    several models. With no flag: the bundled model."""
    options, weights = args.options, args.weights
    saved_model = getattr(args, "saved_model", None)
    onnx = getattr(args, "onnx", None)
    if options is None and weights is not None:
        raise CommandError("--weights was given without --options; pass both")
    if weights is None and options is not None:
        raise CommandError("--options was given without --weights; pass both")
    given = [
        flag
        for flag, value in (
            ("--model", args.model),
            ("--options", options),
            ("--saved-model", saved_model),
            ("--onnx", onnx),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise CommandError(f"pass one of {', '.join(given)}, not several")
    if options is not None:
        return ModelSource(options=options, weights=weights)
    if saved_model is not None:
        return ModelSource(saved_model=saved_model)
    if onnx is not None:
        return ModelSource(onnx=onnx)
    return ModelSource(model=DEFAULT_MODEL if args.model is None else args.model)


def check_model(args):
    """Checks, without TensorFlow, the model the flags name: a name or directory that names a
    model, official files that exist and parse (the options), and says on stderr which is
    meant when a name is also a directory here. Returns the paths the model is read from (a
    command's outputs must not replace them)."""
    # lazy: after the flags' own checks, and none of them imports TensorFlow
    from elmo_tf import presets
    from elmo_tf.config import ElmoConfig
    from elmo_tf.errors import WeightFileError
    from elmo_tf.formats import weight_file
    from elmo_tf.presets import cache_entries
    from elmo_tf.system import untrusted_files, urls

    source = model_source(args)
    for flag, value, what in (
        ("--model", source.model, "model"),
        ("--options", source.options, "file"),
        ("--weights", source.weights, "file"),
        ("--saved-model", source.saved_model, "directory"),
    ):
        if value is not None:
            check_input_name(value, flag, what=what)
    if source.saved_model is not None:
        return []
    if source.options is not None:
        given = (source.options, source.weights)
        paths = [cache_entries.entry_path(p) if urls.is_url(p) else p for p in given]
        config = None if urls.is_url(source.options) else ElmoConfig.from_file(source.options)
        if not urls.is_url(source.weights):
            untrusted_files.check_readable(source.weights, "weight file", WeightFileError)
            if config is not None:  # the file's layout against the options, no values read
                weight_file.check_structure(config, source.weights)
        return paths
    if directory := presets.shadowed_directory(source.model):
        print(
            f"elmo-tf: --model {source.model} is the {source.model} model; the directory of "
            f"the same name here is --model {directory}",
            file=sys.stderr,
        )
    return list(presets.local_paths(source.model))


def check_model_and_output(args, output, kind, label, inputs=()):
    """The one check a command that writes a file from a model makes before TensorFlow: the
    model the flags name (``check_model``), and an ``output`` (``kind`` names what it should
    be, ``label`` the argument) that can be written and is none of the files read: the
    model's (its cache entries too, links followed) and the command's other ``inputs``
    (``common.check_output_path``). Returns the model's files."""
    model_files = check_model(args)
    check_output_path(output, [*inputs, *model_files], kind, label)
    return model_files


def load_model(args, step=None, **kwargs):
    """The ``ELMo`` that the flags name; ``kwargs`` go to ``ELMo``.

    With ``step`` (a prefix such as ``"[1/2] "``), says on stderr what it loads.
    """
    source = model_source(args)
    # lazy: the command line starts without TensorFlow
    from elmo_tf.models import ELMo, load_pretrained
    from elmo_tf.presets import PresetNameWarning

    if step is not None:
        print(f"{step}loading {source.describe()}", file=sys.stderr, flush=True)
    if source.options is not None:
        return load_pretrained(source.options, source.weights, **kwargs)
    with warnings.catch_warnings():  # check_model has said it
        warnings.simplefilter("ignore", PresetNameWarning)
        return ELMo.from_preset(source.model, **kwargs)
