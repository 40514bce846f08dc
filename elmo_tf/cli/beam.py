"""``elmo-tf beam`` and ``python -m elmo_tf.beam``: the Beam job of ``elmo_tf.beam.pipeline``.

::

    python -m elmo_tf.beam --input 'corpus/*.txt' --output out/elmo \\
        [--model NAME_OR_DIR | --options F --weights F | --saved-model DIR | --onnx F] \\
        [--layers all|top|average] [--format parquet|tfrecord] [Beam pipeline options]

Besides its own flags the job takes any Beam pipeline option (``--runner``, ``--project``,
...), so its parser keeps the arguments it does not know for ``PipelineOptions``; ``elmo-tf
beam`` passes everything after ``beam`` to it unparsed. Without ``--runner`` the job runs on
this machine with ``FnApiRunner`` in ``multi_processing`` mode, one worker process per core
(``--direct_num_workers`` to change it). Beam's own log lines are hidden unless
``--verbose`` is given; the job's summary line always prints. Needs the ``[beam]`` extra.
"""

import argparse
import contextlib
import logging
import os
import shutil
import sys

from elmo_tf import beam, checks
from elmo_tf.beam.local_inputs import check_local_inputs
from elmo_tf.cli.common import CommandError, check_input_name, check_output_prefix, require_extra
from elmo_tf.cli.model_flags import add_model_arguments, model_source
from elmo_tf.errors import InputFileError
from elmo_tf.models.length_batches import DEFAULT_MAX_BATCH_TOKENS
from elmo_tf.system import extras, native_logs
from elmo_tf.tokens import text_lines

LAYER_CHOICES = ("all", "top", "average")  # elmo_tf.formats.embedding_file's, without TensorFlow
# Output shards at most: each is a file, and Beam opens a writer per shard.
MAX_NUM_SHARDS = 10_000
# Local worker processes (--direct_num_workers) at most, per core: each imports TensorFlow and
# loads the model, and more than the cores only share them.
MAX_LOCAL_WORKERS_PER_CORE = 4


def add_parser(subparsers):
    # prefix_chars="+": no argument is an option of this parser, so "--input ..." and every
    # Beam option reach the job's own parser (build_parser) through the REMAINDER positional.
    parser = subparsers.add_parser(
        "beam",
        help="embed a whole corpus on Apache Beam (Parquet or TFRecord; 'elmo-tf beam --help')",
        description="Run python -m elmo_tf.beam with the arguments that follow.",
        prefix_chars="+",
        add_help=False,
    )
    parser.add_argument("beam_args", nargs=argparse.REMAINDER, metavar="ARGS")
    return parser


def run(args):
    try:
        run_job(args.beam_args)
    except SystemExit as e:  # --help or a usage error; argparse has printed it
        return e.code if isinstance(e.code, int) else 0
    return 0


def verbose(argv):
    """Whether the job's arguments ask for ``--verbose`` (before they are parsed)."""
    return "--verbose" in argv


