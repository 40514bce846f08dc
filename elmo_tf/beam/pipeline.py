"""The Beam job that embeds every line of a corpus: ``EmbedFiles``, ``WriteRecords``,
``build_pipeline``.

Every line of every file the input patterns match (UTF-8, one whitespace-tokenised sentence a
line, read by ``elmo_tf.tokens.text_lines`` exactly as ``elmo-tf embed`` reads it; ``.gz`` and
``.bz2`` files are decompressed) gives exactly one record keyed by ``source`` (the path as matched)
and ``line`` (its 0-based number), blank lines included (``n = 0`` tokens); the record layout is in
``elmo_tf.beam.records``. Records go to ``PREFIX-SSSSS-of-NNNNN.parquet`` (or ``.tfrecord``) in no
particular order. A line that cannot be embedded goes to
``PREFIX-dead-letters-SSSSS-of-NNNNN.jsonl`` with its reason instead of failing the job:

- not valid UTF-8, or holding a NUL byte (``elmo-tf embed`` stops on these);
- longer than ``max_line_bytes`` bytes (``text_lines.DEFAULT_MAX_LINE_BYTES``), or than
  ``max_tokens_per_line`` tokens (``text_lines.MAX_TOKENS_PER_LINE``, the bound ``elmo-tf
  embed`` applies too).

The graph: ``MatchAll | ReadMatches | NumberedLines | Reshuffle`` (a file is read by one
worker, its lines then spread over all), ``DecodeLine`` (dead letters to a side output),
``RunInference(KeyedModelHandler(ElmoModelHandler or ElmoSavedModelHandler))``, then the
writer. Beam metrics in the ``elmo_tf`` namespace count ``embedded_lines``,
``embedded_tokens`` and ``dead_letters`` (``summary``).

``python -m elmo_tf.beam`` (``elmo_tf.cli.beam``) is the command line around this; a
pipeline of your own can use ``build_pipeline`` or the transforms directly.
"""

from elmo_tf import backend, checks
from elmo_tf.system import extras

backend.require_tensorflow("the Beam job")  # one line, before TensorFlow
extras.require("beam", __name__)

import bz2
import contextlib
import gzip
import lzma
import os
import re
import zlib

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

from elmo_tf.beam import FORMATS, records
from elmo_tf.beam.local_inputs import check_local_inputs
from elmo_tf.errors import InputFileError
from elmo_tf.tokens.text_lines import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_TOKENS_PER_LINE,
    line_problem,
    raw_lines,
    too_long_problem,
)

METRICS_NAMESPACE = "elmo_tf"
DEAD_LETTERS = "dead_letters"


# The compressions whose end Python's own decompressors check: a file cut short raises there
# (Beam's decompressing reader returns what it has and says nothing).
_CHECKED_DECOMPRESSORS = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    ".bz2": bz2.BZ2File,
    ".xz": lzma.LZMAFile,
    ".lzma": lzma.LZMAFile,
}


class NumberedLines(beam.DoFn):
    """A ``fileio.ReadableFile`` -> ``(source, line number, bytes, problem)`` per line.

    Streams the file (``text_lines.raw_lines``: it never has to fit in memory); ``problem`` is
    ``None``, or why the line is over ``max_line_bytes`` (then ``bytes`` is only its start).
    A compressed file that does not decompress to its end (cut short, or not what its suffix
    says) ends in one element with ``bytes`` ``None`` and the reason as its problem, numbered
    as the line where the stream broke; the partial line there is never emitted.
    """

    def __init__(self, max_line_bytes=DEFAULT_MAX_LINE_BYTES):
        self.max_line_bytes = max_line_bytes

    def process(self, readable_file):
        source = readable_file.metadata.path
        suffix = os.path.splitext(source.lower())[1]
        decompressor = _CHECKED_DECOMPRESSORS.get(suffix)
        number = 0
        try:
            with contextlib.ExitStack() as files:
                if decompressor is None:
                    stream = files.enter_context(readable_file.open())
                else:
                    raw = readable_file.open(compression_type=CompressionTypes.UNCOMPRESSED)
                    stream = files.enter_context(decompressor(files.enter_context(raw)))
                for line in raw_lines(stream, self.max_line_bytes):
                    problem = too_long_problem(self.max_line_bytes) if line.too_long else None
                    yield source, line.number, line.data, problem
                    number = line.number + 1
        except (EOFError, OSError, lzma.LZMAError, zlib.error) as e:
            reason = checks.error_text(e)
            yield (
                source,
                number,
                None,
                (
                    f"the file cannot be read to its end after {number:,} complete lines "
                    f"({reason}); the rest of it is not embedded"
                ),
            )


