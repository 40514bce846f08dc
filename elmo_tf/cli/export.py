"""``elmo-tf export {saved-model,tflite,onnx}``: argument parsing for ``elmo_tf.export``.

``saved-model`` writes a versioned TF SavedModel (TF Serving, ``hub.KerasLayer``,
``elmo_tf.ElmoLayer``); its contract is stated in ``elmo_tf.export.saved_model_module``.
``tflite`` writes a TFLite flatbuffer taking character ids; its contract is stated in
``elmo_tf.export.tflite``. ``onnx`` writes an ONNX model taking character ids (and with
``--triton``, a Triton model repository); its contract is stated in
``elmo_tf.export.onnx_export``.
"""

import os
import sys
import time

from elmo_tf.cli.common import (
    CommandError,
    check_output_directory,
    check_output_name,
    require_extra,
)
from elmo_tf.cli.model_flags import (
    add_model_arguments,
    add_precision_argument,
    check_model,
    check_model_and_output,
    load_model,
)
from elmo_tf.export import onnx_triton
from elmo_tf.export.onnx_export import OPSET
from elmo_tf.export.tflite_arguments import QUANTIZE_CHOICES, check_arguments
from elmo_tf.export.versions import version_directory
from elmo_tf.models.settings import FINE_TUNE_CHOICES, check_settings
from elmo_tf.precision import PRECISIONS, PrecisionError
from elmo_tf.precision import check as check_precision
from elmo_tf.system import extras, files


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "export",
        help="export a model as a SavedModel, a TFLite flatbuffer or an ONNX model",
        description="Export a model as a SavedModel, a TFLite flatbuffer or an ONNX model "
        "('elmo-tf export FORMAT --help' for each).",
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    _add_saved_model_parser(formats).set_defaults(export_run=run_saved_model)
    _add_tflite_parser(formats).set_defaults(export_run=run_tflite)
    _add_onnx_parser(formats).set_defaults(export_run=run_onnx)
    return parser


def run(args):
    return args.export_run(args)


def _add_saved_model_parser(formats):
    parser = formats.add_parser(
        "saved-model",
        help="write a versioned TF SavedModel (TF Serving, hub.KerasLayer, elmo_tf.ElmoLayer)",
        description=(
            "Write the model as OUTDIR/N/, TF Serving's layout, through a temporary directory "
            "renamed into place (a server watching OUTDIR never sees a half-written version). "
            "`saved_model_cli show --all --dir OUTDIR/N` lists its signatures."
        ),
    )
    parser.add_argument("outdir", metavar="OUTDIR", help="model base directory (OUTDIR/N/)")
    add_model_arguments(parser)
    parser.add_argument(
        "--version", type=int, help="version number N (default: one above the highest present)"
    )
    parser.add_argument(
        "--trainable",
        choices=FINE_TUNE_CHOICES,
        default="mix",
        help="variables a reusing model fine-tunes (default: the ScalarMix weights)",
    )
    parser.add_argument(
        "--l2-coefficient",
        type=float,
        default=0.0,
        help="λ of the regularisation loss λ||w||² on the mix weights (default 0)",
    )
    parser.add_argument(
        "--dropout", type=float, default=0.0, help="dropout on 'elmo' when training (default 0)"
    )
    add_precision_argument(
        parser,
        choices=("float32", "bfloat16"),
        help="what the SavedModel computes in (default float32): bfloat16 weights, matmuls and "
        "convolutions, float32 in and out (TF Serving on a CPU with AVX-512 BF16 or AMX, or a "
        "GPU); refused where this CPU cannot check it. int8: elmo-tf export onnx --precision "
        "int8",
    )
    parser.add_argument(
        "--no-warmup-requests",
        dest="warmup_requests",
        action="store_false",
        help="write no assets.extra/tf_serving_warmup_requests (by default: one request per "
        "signature, which TF Serving and elmo-tf serve run before serving a new version)",
    )
    return parser


