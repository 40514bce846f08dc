"""``python -m elmo_tf.beam``: ELMo vectors of every line of a corpus, on any Beam runner.

::

    python -m elmo_tf.beam --input 'corpus/*.txt' --output out/elmo \\
        [--model NAME_OR_DIR | --options F --weights F | --saved-model DIR] \\
        [--layers all|top|average] [--format parquet|tfrecord] [Beam pipeline options]

Every line of every file the ``--input`` globs match (UTF-8, one whitespace-tokenised
sentence a line, as ``elmo-tf embed`` reads them; ``.gz`` and ``.bz2`` files are
decompressed) gives exactly one record keyed by ``source`` (the path as matched) and ``line``
(its 0-based number), blank lines included (``n = 0`` tokens); the record layout is in
``elmo_tf.beam.records``. Records go to ``PREFIX-SSSSS-of-NNNNN.parquet`` (or ``.tfrecord``) in
no particular order. A line that cannot be embedded goes to
``PREFIX-dead-letters-SSSSS-of-NNNNN.jsonl`` with its reason instead of failing the job:

- not valid UTF-8, or holding a NUL byte (``elmo-tf embed`` stops on these);
- more than ``--max-tokens-per-line`` tokens (default ``DEFAULT_MAX_TOKENS_PER_LINE``): one
  such line would make its whole batch that long and its record that large.

Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` and a leading byte-order mark is dropped, as in
``elmo_tf.files.read_text_lines``, so line numbers are those ``elmo-tf embed`` uses.

The graph: ``MatchAll | ReadMatches | FlatMap(numbered lines) | Reshuffle`` (a file is read
by one worker, its lines then spread over all), ``DecodeLine`` (dead letters to a side
output), ``RunInference(KeyedModelHandler(ElmoModelHandler or ElmoSavedModelHandler))``,
then the writer. Beam metrics in the ``elmo_tf`` namespace count ``embedded_lines``,
``embedded_tokens`` and ``dead_letters``; the command prints them when the job ends.

Without ``--runner`` the job runs on this machine with ``FnApiRunner`` in
``multi_processing`` mode, one worker process per core (``--direct_num_workers`` to change
it); any other Beam option (``--runner=DataflowRunner --project ...``) passes through to
``PipelineOptions``. docs/beam.md shows Dataflow, Flink and Spark runs.
"""

import argparse
import codecs
import os
import sys

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from elmo_tf.batching import DEFAULT_MAX_BATCH_TOKENS
from elmo_tf.beam import records
from elmo_tf.beam.model_handler import (
    DEFAULT_INNER_BATCH_SIZE,
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MIN_BATCH_SIZE,
    ElmoModelHandler,
)
from elmo_tf.beam.saved_model_handler import SIGNATURES, ElmoSavedModelHandler
from elmo_tf.embedding_file import LAYER_CHOICES
from elmo_tf.errors import ElmoError, InputFileError
from elmo_tf.presets import add_model_arguments

FORMATS = ("parquet", "tfrecord")
DEFAULT_MAX_TOKENS_PER_LINE = 1000
METRICS_NAMESPACE = "elmo_tf"
DEAD_LETTERS = "dead_letters"
# Bytes read from an input file at a time.
READ_CHUNK = 1 << 20


class BeamCommandError(ElmoError):
    """Arguments of ``python -m elmo_tf.beam`` that contradict each other or name nothing."""


def numbered_lines(readable_file, chunk_size=READ_CHUNK):
    """Yields ``(source, line_number, bytes)`` for each line of a ``fileio.ReadableFile``.

    Streams the file in ``chunk_size`` pieces (a file never has to fit in memory) and splits
    it where ``bytes.splitlines`` does, a ``\\r\\n`` across two pieces included.
    """
    source = readable_file.metadata.path
    number = 0
    pending = b""
    first = True
    with readable_file.open() as f:
        while True:
            chunk = f.read(chunk_size)
            if not chunk:
                break
            data = pending + chunk
            if first:
                if len(data) < len(codecs.BOM_UTF8) and codecs.BOM_UTF8.startswith(data):
                    pending = data  # maybe a byte-order mark split across reads
                    continue
                first = False
                if data.startswith(codecs.BOM_UTF8):
                    data = data[len(codecs.BOM_UTF8) :]
            lines = data.splitlines(keepends=True)
            # The last piece is incomplete unless it ends in "\n": a "\r" may be half of "\r\n".
            pending = b"" if not lines or lines[-1].endswith(b"\n") else lines.pop()
            for line in lines:
                yield source, number, line.rstrip(b"\r\n")
                number += 1
    if pending:
        yield source, number, pending.rstrip(b"\r\n")


