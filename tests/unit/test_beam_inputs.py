"""Beam's inputs and arguments without a job: numbered lines and their byte bound, dead letters
for undecodable, cut and mislabelled files, gzip, the handlers' defaults and argument errors,
the beam subcommand's user errors, one token limit for embed and Beam."""

import codecs
import gzip
import json
import os

import pytest
from support.beam_corpus import RUNNER, write_corpus
from support.text_edges import edge_lines

from elmo_tf.beam import ElmoModelHandler, ElmoSavedModelHandler, pipeline
from elmo_tf.cli import beam as beam_command
from elmo_tf.cli.main import main as elmo_tf_main
from elmo_tf.tokens.text_lines import read_text_lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def test_handler_batching_defaults():
    kwargs = ElmoModelHandler("sotu").batch_elements_kwargs()
    assert kwargs["min_batch_size"] >= 256
    assert kwargs["max_batch_size"] >= kwargs["min_batch_size"]


def test_handler_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="together"):
        ElmoModelHandler(options_file="options.json")
    with pytest.raises(ValueError, match="layers"):
        ElmoModelHandler("sotu", layers="middle")
    with pytest.raises(ValueError, match="signature"):
        ElmoSavedModelHandler(tmp_path, signature="char_ids")
    with pytest.raises(ValueError, match="max_batch_tokens"):
        ElmoModelHandler("sotu", max_batch_tokens=-1)
    with pytest.raises(ValueError, match="max_batch_tokens"):
        ElmoSavedModelHandler(tmp_path, max_batch_tokens=-1)
    from elmo_tf.errors import ExportError

    with pytest.raises(ExportError, match="export saved-model"):
        ElmoSavedModelHandler(tmp_path).load_model()


class _Readable:
    """A ``fileio.ReadableFile`` stand-in over bytes."""

    def __init__(self, path, data):
        import io

        self.metadata = type("Metadata", (), {"path": path})()
        self._data = data
        self._io = io

    def open(self):
        return self._io.BytesIO(self._data)


def test_numbered_lines_are_read_text_lines(tmp_path):
    """Lines and numbers are those of ``elmo-tf embed``'s reader (``elmo_tf.tokens.text_lines``)."""
    data = codecs.BOM_UTF8 + "a b\r\n\r\nc\rd\n\né ü\r\r\n\nlast".encode()
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    lines = list(pipeline.NumberedLines().process(_Readable("x", data)))
    assert [(s, i, p) for s, i, _, p in lines] == [("x", i, None) for i in range(len(lines))]
    assert [b.decode() for _, _, b, _ in lines] == list(read_text_lines(path))


def test_over_long_lines_are_cut_short_and_named():
    data = b"short\n" + b"x" * 100 + b"\nnext"
    lines = list(pipeline.NumberedLines(max_line_bytes=10).process(_Readable("x", data)))
    assert [(i, b, p) for _, i, b, p in lines] == [
        (0, b"short", None),
        (1, b"x" * 10, "is longer than 10 bytes (max_line_bytes)"),
        (2, b"next", None),
    ]


@pytest.mark.parametrize("bound", [10, 70_000])  # below and above the 64 KiB read chunk
def test_numbered_lines_hold_the_byte_bound_at_its_edge(bound):
    """Exactly the bound is a line; one byte more (and up to twice the bound, in one read) is
    cut short and named: the job's reader is ``elmo-tf embed``'s."""

    lines, expected = edge_lines(bound)
    readable = _Readable("x", b"\n".join(lines))
    got = list(pipeline.NumberedLines(max_line_bytes=bound).process(readable))
    too_long = f"is longer than {bound:,} bytes (max_line_bytes)"
    assert got == [
        ("x", line.number, line.data, too_long if line.too_long else None) for line in expected
    ]


def test_decode_line_dead_letters():
    decode = pipeline.DecodeLine(max_tokens_per_line=2)
    assert list(decode.process(("f", 0, b"a  b", None))) == [(("f", 0), ["a", "b"])]
    assert list(decode.process(("f", 1, b"", None))) == [(("f", 1), [])]
    for data, problem, reason in [
        (b"a b c", None, "has 3 tokens, more than 2 (max_tokens_per_line)"),
        (b"\xc3(", None, "is not valid UTF-8 (byte 0xc3 at byte 1 of the line)"),
        (b"ab\x00", None, "holds a NUL byte (at byte 3 of the line)"),
        (b"abc", "is longer than 3 bytes", "is longer than 3 bytes"),
    ]:
        (tagged,) = decode.process(("f", 7, data, problem))
        assert tagged.tag == pipeline.DEAD_LETTERS
        assert json.loads(tagged.value) == {"source": "f", "line": 7, "reason": reason}