def _add_tflite_parser(formats):
    parser = formats.add_parser(
        "tflite",
        help="write a TFLite flatbuffer (built-in ops only) taking character ids",
        description=(
            "Write the model as a TFLite flatbuffer that runs with built-in ops only and takes "
            "character ids [batch, T, 50] (elmo_tf.batch_to_ids); the file is written under a "
            "temporary name and renamed into place."
        ),
    )
    parser.add_argument("outfile", metavar="OUTFILE", help="the .tflite file to write")
    add_model_arguments(parser)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=1,
        help="sentences per call, fixed in the model; pad with zero rows (default 1)",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        help="fix the tokens per sentence (default: dynamic, resize the input per call)",
    )
    add_precision_argument(
        parser,
        PRECISIONS,
        "float32 (default), or int8: int8 weights, float activations quantised at run time "
        "(dynamic-range quantisation, the same as --quantize dynamic)",
        default=None,
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        help="'dynamic': int8 weights, float activations (dynamic-range quantisation); "
        "--precision int8 says the same",
    )
    return parser


def _add_onnx_parser(formats):
    parser = formats.add_parser(
        "onnx",
        help="write an ONNX model (built-in operators only) taking character ids",
        description=(
            f"Write the model as an ONNX file (opset {OPSET}, built-in operators only) that ONNX "
            "Runtime, Triton or any ONNX runtime runs without TensorFlow, taking character ids "
            "[batch, time, 50] (elmo_tf.batch_to_ids; an ELMoForManyLangs model's rows are "
            "its own, 51 wide with its word id), both axes dynamic; written under a "
            "temporary name and renamed into place."
        ),
    )
    parser.add_argument(
        "outfile", metavar="OUTPUT", nargs="?", help="the .onnx file to write (or give --triton)"
    )
    add_model_arguments(parser)
    add_precision_argument(
        parser,
        PRECISIONS,
        "float32 (default), or int8: every MatMul with constant weights, in the LSTM loops "
        "too, as int8 weights per output column and activations quantised per call (ONNX "
        "Runtime's dynamic quantisation; the character CNN stays float32)",
    )
    parser.add_argument(
        "--triton",
        metavar="DIR",
        help=f"also write a Triton model repository: DIR/{onnx_triton.MODEL_NAME}/config.pbtxt "
        f"and DIR/{onnx_triton.MODEL_NAME}/N/{onnx_triton.MODEL_FILE} (N: the next version)",
    )
    parser.add_argument(
        "--triton-max-batch-size",
        type=int,
        default=onnx_triton.DEFAULT_MAX_BATCH_SIZE,
        metavar="N",
        help="requests Triton batches together at most (default "
        f"{onnx_triton.DEFAULT_MAX_BATCH_SIZE})",
    )
    return parser


def run_saved_model(args):
    if args.warmup_requests:  # TF Serving's protos, from [tensorflow] (a [hub] install lacked them)
        extras.require("tensorflow", "elmo-tf export saved-model", modules=("tensorflow_serving",))
    try:  # the model's own check of its settings, before TensorFlow starts
        check_settings(l2_coefficient=args.l2_coefficient, dropout=args.dropout)
    except ValueError as e:
        raise CommandError(e) from None
    _check_precision(args.precision, "tensorflow")  # the exporting CPU must run it
    # before TensorFlow: names, files, the options; an OUTDIR that is none of the model's
    # files, a base directory (not a file) with a free version, writable
    model_files = check_model(args)
    check_output_name(args.outdir, "OUTDIR", "directory")
    files.check_not_input(args.outdir, model_files, CommandError)
    version_directory(args.outdir, args.version)
    check_output_directory(args.outdir, model_files)
    from elmo_tf.export.saved_model import export_saved_model  # lazy: starts TensorFlow

    start = time.monotonic()
    precision = None if args.precision == "float32" else args.precision
    model = load_model(
        args, step="[1/2] ", l2_coefficient=0.0, dropout=args.dropout, precision=precision
    )
    how = "" if precision is None else f" ({precision}, float32 in and out)"
    print(f"[2/2] tracing signatures and writing the SavedModel{how}", file=sys.stderr,
          flush=True)  # fmt: skip
    path = export_saved_model(
        model,
        args.outdir,
        args.version,
        args.trainable,
        args.l2_coefficient,
        warmup_requests=args.warmup_requests,
    )
    print(f"wrote {path} in {time.monotonic() - start:.1f} s", file=sys.stderr)
    print(path)
    return 0


