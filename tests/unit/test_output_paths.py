"""What every command writes, checked before any work (the checks alone; the commands that would
write over their model, in a process or through an export, are in
integration/test_cli_outputs.py)."""

import os

import pytest
from support.files import fake_run

from elmo_tf.cli.main import main
from elmo_tf.presets.bundled import default_model_files


@pytest.fixture
def no_loading(monkeypatch):
    """Fails the test if a command gets as far as loading its model."""

    def fail(*args, **kwargs):
        pytest.fail("the model was loaded")

    for module in ("embed", "export"):
        monkeypatch.setattr(f"elmo_tf.cli.{module}.load_model", fail)


def refused(argv, capsys, fragment):
    """``main(argv)`` exits 1 with one line of stderr holding ``fragment``."""
    assert main([str(a) for a in argv]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"elmo-tf {argv[0]}: error: ") and fragment in line, line
    return line


def test_the_bundled_model_is_an_input_of_every_command_that_loads_it(capsys, no_loading):
    """The check sees the package's own files as the model's inputs (nothing is written:
    the refusal comes before any work; a regression would be caught by the tests above on
    copies first)."""
    options, weights = default_model_files()
    for output in (options, weights):
        refused(["export", "tflite", output], capsys, f"{output}: is an input file")


@pytest.mark.parametrize(
    "argv, label",
    [
        (["embed", "{text}", "{out}"], "OUTPUT"),
        (["export", "tflite", "{out}"], "OUTFILE"),
        (["export", "saved-model", "{out}"], "OUTDIR"),
        (["build-vocab", "{text}", "-o", "{out}"], "--output"),
        (["train", "{text}", "--checkpoint-dir", "{out}"], "--checkpoint-dir"),
        (["train", "{text}", "--checkpoint-dir", "run", "--logdir", "{out}"], "--logdir"),
        (["dump-weights", "{run}", "{out}"], "OUTDIR"),
    ],
)
@pytest.mark.parametrize("name", ["", "-"])
def test_an_output_that_names_no_file_is_refused_before_any_work(
    argv, label, name, tmp_path, monkeypatch, capsys, no_loading
):
    """An empty name (it loaded the model, then failed; Beam wrote into the working
    directory) and ``-`` (standard output cannot take a file renamed into place; a file named
    ``-`` was written): one line naming the argument, nothing written."""
    if label == "--logdir" and not name:
        pytest.skip('--logdir "" writes no logs (its help says so)')
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    run = fake_run(tmp_path / "a_run")
    values = {"text": tmp_path / "in.txt", "out": name, "run": run}
    before = sorted(os.listdir(tmp_path))
    message = f"{label} is empty; name the" if not name else f"{label} is '-': elmo-tf writes no"
    refused([a.format(**values) for a in argv], capsys, message)
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize(
    "argv, label",
    [
        (["build-vocab", "-", "-o", "v.txt"], "FILE"),
        (["train", "-", "--checkpoint-dir", "run"], "FILE"),
        (["train", "in.txt", "--checkpoint-dir", "run", "--vocab", "-"], "--vocab"),
        (["evaluate", "a_run", "-"], "FILE"),
        (["evaluate", "-", "in.txt"], "MODEL"),
        (["dump-weights", "-", "out"], "CHECKPOINT"),
        (["embed", "in.txt", "out.hdf5", "--options", "-", "--weights", "w"], "--options"),
        (["export", "tflite", "out.tflite", "--model", "-"], "--model"),
        (["senses", "--examples", "-"], "--examples"),
    ],
)
def test_standard_input_is_read_only_where_a_command_reads_one_stream(
    argv, label, tmp_path, monkeypatch, capsys, no_loading
):
    """``-`` is never silently a file named ``-`` (``./-`` names one): these commands read
    files they may read again (a corpus on resume) or whole (a model); they say so."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    (tmp_path / "-").write_text("a b\n", encoding="utf-8")  # a file named -: not read
    fake_run(tmp_path / "a_run")
    before = sorted(os.listdir(tmp_path))
    refused(argv, capsys, f"{label} is '-': this command reads no standard input")
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("name", ["options.json", "vocab.txt", "weights.hdf5", "softmax.hdf5"])
@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_dump_weights_never_writes_over_the_run_it_reads(name, link, tmp_path, capsys):
    """A dump file in OUTDIR that is a link to a file of the run (--overwrite given): refused
    before TensorFlow, the run's file untouched (it was replaced through the link)."""
    run = fake_run(tmp_path / "run")
    source = run / ("ckpt-1.index" if name.endswith(".hdf5") else name)
    outdir = tmp_path / "dump"
    outdir.mkdir()
    if link == "symbolic":
        (outdir / name).symlink_to(source)
    else:
        os.link(source, outdir / name)
    before = source.read_bytes()
    argv = ["dump-weights", run, outdir, "--overwrite"]
    refused(argv, capsys, f"{outdir / name}: is an input file; dump into another directory")
    assert source.read_bytes() == before