class DecodeLine(beam.DoFn):
    """``(source, number, bytes)`` -> ``((source, number), tokens)``, or a dead letter.

    Dead letters (JSON lines, ``records.dead_letter``) go to the ``DEAD_LETTERS`` output.
    """

    def __init__(self, max_tokens_per_line=DEFAULT_MAX_TOKENS_PER_LINE):
        self.max_tokens_per_line = max_tokens_per_line
        self.dead_letters = Metrics.counter(METRICS_NAMESPACE, "dead_letters")

    def process(self, element):
        source, number, data = element
        reason = None
        nul = data.find(b"\0")
        if nul >= 0:
            reason = f"NUL byte at byte {nul + 1} of the line; expected UTF-8 text"
        else:
            try:
                tokens = data.decode("utf-8").split()
            except UnicodeDecodeError as e:
                reason = f"not valid UTF-8 (byte 0x{data[e.start]:02x} at byte {e.start + 1})"
            else:
                if len(tokens) > self.max_tokens_per_line:
                    reason = (
                        f"{len(tokens)} tokens, more than --max-tokens-per-line "
                        f"{self.max_tokens_per_line}"
                    )
        if reason is not None:
            self.dead_letters.inc()
            letter = records.dead_letter(source, number, reason)
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
            return
        yield (source, number), tokens


class ToRecord(beam.DoFn):
    """``((source, line), PredictionResult)`` -> a line record; counts lines and tokens."""

    def __init__(self):
        self.lines = Metrics.counter(METRICS_NAMESPACE, "embedded_lines")
        self.tokens = Metrics.counter(METRICS_NAMESPACE, "embedded_tokens")

    def process(self, element):
        (source, line), prediction = element
        self.lines.inc()
        self.tokens.inc(len(prediction.example))
        yield records.line_record(source, line, prediction.example, prediction.inference)


class EmbedFiles(beam.PTransform):
    """File patterns -> ``{"records": line records, "dead_letters": JSON lines}``.

    Args:
        model_handler: an unkeyed ``ElmoModelHandler`` or ``ElmoSavedModelHandler`` whose
            ``layers`` is set (each prediction one array).
        max_tokens_per_line: longer lines become dead letters.
    """

    def __init__(self, model_handler, max_tokens_per_line=DEFAULT_MAX_TOKENS_PER_LINE):
        super().__init__()
        if getattr(model_handler, "layers", None) is None:
            raise ValueError("EmbedFiles needs a model handler with layers set")
        self.model_handler = model_handler
        self.max_tokens_per_line = max_tokens_per_line

    def expand(self, patterns):
        lines = (
            patterns
            | "MatchAll" >> fileio.MatchAll()
            | "ReadMatches" >> fileio.ReadMatches()
            | "NumberedLines" >> beam.FlatMap(numbered_lines)
            | "SpreadLines" >> beam.Reshuffle()
        )
        decoded = lines | "DecodeLine" >> beam.ParDo(
            DecodeLine(self.max_tokens_per_line)
        ).with_outputs(DEAD_LETTERS, main="tokens")
        embedded = (
            decoded.tokens
            | "RunInference" >> RunInference(KeyedModelHandler(self.model_handler))
            | "ToRecord" >> beam.ParDo(ToRecord())
        )
        return {"records": embedded, "dead_letters": decoded[DEAD_LETTERS]}


