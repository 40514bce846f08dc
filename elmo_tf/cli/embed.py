"""``elmo-tf embed``: ELMo vectors for every line of a text file, written to HDF5.

The layout (AllenNLP's former ``allennlp elmo`` command) and the atomic write are those of
``elmo_tf.formats.embedding_file``; this module parses the flags and shows progress.
"""

import os
import stat
import sys
import time

from elmo_tf.cli.common import (
    STANDARD_INPUT,
    CommandError,
    check_input_exists,
    check_input_name,
    check_output_path,
)
from elmo_tf.cli.model_flags import (
    add_model_arguments,
    add_precision_argument,
    check_in_process_precision,
    check_model_and_output,
    load_model,
    model_source,
)
from elmo_tf.cli.progress import Progress
from elmo_tf.errors import ModelFileError
from elmo_tf.formats.embedding_file import (
    LAYER_CHOICES,
    check_max_tokens_per_line,
    iter_lines,
    write_embeddings,
)
from elmo_tf.models import length_batches
from elmo_tf.models.length_batches import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from elmo_tf.system import extras, untrusted_files
from elmo_tf.system.cpu_threads import configure_threads
from elmo_tf.tokens.text_lines import MAX_TOKENS_PER_LINE

FORMATS = LAYER_CHOICES


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "embed",
        help="write ELMo vectors of a tokenised text file to HDF5",
        description=(
            "Embed every line of INPUT (UTF-8, one whitespace-tokenised sentence per line) and "
            "write one dataset per line to the HDF5 file OUTPUT, in the layout of AllenNLP's "
            "former 'elmo' command."
        ),
    )
    parser.add_argument(
        "input", metavar="INPUT", help="UTF-8 text, one sentence per line ('-': standard input)"
    )
    parser.add_argument("output", metavar="OUTPUT", help="HDF5 file to write (replaced if present)")
    add_model_arguments(parser, onnx=True)
    add_precision_argument(
        parser,
        ("float32", "bfloat16", "int8"),
        "float32 (default); bfloat16: bfloat16 matmuls, on a CPU with AVX-512 BF16 or AMX or a "
        "GPU; int8 runs through an export (elmo-tf export onnx OUTPUT --precision int8, then "
        "--onnx OUTPUT). An --onnx file holds its own precision",
    )
    layers = parser.add_mutually_exclusive_group()
    layers.add_argument(
        "--all",
        dest="output_format",
        action="store_const",
        const="all",
        help="write all layers, shape (L + 1, n_tokens, 2P) (the default)",
    )
    layers.add_argument(
        "--top",
        dest="output_format",
        action="store_const",
        const="top",
        help="write the top LSTM layer, shape (n_tokens, 2P)",
    )
    layers.add_argument(
        "--average",
        dest="output_format",
        action="store_const",
        const="average",
        help="write the mean of all layers, shape (n_tokens, 2P)",
    )
    parser.set_defaults(output_format="all")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"sentences per batch at most (default {DEFAULT_BATCH_SIZE}; --max-batch-tokens caps "
        "it too)",
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=DEFAULT_MAX_BATCH_TOKENS,
        metavar="N",
        help="padded tokens per batch, rows x its longest line (default "
        f"{DEFAULT_MAX_BATCH_TOKENS:,}; 0: no budget): batches of long lines get fewer rows, "
        "bounding memory; a line longer than N runs alone",
    )
    parser.add_argument(
        "--max-tokens-per-line",
        type=int,
        default=MAX_TOKENS_PER_LINE,
        metavar="N",
        help=f"refuse a line longer than this, naming it (default {MAX_TOKENS_PER_LINE:,}; "
        "memory grows with a line's length)",
    )
    return parser


def run(args):
    # Every check that needs no model runs first: loading the model is the slow part.
    try:  # the library's own checks, naming the flags
        length_batches.check_batch_size(args.batch_size, "--batch-size")
        length_batches.check_max_batch_tokens(args.max_batch_tokens, "--max-batch-tokens")
        check_max_tokens_per_line(args.max_tokens_per_line, "--max-tokens-per-line")
    except ValueError as e:
        raise CommandError(e) from None
    if args.onnx is not None:
        model_files = _check_onnx_flags(args)
    else:
        check_in_process_precision(args.precision)
    check_input_exists(args.input)
    # the files the model is read from are inputs too
    if args.onnx is None:
        check_model_and_output(args, args.output, "an HDF5 file name", "OUTPUT", [args.input])
    else:
        check_output_path(args.output, [args.input, *model_files], "an HDF5 file name", "OUTPUT")
    # A file is checked whole before the model loads (a bad line found at once, not after
    # everything before it is embedded): one streaming pass, memory bounded by the longest
    # line. A pipe or a device can be read only once: its lines are checked as they come.
    total = None
    if args.input != STANDARD_INPUT and _is_regular_file(args.input):
        total = sum(1 for _ in iter_lines(args.input, args.max_tokens_per_line))
    setup_started = time.monotonic()
    if args.onnx is not None:
        from elmo_tf.export.onnx import OnnxModel  # lazy: the [onnx] extra, no TensorFlow

        model = OnnxModel(args.onnx)
    else:
        configure_threads(warn=False)  # before the first op: both LSTM directions side by side
        model = load_model(args, precision=args.precision)
        model.embed([["warm"]], token_cache_size=0)  # compiles the model: set-up, not the rate
    progress = Progress(total, unit="sentences", setup_seconds=time.monotonic() - setup_started)
    try:
        write_embeddings(
            model,
            _lines(args.input, args.max_tokens_per_line),
            args.output,
            args.output_format,
            args.batch_size,
            on_batch=lambda n, tokens: progress.update(n, tokens=tokens),
            max_batch_tokens=args.max_batch_tokens,
        )
    except BaseException:
        progress.abort()
        raise
    progress.close()
    return 0


def _check_onnx_flags(args):
    """With ``--onnx``: no other model flag, the extra's runtime installed, an ONNX file that
    exists. Returns it (an input of the command)."""
    model_source(args)  # --onnx and no other model flag
    if args.precision != "float32":
        raise CommandError(
            f"--precision {args.precision} with --onnx: the ONNX file holds its own precision "
            "(elmo-tf export onnx OUTPUT --precision int8 writes an int8 one)"
        )
    extras.require("onnx", "this command", modules=("onnxruntime",))
    check_input_name(args.onnx, "--onnx")
    untrusted_files.check_readable(args.onnx, "ONNX file", ModelFileError)
    return [args.onnx]


def _lines(source, max_tokens):
    """The lines of INPUT, as written (``embedding_file`` keys ``sentence_to_index`` by them)."""
    if source == STANDARD_INPUT:
        return iter_lines(sys.stdin.buffer, max_tokens, name="standard input")
    return iter_lines(source, max_tokens)


def _is_regular_file(path):
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # missing or unreadable: the reader names the problem