def run_tflite(args):
    require_extra("tflite")
    _check_precision(args.precision, "tflite")
    # --precision int8 is --quantize dynamic (the flag that came first, kept working).
    if args.precision == "float32" and args.quantize is not None:
        raise CommandError(f"--precision float32 and --quantize {args.quantize}: pass one")
    if args.precision == "int8":
        args.quantize = "dynamic"
    try:
        check_arguments(args.batch_size, args.max_length, args.quantize)
    except ValueError as e:
        raise CommandError(str(e)) from None
    # before TensorFlow: names, files, the options, and an OUTFILE none of the model's files
    check_model_and_output(args, args.outfile, "a .tflite file name", "OUTFILE")
    from elmo_tf.export.tflite import export_tflite  # lazy: starts TensorFlow

    start = time.monotonic()
    model = load_model(args, step="[1/2] ", dedupe_tokens=False)
    shape = f"[{args.batch_size}, {args.max_length or 'T'}, 50]"
    how = "dynamic-range quantised, " if args.quantize else ""
    print(
        f"[2/2] converting to TFLite ({how}built-in ops only, char_ids {shape})",
        file=sys.stderr,
        flush=True,
    )
    size = export_tflite(model, args.outfile, args.batch_size, args.max_length, args.quantize)
    print(
        f"wrote {args.outfile} ({size / 1e6:.2f} MB) in {time.monotonic() - start:.1f} s",
        file=sys.stderr,
    )
    print(args.outfile)
    return 0


def run_onnx(args):
    require_extra("onnx")
    if args.outfile is None and args.triton is None:
        raise CommandError("give OUTPUT (an .onnx file), --triton DIR, or both")
    _check_precision(args.precision, "onnx")
    try:
        onnx_triton.check_max_batch_size(args.triton_max_batch_size, "--triton-max-batch-size")
    except ValueError as e:
        raise CommandError(e) from None
    # before TensorFlow: names, files, the options, an output that is none of the model's files
    if args.outfile is not None:
        model_files = check_model_and_output(args, args.outfile, "an .onnx file name", "OUTPUT")
    else:
        model_files = check_model(args)
    if args.triton is not None:
        _check_triton_directory(args.triton, model_files)
    from elmo_tf.export.onnx_export import onnx_model  # lazy: starts TensorFlow

    start = time.monotonic()
    model = load_model(args, step="[1/2] ")
    how = ", int8 weights" if args.precision == "int8" else ""
    print(
        f"[2/2] converting to ONNX (opset {OPSET}, built-in operators only{how}, char_ids "
        f"[batch, time, {model.config.id_width}])",
        file=sys.stderr,
        flush=True,
    )
    model_proto = onnx_model(model, args.precision)
    written = []
    if args.outfile is not None:
        files.write_bytes(args.outfile, model_proto.SerializeToString())
        written.append(args.outfile)
    if args.triton is not None:
        written.append(
            onnx_triton.write_triton_repository(
                model_proto, args.triton, max_batch_size=args.triton_max_batch_size
            )
        )
    size = model_proto.ByteSize()
    print(
        f"wrote {' and '.join(written)} ({size / 1e6:.2f} MB) in {time.monotonic() - start:.1f} s",
        file=sys.stderr,
    )
    for path in written:
        print(path)
    return 0


def _check_triton_directory(directory, inputs):
    """``CommandError`` for a --triton DIR that is a file, or whose config.pbtxt would replace
    one of the files the command reads; before any work."""
    if not directory:
        raise CommandError(
            "--triton is empty; name the model repository directory (. for this one)"
        )
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise CommandError(f"--triton {directory}: is a file, expected a model repository")
    onnx_triton.check_repository(directory)
    config = os.path.join(directory, onnx_triton.MODEL_NAME, onnx_triton.CONFIG_FILE)
    for path in inputs:
        if os.path.exists(config) and os.path.exists(path) and os.path.samefile(config, path):
            raise CommandError(f"--triton {directory}: {config} is an input file")


def _check_precision(value, runtime):
    """``CommandError`` for a ``--precision`` the export's ``runtime`` cannot honour (the
    library's one line)."""
    if value is None:
        return
    try:
        check_precision(value, runtime)
    except PrecisionError as e:
        raise CommandError(f"--precision {value}: {e}") from None