def test_gzip_input_is_decompressed(tmp_path):
    """``ReadMatches`` opens ``.gz`` inputs decompressed (compression from the name)."""
    from apache_beam.io import fileio
    from apache_beam.io.filesystems import FileSystems

    path = tmp_path / "lines.txt.gz"
    path.write_bytes(gzip.compress(b"one two\n\nthree\n"))
    (match,) = FileSystems.match([str(path)])
    readable = fileio.ReadableFile(match.metadata_list[0])
    lines = pipeline.NumberedLines().process(readable)
    assert [b for _, _, b, _ in lines] == [b"one two", b"", b"three"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--input", "/nonexistent/*.txt"], "no input file matches"),
        (["--options", "o.json"], "--options was given without --weights"),
        (["--model", "sotu", "--saved-model", "x"], "pass one of --model, --saved-model"),
        (["--model", "nope"], "'nope' is neither the bundled model"),
        (["--saved-model", "/nonexistent"], "no saved_model.pb"),
        (["--max-tokens-per-line", "0"], "--max-tokens-per-line must be at least 1"),
        (["--max-batch-tokens=-1"], "--max-batch-tokens must be 0 or more"),
        (["--output", "{tmp}/a_file/elmo"], "a_file is a file, not a directory"),
        (["--output", "{tmp}/a_file/deeper/elmo"], "a_file is a file, not a directory"),
        # an argument neither the command's nor Beam's: Beam would drop it with a warning
        (["--bogus-flag", "3"], "unknown option --bogus-flag: neither this command's"),
        (["--max-token-per-line=9"], "did you mean '--max-tokens-per-line'?"),
        (["stray"], "unexpected argument 'stray'"),
        (["-runner=DirectRunner"], "unknown option -runner=DirectRunner: Beam's pipeline opt"),
        # every number bounded, every runner named, before the job (they were tracebacks)
        (["--runner=NoSuchRunner"], "--runner NoSuchRunner: Unexpected pipeline runner"),
        (["--runner=no.such.Runner"], "--runner no.such.Runner: No module named 'no'"),
        (["--direct_num_workers=-1"], "to {max_workers}, got -1"),
        (["--direct_num_workers={too_many}"], "to {max_workers}, got {too_many}"),
        (["--num-shards", "10001"], "--num-shards must be an integer from 0 to 10000"),
        # names that name no file
        (["--output", ""], "--output is empty; name the file prefix to write"),
        (["--output", "-"], "--output is '-': elmo-tf writes no output to standard output"),
        (["--input", "-"], "--input is '-': this command reads no standard input"),
        # a glob that matches the job's own outputs: an earlier job's records read as text
        (
            ["--input", "{tmp}/*", "--output", "{tmp}/a"],
            "--output {tmp}/a: the input {tmp}/a-00000-of-00001.parquet is named as this "
            "job's outputs are ({tmp}/a-*)",
        ),
    ],
)
def test_user_errors_exit_1_before_the_job(argv, message, corpus, tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a directory", encoding="utf-8")
    (tmp_path / "a-00000-of-00001.parquet").write_bytes(b"PAR1 an earlier job's records")
    workers = beam_command.MAX_LOCAL_WORKERS_PER_CORE * (os.cpu_count() or 1)
    values = {"tmp": tmp_path, "max_workers": workers, "too_many": workers + 1}
    argv = [a.format(**values) for a in argv]
    message = message.format(**values)
    if "--input" not in argv:
        argv = ["--input", str(corpus / "*.txt"), *argv]
    if "--output" not in argv:
        argv += ["--output", str(tmp_path / "out")]
    runner = [a for a in RUNNER if a.split("=")[0] not in {b.split("=")[0] for b in argv}]
    status = elmo_tf_main(["beam", *argv, *runner])
    assert status == 1
    (err,) = capsys.readouterr().err.strip().splitlines()  # one line, before the job
    assert err.startswith("elmo-tf beam: error: ") and message in err
    assert sorted(os.listdir(tmp_path)) == ["a-00000-of-00001.parquet", "a_file"]


def test_elmo_tf_beam_subcommand(tmp_path, capsys):
    """``elmo-tf beam ARGS`` is ``python -m elmo_tf.beam ARGS``: its help and its errors."""
    assert elmo_tf_main(["beam", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: elmo-tf beam") and "--saved-model DIR" in out
    argv = ["beam", "--input", "/nonexistent/*.txt", "--output", str(tmp_path / "x"), *RUNNER]
    assert elmo_tf_main(argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "elmo-tf beam: error: /nonexistent/*.txt: no input file matches"
    )


def _readable(path):
    from apache_beam.io import fileio
    from apache_beam.io.filesystems import FileSystems

    (match,) = FileSystems.match([str(path)])
    return fileio.ReadableFile(match.metadata_list[0])


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
@pytest.mark.parametrize("damage", ["cut in half", "trailing garbage"])
def test_a_compressed_file_cut_short_is_a_dead_letter_not_a_short_success(tmp_path, suffix, damage):
    import bz2
    import zlib

    text = "".join(f"line number {i} with some words .\n" for i in range(2000)).encode()
    if suffix == ".gz":
        whole, decompressor = gzip.compress(text), zlib.decompressobj(wbits=31)
    else:
        whole, decompressor = bz2.compress(text), bz2.BZ2Decompressor()
    damaged = whole[: len(whole) // 2] if damage == "cut in half" else whole + b"garbage"
    # what a decompressor recovers: the complete lines in it are embedded, no fewer
    recoverable = decompressor.decompress(damaged).count(b"\n")
    path = tmp_path / f"damaged{suffix}"
    path.write_bytes(damaged)
    elements = list(pipeline.NumberedLines().process(_readable(path)))
    if suffix == ".bz2" and damage == "trailing garbage":  # ignored, as bzip2 -d ignores it
        assert [data for _, _, data, _ in elements] == text.splitlines()
        return
    *lines, last = elements
    assert last[2] is None and "cannot be read to its end" in last[3]
    assert last[1] == len(lines) == recoverable and str(path) == last[0]
    if suffix == ".gz":  # gzip streams in small blocks: half a file is ~half its lines
        assert recoverable >= (900 if damage == "cut in half" else 2000)
    # every emitted line is complete: the line cut in the middle is not among them
    assert [data for _, _, data, _ in lines] == text.splitlines()[: len(lines)]
    (letter,) = pipeline.DecodeLine().process(last)
    assert letter.tag == pipeline.DEAD_LETTERS
    assert f"after {len(lines):,} complete lines" in json.loads(letter.value)["reason"]


def test_a_file_that_is_not_what_its_suffix_says_is_a_dead_letter(tmp_path):
    path = tmp_path / "plain.txt.gz"
    path.write_bytes(b"not gzip at all\n")
    (element,) = pipeline.NumberedLines().process(_readable(path))
    assert element[:3] == (str(path), 0, None) and "Not a gzipped file" in element[3]


@pytest.mark.parametrize("kind", ["directory", "broken link"])
def test_inputs_that_are_no_files_stop_the_job_before_it_starts(tmp_path, capsys, kind):
    (tmp_path / "a.txt").write_text("fine .\n", encoding="utf-8")
    if kind == "directory":
        (tmp_path / "b.txt").mkdir()
    else:
        (tmp_path / "b.txt").symlink_to(tmp_path / "gone.txt")
    argv = ["beam", "--input", str(tmp_path / "*.txt"), "--output", str(tmp_path / "out" / "x")]
    assert elmo_tf_main([*argv, *RUNNER]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert f"{tmp_path / 'b.txt'} (a {kind})" in line and line.startswith("elmo-tf beam: error: ")
    assert not (tmp_path / "out").exists()


def test_one_token_limit_for_embed_and_beam():
    """A 5,000-token line gets the same treatment from `elmo-tf embed` and the Beam job."""
    from elmo_tf.cli import beam as beam_command
    from elmo_tf.cli.main import build_parser
    from elmo_tf.tokens import text_lines

    line = " ".join(["w"] * 5000).encode()
    ((key, tokens),) = pipeline.DecodeLine().process(("f", 0, line, None))
    assert len(tokens) == 5000
    embed_args = build_parser().parse_args(["embed", "in.txt", "out.hdf5"])
    beam_args, _ = beam_command.build_parser().parse_known_args(["--input", "x", "--output", "y"])
    limits = {embed_args.max_tokens_per_line, beam_args.max_tokens_per_line}
    assert limits == {text_lines.MAX_TOKENS_PER_LINE} == {10_000}