def build_parser(prog="elmo-tf beam"):
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Embed every line of the files matching --input with ELMo on Apache Beam and "
            "write one record per line (Parquet or TFRecord shards under --output); "
            "undecodable or over-long lines go to PREFIX-dead-letters-*.jsonl. Other "
            "arguments are Beam pipeline options (--runner, --direct_num_workers, ...)."
        ),
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="GLOB",
        help="input files (any Beam filesystem: local, gs://, ...); repeat for several",
    )
    parser.add_argument("--output", required=True, metavar="PREFIX", help="output file prefix")
    add_model_arguments(parser, saved_model=True, onnx=True)
    parser.add_argument(
        "--signature",
        choices=beam.SIGNATURES,
        default="tokens",
        help="the SavedModel signature to run (default tokens)",
    )
    parser.add_argument(
        "--layers",
        choices=LAYER_CHOICES,
        default="all",
        help="all: (L + 1, n, 2P); top, average: (n, 2P) (default all, as elmo-tf embed)",
    )
    parser.add_argument("--format", choices=beam.FORMATS, default="parquet", dest="file_format")
    parser.add_argument(
        "--num-shards",
        type=int,
        default=0,
        metavar="N",
        help=f"output shards, at most {MAX_NUM_SHARDS:,} (default 0: the runner decides)",
    )
    parser.add_argument(
        "--max-tokens-per-line",
        type=int,
        default=text_lines.MAX_TOKENS_PER_LINE,
        metavar="N",
        help="longer lines go to the dead letters "
        f"(default {text_lines.MAX_TOKENS_PER_LINE:,}, as elmo-tf embed)",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=int,
        default=text_lines.DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help="longer lines go to the dead letters, read no further "
        f"(default {text_lines.DEFAULT_MAX_LINE_BYTES:,})",
    )
    for flag, default, what in (
        ("--min-batch-size", beam.DEFAULT_MIN_BATCH_SIZE, "least sentences per Beam batch"),
        ("--max-batch-size", beam.DEFAULT_MAX_BATCH_SIZE, "most sentences per Beam batch"),
        ("--inner-batch-size", beam.DEFAULT_INNER_BATCH_SIZE, "sentences per model call"),
    ):
        parser.add_argument(
            flag, type=int, default=default, metavar="N", help=f"{what} (default {default})"
        )
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=DEFAULT_MAX_BATCH_TOKENS,
        metavar="N",
        help="padded tokens per model call, rows x its longest sentence "
        f"(default {DEFAULT_MAX_BATCH_TOKENS}; 0: no budget)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show Beam's and TensorFlow's own log messages",
    )
    return parser


def check_flags(args):
    """``CommandError`` for flag values out of range or contradicting each other."""
    for name in ("max_tokens_per_line", "max_line_bytes", "min_batch_size", "max_batch_size",
                 "inner_batch_size"):  # fmt: skip
        if getattr(args, name) < 1:
            raise CommandError(f"{_flag(name)} must be at least 1, got {getattr(args, name)}")
    if args.max_batch_tokens < 0:
        raise CommandError(f"--max-batch-tokens must be 0 or more, got {args.max_batch_tokens}")
    checks.integer("--num-shards", args.num_shards, 0, MAX_NUM_SHARDS, error=CommandError)
    if args.min_batch_size > args.max_batch_size:
        raise CommandError("--min-batch-size is larger than --max-batch-size")
    for pattern in args.input:
        check_input_name(pattern, "--input")
    source = model_source(args)
    model_files = []
    for flag, path in (
        ("--options", source.options),
        ("--weights", source.weights),
        ("--onnx", source.onnx),
    ):
        if path is not None:
            check_input_name(path, flag)
            if "://" not in path and not os.path.isfile(path):
                raise InputFileError(f"{path}: file not found")
            model_files.append(path)
    if source.model is not None and os.path.isdir(source.model):  # a model directory's files
        model_files += [os.path.join(source.model, name) for name in os.listdir(source.model)]
    matches = check_local_inputs(args.input)  # before Beam and TensorFlow start
    # No file the job reads may be named as its outputs are: it would read an earlier job's
    # records as text, or replace its own input.
    check_output_prefix(args.output, [*matches, *model_files])
    return source


def check_local_workers(options):
    """``CommandError`` for a ``--direct_num_workers`` (local runs) outside 0 (one per core)
    to ``MAX_LOCAL_WORKERS_PER_CORE`` per core, before any worker starts."""
    from apache_beam.options.pipeline_options import DirectOptions  # lazy: the [beam] extra

    cores = os.cpu_count() or 1
    maximum = MAX_LOCAL_WORKERS_PER_CORE * cores
    workers = options.view_as(DirectOptions).direct_num_workers
    checks.integer(
        f"--direct_num_workers (0: one per core; at most {MAX_LOCAL_WORKERS_PER_CORE} per core, "
        f"{cores} here)",
        workers,
        0,
        maximum,
        error=CommandError,
    )