class WriteRecords(beam.PTransform):
    """Writes line records as sharded ``PREFIX-SSSSS-of-NNNNN.parquet`` or ``.tfrecord``."""

    def __init__(self, prefix, file_format="parquet", num_shards=0):
        super().__init__()
        if file_format not in FORMATS:
            raise ValueError(f"file_format must be one of {FORMATS}, got {file_format!r}")
        self.prefix = prefix
        self.file_format = file_format
        self.num_shards = num_shards

    def expand(self, lines):
        if self.file_format == "parquet":
            return (
                lines
                | "ParquetRow" >> beam.Map(records.parquet_row)
                | "WriteParquet"
                >> beam.io.WriteToParquet(
                    self.prefix,
                    records.parquet_schema(),
                    file_name_suffix=".parquet",
                    num_shards=self.num_shards,
                )
            )
        return (
            lines
            | "TFExample" >> beam.Map(records.tf_example)
            | "WriteTFRecord"
            >> beam.io.WriteToTFRecord(
                self.prefix, file_name_suffix=".tfrecord", num_shards=self.num_shards
            )
        )


def dead_letter_prefix(prefix):
    return f"{prefix}-dead-letters"


def build_parser(prog="python -m elmo_tf.beam"):
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
    add_model_arguments(parser)
    parser.add_argument(
        "--saved-model",
        metavar="DIR",
        help="an exported SavedModel (elmo-tf export saved-model DIR; DIR or DIR/N)",
    )
    parser.add_argument(
        "--signature",
        choices=SIGNATURES,
        default="tokens",
        help="the SavedModel signature to run (default tokens)",
    )
    parser.add_argument(
        "--layers",
        choices=LAYER_CHOICES,
        default="all",
        help="all: (L + 1, n, 2P); top, average: (n, 2P) (default all, as elmo-tf embed)",
    )
    parser.add_argument("--format", choices=FORMATS, default="parquet", dest="file_format")
    parser.add_argument(
        "--num-shards",
        type=int,
        default=0,
        metavar="N",
        help="output shards (default 0: the runner decides)",
    )
    parser.add_argument(
        "--max-tokens-per-line",
        type=int,
        default=DEFAULT_MAX_TOKENS_PER_LINE,
        metavar="N",
        help=f"longer lines go to the dead letters (default {DEFAULT_MAX_TOKENS_PER_LINE})",
    )
    parser.add_argument(
        "--min-batch-size",
        type=int,
        default=DEFAULT_MIN_BATCH_SIZE,
        metavar="N",
        help=f"least sentences per Beam batch (default {DEFAULT_MIN_BATCH_SIZE})",
    )
    parser.add_argument(
        "--max-batch-size",
        type=int,
        default=DEFAULT_MAX_BATCH_SIZE,
        metavar="N",
        help=f"most sentences per Beam batch (default {DEFAULT_MAX_BATCH_SIZE})",
    )
    parser.add_argument(
        "--inner-batch-size",
        type=int,
        default=DEFAULT_INNER_BATCH_SIZE,
        metavar="N",
        help=f"sentences per model call (default {DEFAULT_INNER_BATCH_SIZE})",
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=DEFAULT_MAX_BATCH_TOKENS,
        metavar="N",
        help="padded tokens per model call, rows x its longest sentence "
        f"(default {DEFAULT_MAX_BATCH_TOKENS}; 0: no budget)",
    )
    return parser


