"""``elmo-tf embed``: ELMo vectors for every line of a text file, written to HDF5.

The output has the layout of AllenNLP's former ``allennlp elmo`` command, so code that read
its files reads these:

- one float32 dataset per input line, named by the line's 0-based index (``"0"``, ``"1"``,
  ...), holding for a line of ``n`` tokens:

  - ``--all`` (default): ``(L + 1, n, 2P)``, the token layer (``word_emb`` duplicated to
    ``2P``, AllenNLP's layer 0) then each LSTM layer (``lstm_outputs1``, ``lstm_outputs2``);
  - ``--top``: ``(n, 2P)``, the last LSTM layer;
  - ``--average``: ``(n, 2P)``, the mean of the ``L + 1`` layers;

  an empty line gives ``n = 0``;
- ``sentence_to_index``: a ``(1,)`` string dataset holding a JSON object that maps each
  sentence (its tokens joined by one space) to its line index string; a repeated sentence
  maps to its last line.

Sentences are embedded in length-sorted batches and each batch is written as it comes, so
memory holds one batch of outputs. The file is written under a temporary name in the output
directory and renamed into place at the end: an interrupted run leaves no file under OUTPUT.
"""

import codecs
import json
import os
import secrets

import numpy as np

from elmo_tf.cli.common import CommandError, Progress, add_model_arguments, load_model

FORMATS = ("all", "top", "average")


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
    parser.add_argument("input", metavar="INPUT", help="UTF-8 text file, one sentence per line")
    parser.add_argument("output", metavar="OUTPUT", help="HDF5 file to write (replaced if present)")
    add_model_arguments(parser)
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
        "--batch-size", type=int, default=64, metavar="N", help="sentences per batch (default 64)"
    )
    return parser


def run(args):
    # Every check that needs no model runs first: loading the model is the slow part.
    if args.batch_size < 1:
        raise CommandError(f"--batch-size must be at least 1, got {args.batch_size}")
    sentences = read_sentences(args.input)
    check_output_path(args.output, args.input)
    model = load_model(args)
    write_embeddings(model, sentences, args.output, args.output_format, args.batch_size)
    return 0


def read_sentences(path):
    """Reads ``path`` as UTF-8, one sentence per line; returns a list of token lists.

    The file is read as bytes and decoded line by line so that an encoding error names its
    line. Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (as in text mode), so line numbers are
    those an editor shows; a leading UTF-8 byte-order mark is dropped.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CommandError(f"{path}: input file not found") from None
    except IsADirectoryError:
        raise CommandError(f"{path}: input is a directory, expected a text file") from None
    except OSError as e:
        raise CommandError(f"{path}: cannot read input file ({e.strerror})") from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    sentences = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CommandError(
                f"{path}: line {number} is not valid UTF-8 "
                f"(byte 0x{line[e.start]:02x} at byte {e.start + 1} of the line)"
            ) from None
        sentences.append(text.split())
    return sentences


def check_output_path(output, input_path):
    """Raises ``CommandError`` unless ``output`` names a file that can be created or replaced."""
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):
        raise CommandError(f"{output}: output directory {directory} does not exist")
    if os.path.isdir(output):
        raise CommandError(f"{output}: is a directory, expected an HDF5 file name")
    if os.path.exists(output) and os.path.samefile(output, input_path):
        raise CommandError(f"{output}: is the input file; choose another output name")


def layer_stack(outputs, n_lstm_layers):
    """All ELMo layers of a batch, ``(L + 1, B, T, 2P)``: the token layer, then each LSTM layer.

    The token layer is ``word_emb`` ``(B, T, P)`` concatenated with itself, as AllenNLP's
    ``_ElmoBiLm`` returns it, so that every layer has width ``2P``.
    """
    word_emb = outputs["word_emb"]
    layers = [np.concatenate([word_emb, word_emb], axis=-1)]
    layers += [outputs[f"lstm_outputs{k}"] for k in range(1, n_lstm_layers + 1)]
    return np.stack(layers)


def select_layers(layers, output_format):
    """Reduces one sentence's ``(L + 1, n, 2P)`` layers to what ``output_format`` writes."""
    if output_format == "all":
        return layers
    if output_format == "top":
        return layers[-1]
    if output_format == "average":
        return layers.mean(axis=0)
    raise ValueError(f"output_format must be one of {FORMATS}, got {output_format!r}")


def write_embeddings(model, sentences, path, output_format="all", batch_size=64, progress=None):
    """Embeds ``sentences`` (token lists) with ``model`` and writes them to the HDF5 ``path``.

    See the module docstring for the layout. ``progress`` is a ``Progress`` (default: one on
    stderr). The file appears under ``path`` only once complete.
    """
    import h5py

    if output_format not in FORMATS:
        raise ValueError(f"output_format must be one of {FORMATS}, got {output_format!r}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    # Not tempfile.mkstemp: its 0600 mode would survive the rename; h5py's "x" (create,
    # fail if present) gives the usual umask permissions.
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    try:
        out = h5py.File(tmp, "x")
    except OSError as e:
        raise CommandError(f"{path}: cannot create a file in {directory} ({e})") from None
    if progress is None:
        progress = Progress(len(sentences), unit="sentences")
    n_lstm_layers = model.config.n_lstm_layers
    try:
        with out:
            for indices, outputs in model.embed_batches(sentences, batch_size):
                layers = layer_stack(outputs, n_lstm_layers)  # (L + 1, B, T, 2P)
                lengths = outputs["sequence_len"]
                for row, index in enumerate(indices):
                    vectors = select_layers(layers[:, row, : lengths[row]], output_format)
                    out.create_dataset(str(index), data=vectors.astype(np.float32))
                progress.update(len(indices), tokens=int(lengths.sum()))
            sentence_to_index = {" ".join(s): str(i) for i, s in enumerate(sentences)}
            out.create_dataset(
                "sentence_to_index",
                data=[json.dumps(sentence_to_index)],
                dtype=h5py.string_dtype(),
            )
        os.replace(tmp, path)
    except BaseException:
        progress.abort()
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    progress.close()