def test_a_run_never_writes_into_its_corpus(tmp_path, capsys):
    """``train DIR --checkpoint-dir DIR`` (or a directory inside DIR): a later run would read
    the checkpoints as text; a run whose fixed files (vocab.txt, options.json) are its inputs
    would replace them. Refused before the corpus is read."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a b c\n" * 8, encoding="utf-8")
    for run in (corpus, corpus / "run", corpus / "deeper" / "run"):
        refused(
            ["train", corpus, "--checkpoint-dir", run],
            capsys,
            f"{run}: is{'' if run == corpus else ' inside'} the input directory {corpus}, "
            "whose every file is read (a later run would read this output as input); choose "
            "another checkpoint_dir",
        )
    (tmp_path / "run").mkdir()
    vocab = tmp_path / "run" / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\na\n", encoding="utf-8")
    argv = ["train", corpus, "--checkpoint-dir", tmp_path / "run", "--vocab", vocab]
    refused(argv, capsys, f"{vocab}: is an input file; the run writes it")
    logs = corpus / "logs"
    refused(
        ["train", corpus, "--checkpoint-dir", tmp_path / "run2", "--logdir", logs],
        capsys,
        f"{logs}: is inside the input directory {corpus}",
    )
    assert sorted(os.listdir(corpus)) == ["a.txt"]
    assert not (tmp_path / "run2").exists()


def test_a_vocabulary_never_goes_into_its_corpus_directory(tmp_path, capsys):
    """``build-vocab DIR -o DIR/vocab.txt``: a new file inside the directory it reads, which
    a later ``train DIR`` would read as text."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a b\n", encoding="utf-8")
    output = corpus / "vocab.txt"
    refused(["build-vocab", corpus, "-o", output], capsys, f"{output}: is inside the input dir")
    assert os.listdir(corpus) == ["a.txt"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["build-vocab", "in.txt", "-o", "v.txt", "--min-count", "0"], "--min-count must be a"),
        (["build-vocab", "in.txt", "-o", "v.txt", "--max-size", "2"], "--max-size must be an"),
        (
            ["train", "in.txt", "--checkpoint-dir", "run", "--vocab-min-count", "0"],
            "vocab_min_count must be a positive integer, got 0",
        ),
        (["senses", "--random-seeds", "101"], "--random-seeds must be an integer from 0 to 100"),
    ],
)
def test_vocabulary_bounds_name_the_flag_before_the_corpus_is_read(
    argv, message, tmp_path, monkeypatch, capsys
):
    """The flag is named (not the output file nor the Python argument), before the corpus is
    read."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_bytes(b"\xff not text: reading it would fail first\n")
    line = refused(argv, capsys, message)
    assert "v.txt" not in line.split("error: ", 1)[1] and "in.txt" not in line
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def test_an_export_with_no_version_names_none_that_nobody_gave(tmp_path, capsys, no_loading):
    """The highest version TF Serving reads is taken: no next one (it said the version
    2**63 was out of range, a version nobody gave)."""
    (tmp_path / "out" / str(2**63 - 1)).mkdir(parents=True)
    line = refused(["export", "saved-model", tmp_path / "out"], capsys, "holds version")
    assert "9,223,372,036,854,775,807, the highest TF Serving reads" in line
    assert "--version N" in line and "9223372036854775808" not in line