def model_handler(args):
    """The handler that ``build_parser``'s model flags name, checked before the job starts."""
    from elmo_tf import presets

    batching = {
        "layers": args.layers,
        "inner_batch_size": args.inner_batch_size,
        "max_batch_tokens": args.max_batch_tokens,
        "min_batch_size": args.min_batch_size,
        "max_batch_size": args.max_batch_size,
    }
    positive = ("min_batch_size", "max_batch_size", "inner_batch_size")
    for name in ("max_tokens_per_line", *positive):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise BeamCommandError(f"{flag} must be at least 1, got {getattr(args, name)}")
    if args.max_batch_tokens < 0:
        raise BeamCommandError(
            f"--max-batch-tokens must be 0 (no budget) or more, got {args.max_batch_tokens}"
        )
    if args.min_batch_size > args.max_batch_size:
        raise BeamCommandError("--min-batch-size is larger than --max-batch-size")
    if (args.options is None) != (args.weights is None):
        raise BeamCommandError("pass --options and --weights together")
    given = [args.model is not None, args.options is not None, args.saved_model is not None]
    if sum(given) > 1:
        raise BeamCommandError("pass one of --model, --options with --weights, --saved-model")
    if args.saved_model is not None:
        if "://" not in args.saved_model:
            from elmo_tf.beam.saved_model_handler import resolve_version

            resolve_version(args.saved_model)  # fails here, not on every worker
        return ElmoSavedModelHandler(args.saved_model, signature=args.signature, **batching)
    if args.options is not None:
        for path in (args.options, args.weights):
            if "://" not in path and not os.path.isfile(path):
                raise InputFileError(f"{path}: file not found")
        return ElmoModelHandler(options_file=args.options, weight_file=args.weights, **batching)
    model = args.model or "default"
    if "://" not in model:
        if presets.preset_files(model) is None:
            raise BeamCommandError(f"{model!r} is an architecture without bundled weights")
    return ElmoModelHandler(model, **batching)


def check_inputs(patterns):
    """Raises ``InputFileError`` for a pattern that matches no file (before the job starts)."""
    from apache_beam.io.filesystems import FileSystems

    for pattern, result in zip(patterns, FileSystems.match(patterns)):
        if not result.metadata_list:
            raise InputFileError(f"{pattern}: no input file matches")


def pipeline_options(beam_args):
    """``PipelineOptions`` of ``beam_args``; with no ``--runner``, all local cores."""
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = ["--runner=FnApiRunner", "--direct_running_mode=multi_processing", *beam_args]
        if not any(a.startswith("--direct_num_workers") for a in beam_args):
            beam_args.append("--direct_num_workers=0")  # one worker per core
    return PipelineOptions(beam_args)


def build_pipeline(pipeline, args):
    """Adds the whole job to ``pipeline``: read, embed, write records and dead letters."""
    handler = model_handler(args)
    outputs = (
        pipeline
        | "Patterns" >> beam.Create(args.input)
        | "EmbedFiles" >> EmbedFiles(handler, args.max_tokens_per_line)
    )
    outputs["records"] | "WriteRecords" >> WriteRecords(
        args.output, args.file_format, args.num_shards
    )
    outputs["dead_letters"] | "WriteDeadLetters" >> beam.io.WriteToText(
        dead_letter_prefix(args.output), file_name_suffix=".jsonl"
    )
    return outputs


def summary(result):
    """``{"embedded_lines": ..., "embedded_tokens": ..., "dead_letters": ...}`` of a job."""
    from apache_beam.metrics.metric import MetricsFilter

    counts = dict.fromkeys(("embedded_lines", "embedded_tokens", "dead_letters"), 0)
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    for counter in query["counters"]:
        if counter.key.metric.name in counts:
            value = counter.committed if counter.committed is not None else counter.attempted
            counts[counter.key.metric.name] += value or 0
    return counts


def run(argv=None, prog="python -m elmo_tf.beam"):
    """Runs the job of ``argv``; returns the ``summary`` counts."""
    args, beam_args = build_parser(prog).parse_known_args(argv)
    options = pipeline_options(beam_args)
    check_inputs(args.input)
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, args)
    result = pipeline.run()
    result.wait_until_finish()
    counts = summary(result)
    print(
        f"elmo_tf.beam: embedded {counts['embedded_lines']:,} lines "
        f"({counts['embedded_tokens']:,} tokens) to {args.output}-*.{args.file_format}; "
        f"{counts['dead_letters']:,} dead letters in {dead_letter_prefix(args.output)}-*.jsonl",
        flush=True,
    )
    return counts


def main(argv=None):
    """``python -m elmo_tf.beam``: exit status 0, or 1 with one line for a user error."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        run(argv)
    except ElmoError as e:
        print(f"python -m elmo_tf.beam: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0