class DecodeLine(beam.DoFn):
    """``(source, number, bytes, problem)`` -> ``((source, number), tokens)``, or a dead letter.

    Dead letters (JSON lines, ``records.dead_letter``) go to the ``DEAD_LETTERS`` output.
    """

    def __init__(self, max_tokens_per_line=MAX_TOKENS_PER_LINE):
        self.max_tokens_per_line = max_tokens_per_line
        self.dead_letters = Metrics.counter(METRICS_NAMESPACE, "dead_letters")

    def process(self, element):
        source, number, data, reason = element
        if data is not None:
            reason = reason or line_problem(data)
        if reason is None:
            tokens = data.decode("utf-8").split()
            if len(tokens) > self.max_tokens_per_line:
                reason = (
                    f"has {len(tokens):,} tokens, more than {self.max_tokens_per_line:,} "
                    "(max_tokens_per_line)"
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
        max_line_bytes: longer lines become dead letters (read no further than this).
    """

    def __init__(
        self,
        model_handler,
        max_tokens_per_line=MAX_TOKENS_PER_LINE,
        max_line_bytes=DEFAULT_MAX_LINE_BYTES,
    ):
        super().__init__()
        if getattr(model_handler, "layers", None) is None:
            raise ValueError("EmbedFiles needs a model handler with layers set")
        _check_positive("max_tokens_per_line", max_tokens_per_line)
        _check_positive("max_line_bytes", max_line_bytes)
        self.model_handler = model_handler
        self.max_tokens_per_line = max_tokens_per_line
        self.max_line_bytes = max_line_bytes

    def expand(self, patterns):
        lines = (
            patterns
            | "MatchAll" >> fileio.MatchAll()
            # Patterns that overlap (`a*.txt b*.txt`) match a file twice: it is read once.
            | "KeyByPath" >> beam.Map(lambda match: (match.path, match))
            | "OneMatchPerFile" >> beam.CombinePerKey(_first)
            | "Matches" >> beam.Values()
            | "ReadMatches" >> fileio.ReadMatches()
            | "NumberedLines" >> beam.ParDo(NumberedLines(self.max_line_bytes))
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
        if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 0:
            raise ValueError(
                f"num_shards must be 0 (the runner decides) or more, got {num_shards!r}"
            )
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


def check_inputs(patterns):
    """Raises ``InputFileError`` (before the job starts) for a pattern that matches no file,
    and, on the local filesystem, for a match that is a directory, a broken link or a file
    that cannot be read (``local_inputs``)."""
    check_local_inputs(patterns)
    for pattern, result in zip(patterns, FileSystems.match(patterns)):
        if not result.metadata_list:
            raise InputFileError(f"{pattern}: no input file matches")


def build_pipeline(
    pipeline,
    handler,
    inputs,
    output,
    *,
    file_format="parquet",
    num_shards=0,
    max_tokens_per_line=MAX_TOKENS_PER_LINE,
    max_line_bytes=DEFAULT_MAX_LINE_BYTES,
):
    """Adds the whole job to ``pipeline``: read, embed, write records and dead letters.

    Args:
        pipeline: a ``beam.Pipeline``.
        handler: an ``ElmoModelHandler`` or ``ElmoSavedModelHandler`` with ``layers`` set.
        inputs: file patterns (any Beam filesystem); each must match a file.
        output: the output prefix: records ``OUTPUT-SSSSS-of-NNNNN.parquet`` (or
            ``.tfrecord``), dead letters ``OUTPUT-dead-letters-SSSSS-of-NNNNN.jsonl``.
        file_format, num_shards: see ``WriteRecords``.
        max_tokens_per_line, max_line_bytes: see ``EmbedFiles``.

    Returns ``EmbedFiles``' outputs.
    """
    if isinstance(inputs, str):
        inputs = [inputs]
    if not inputs:
        raise ValueError("inputs must name at least one file pattern")
    check_inputs(inputs)
    outputs = (
        pipeline
        | "Patterns" >> beam.Create(list(inputs))
        | "EmbedFiles" >> EmbedFiles(handler, max_tokens_per_line, max_line_bytes)
    )
    outputs["records"] | "WriteRecords" >> WriteRecords(output, file_format, num_shards)
    outputs["dead_letters"] | "WriteDeadLetters" >> beam.io.WriteToText(
        dead_letter_prefix(output), file_name_suffix=".jsonl"
    )
    return outputs


def summary(result):
    """``{"embedded_lines": ..., "embedded_tokens": ..., "dead_letters": ...}`` of a job."""
    counts = dict.fromkeys(("embedded_lines", "embedded_tokens", "dead_letters"), 0)
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    for counter in query["counters"]:
        if counter.key.metric.name in counts:
            value = counter.committed if counter.committed is not None else counter.attempted
            counts[counter.key.metric.name] += value or 0
    return counts


def output_shards(output, file_format):
    """``{path: last modified}`` of the files ``OUTPUT-SSSSS-of-NNNNN.FORMAT`` and
    ``OUTPUT-dead-letters-SSSSS-of-NNNNN.jsonl`` that exist now (any Beam filesystem)."""
    found = {}
    for prefix, suffix in ((output, f".{file_format}"), (dead_letter_prefix(output), ".jsonl")):
        shard = re.compile(re.escape(prefix) + r"-\d{5}-of-(\d{5})" + re.escape(suffix))
        for result in FileSystems.match([f"{prefix}-*-of-*{suffix}"]):
            for metadata in result.metadata_list:
                if shard.fullmatch(metadata.path):
                    found[metadata.path] = metadata.last_updated_in_seconds
    return found


def remove_stale_shards(output, file_format, before):
    """Removes the shards of an earlier job under ``output`` that this job did not replace,
    and returns their paths: ``before`` is ``output_shards`` taken before the job ran.

    A job writes ``NNNNN`` shards; one of an earlier job with more shards would leave its
    extra shards beside them, so that ``OUTPUT-*`` held lines of both. A shard is stale when it
    existed before the job, is unchanged since and belongs to a shard count other than the
    ones this job wrote; when the job's own shards cannot be told apart, nothing is removed.
    """
    now = output_shards(output, file_format)
    written = {path for path, modified in now.items() if before.get(path) != modified}

    kept = {_shard_group(path) for path in written}  # (dead letters?, NNNNN) this job wrote
    kinds = {kind for kind, _ in kept}
    stale = sorted(
        path
        for path in now
        if path in before
        and path not in written
        and _shard_group(path)[0] in kinds
        and _shard_group(path) not in kept
    )
    if stale:
        FileSystems.delete(stale)
    return stale


def _shard_group(path):
    """``(whether a dead-letter shard, its NNNNN)`` of a shard's path."""
    return path.endswith(".jsonl"), re.search(r"-of-(\d{5})\.\w+$", path).group(1)


def _first(matches):
    return next(iter(matches))


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