def make_pipeline(options):
    """The ``apache_beam.Pipeline`` of ``options``; a ``--runner`` that names no runner (or one
    whose extra is missing) is ``CommandError`` in Beam's words, before any work."""
    # lazy: the [beam] extra
    import apache_beam
    from apache_beam.options.pipeline_options import StandardOptions

    try:
        return apache_beam.Pipeline(options=options)
    except (ValueError, ImportError, AttributeError) as e:
        runner = options.view_as(StandardOptions).runner
        raise CommandError(f"--runner {runner}: {' '.join(str(e).split())}") from None


def model_handler(args, source):
    """The handler that the model flags name, checked before the job starts."""
    # lazy: the [beam] extra and TensorFlow, after the flags are checked
    from elmo_tf import presets
    from elmo_tf.beam.model_handler import ElmoModelHandler
    from elmo_tf.beam.saved_model_handler import ElmoSavedModelHandler, resolve_version

    batching = {
        "layers": args.layers,
        "inner_batch_size": args.inner_batch_size,
        "max_batch_tokens": args.max_batch_tokens,
        "min_batch_size": args.min_batch_size,
        "max_batch_size": args.max_batch_size,
    }
    if source.onnx is not None:
        return _onnx_handler(source.onnx, batching)
    if source.saved_model is not None:
        if "://" not in source.saved_model:
            resolve_version(source.saved_model)  # fails here, not on every worker
        return ElmoSavedModelHandler(source.saved_model, signature=args.signature, **batching)
    if source.options is not None:
        return ElmoModelHandler(options_file=source.options, weight_file=source.weights, **batching)
    if "://" not in source.model:
        presets.preset_files(source.model, download=False)  # a name or directory that exists
    return ElmoModelHandler(source.model, **batching)


def _onnx_handler(path, batching):
    """The handler of ``--onnx``: a local file is loaded here once, as each worker will load
    it, so that a file ONNX Runtime or the contract check refuses fails the command in one
    line before the job starts (``embed --onnx``'s check)."""
    extras.require("onnx", "elmo-tf beam --onnx", modules=("onnxruntime",))
    # lazy: the [beam] and [onnx] extras, after the flags are checked
    from elmo_tf.beam.onnx_model_handler import ElmoOnnxModelHandler
    from elmo_tf.export.onnx import OnnxModel

    if "://" not in path:
        OnnxModel(path)
    return ElmoOnnxModelHandler(path, **batching)


def pipeline_options(beam_args, verbose=False):
    """``PipelineOptions`` of ``beam_args``; with no ``--runner``, all local cores; the
    workers log below ERROR only when ``verbose``."""
    from apache_beam.options.pipeline_options import PipelineOptions  # lazy: the [beam] extra

    if not any(a.startswith("--default_sdk_harness_log_level") for a in beam_args):
        beam_args = [
            *beam_args,
            f"--default_sdk_harness_log_level={'INFO' if verbose else 'ERROR'}",
        ]
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = ["--runner=FnApiRunner", "--direct_running_mode=multi_processing", *beam_args]
        if not any(a.startswith("--direct_num_workers") for a in beam_args):
            beam_args.append("--direct_num_workers=0")  # one worker per core
    return PipelineOptions(beam_args)


def check_beam_arguments(beam_args, options, own_flags):
    """``CommandError`` for an argument that is neither this command's (``own_flags``) nor
    one of Beam's pipeline options: Beam would drop it with a warning, and a misspelt flag
    would go unnoticed."""
    for before, arg in zip([None, *beam_args], beam_args):
        a_value = before is not None and before.startswith("--") and "=" not in before
        if not arg.startswith("-") and not a_value:
            raise CommandError(f"unexpected argument {arg!r}")
        if arg.startswith("-") and not arg.startswith("--") and not a_value:
            raise CommandError(f"unknown option {arg}: Beam's pipeline options take two dashes")
    known = set(options.get_all_options(drop_default=False, retain_unknown_options=False))
    given = set(options.get_all_options(drop_default=False, retain_unknown_options=True))
    if unknown := sorted(given - known):
        flags = [a.split("=")[0] for a in beam_args if a.startswith("--")]
        flag = next((f for f in flags if f[2:].replace("-", "_") == unknown[0]), unknown[0])
        candidates = [*own_flags, *(f"--{name}" for name in sorted(known))]
        raise CommandError(
            f"unknown option {flag}: neither this command's (see --help) nor an Apache Beam "
            f"pipeline option{checks.did_you_mean(flag, candidates)}"
        )


# A log line of Beam's Python logging (the launcher's or a worker process's) below ERROR.
BEAM_LOG_LINE = rb"^(DEBUG|INFO|WARNING):(root|__main__|apache_beam[\w.]*|absl):"


@contextlib.contextmanager
def quiet_beam_logs(verbose):
    """Beam's INFO and WARNING lines (its own, its workers', apitools') hidden unless
    ``verbose``; errors still show. The worker processes write to the command's stderr,
    where ``elmo-tf``'s filter (``native_logs``) drops their lines."""
    if verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        yield
        return
    with native_logs.also_drop(BEAM_LOG_LINE), _quiet_root_logger():
        yield


@contextlib.contextmanager
def _quiet_root_logger():
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    root.setLevel(logging.ERROR)
    if not root.handlers:  # Beam's import would otherwise install a WARNING handler
        root.addHandler(logging.NullHandler())
    previous = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the workers inherit it
    try:
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers
        if previous is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)


def run_job(argv=None, prog="elmo-tf beam"):
    """Runs the job of ``argv``; returns the ``summary`` counts."""
    parser = build_parser(prog)
    args, beam_args = parser.parse_known_args(argv)
    require_extra("beam")
    source = check_flags(args)
    with quiet_beam_logs(args.verbose):
        from elmo_tf.beam import pipeline  # lazy: the [beam] extra

        options = pipeline_options(beam_args, args.verbose)
        own_flags = [s for a in parser._actions for s in a.option_strings]
        check_beam_arguments(beam_args, options, own_flags)
        check_local_workers(options)
        job = make_pipeline(options)
        pipeline.check_inputs(args.input)
        handler = model_handler(args, source)
        pipeline.build_pipeline(
            job,
            handler,
            args.input,
            args.output,
            file_format=args.file_format,
            num_shards=args.num_shards,
            max_tokens_per_line=args.max_tokens_per_line,
            max_line_bytes=args.max_line_bytes,
        )
        before = pipeline.output_shards(args.output, args.file_format)
        with _no_temporaries_left(args.output):
            result = job.run()
            result.wait_until_finish()
        counts = pipeline.summary(result)
        stale = pipeline.remove_stale_shards(args.output, args.file_format, before)
    if stale:
        print(
            f"elmo_tf.beam: removed {len(stale):,} shards of an earlier job under the same "
            f"output that this job did not replace ({stale[0]}, ...)",
            flush=True,
        )
    print(
        f"elmo_tf.beam: embedded {counts['embedded_lines']:,} lines "
        f"({counts['embedded_tokens']:,} tokens) to {args.output}-*.{args.file_format}; "
        f"{counts['dead_letters']:,} dead letters in "
        f"{pipeline.dead_letter_prefix(args.output)}-*.jsonl",
        flush=True,
    )
    return counts


@contextlib.contextmanager
def _no_temporaries_left(output):
    """A job that fails leaves no ``beam-temp-*`` directory of its own beside its output
    (Beam's file sinks write there first and remove it only on success)."""
    directory = os.path.dirname(os.path.abspath(output)) if "://" not in output else None
    before = set(_temporaries(directory))
    try:
        yield
    except BaseException:
        for path in set(_temporaries(directory)) - before:
            shutil.rmtree(path, ignore_errors=True)
        raise


def _temporaries(directory):
    if directory is None or not os.path.isdir(directory):
        return []
    return [os.path.join(directory, n) for n in os.listdir(directory) if n.startswith("beam-temp-")]


def _flag(name):
    return "--" + name.replace("_", "-")
