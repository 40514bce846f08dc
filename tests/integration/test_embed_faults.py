"""``elmo-tf embed`` under faults: nothing lost, nothing left behind."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import h5py
import pytest
from support.paths import TINY
from support.special_files import special_file

import elmo_tf
from elmo_tf.cli import stop_signals
from elmo_tf.cli.main import main
from elmo_tf.system import files

MODEL = ["--options", str(TINY / "options.json"), "--weights", str(TINY / "weights.hdf5")]


PREVIOUS = b"a previous output that must survive"


def _corpus(path, lines, tokens_per_line=10):
    words = " ".join(f"w{i}" for i in range(tokens_per_line))
    path.write_text("".join(f"{words} {n}\n" for n in range(lines)), encoding="utf-8")
    return path


def _embed_subprocess(argv, preexec=""):
    """Runs ``elmo-tf`` (its console entry point) in a child; ``preexec`` runs first."""
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        {preexec}
        sys.argv = ["elmo-tf", *{argv!r}]
        from elmo_tf.cli.main import console_main
        console_main()
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("elmo-tf embed: ")]


def test_a_full_disk_is_one_line_and_keeps_the_previous_output(tmp_path):
    source = _corpus(tmp_path / "in.txt", lines=300)  # about 1.2 MB of --all output
    output = tmp_path / "out.hdf5"
    output.write_bytes(PREVIOUS)
    # A file size limit fails writes with EFBIG as a full disk fails them with ENOSPC.
    limit = "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); " + (
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))"
    )
    child = _embed_subprocess(["embed", str(source), str(output), *MODEL], preexec=limit)
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 1, stderr[-2000:]
    # one line, the system's words, and nothing else (no h5py teardown tracebacks)
    assert stderr.splitlines() == [
        f"elmo-tf embed: error: {output}: cannot write the embeddings (File too large); the "
        "partial file was removed and any previous file of that name is untouched"
    ]
    assert output.read_bytes() == PREVIOUS
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.hdf5"]


def test_sigterm_removes_the_partial_file_at_once(tmp_path):
    source = _corpus(tmp_path / "in.txt", lines=20_000)
    output = tmp_path / "out.hdf5"
    output.write_bytes(PREVIOUS)
    child = _embed_subprocess(["embed", str(source), str(output), *MODEL, "--batch-size", "8"])
    deadline = time.monotonic() + 120
    while not any(n.endswith(".tmp") for n in os.listdir(tmp_path)):
        assert child.poll() is None and time.monotonic() < deadline, "no temporary appeared"
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 143, stderr[-2000:]
    assert _error_lines(stderr) == ["elmo-tf embed: error: terminated"]
    assert output.read_bytes() == PREVIOUS
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.hdf5"]


@pytest.fixture
def stop_handlers(monkeypatch):
    """``elmo-tf``'s SIGTERM and SIGINT handlers in this process, for one test."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    monkeypatch.setattr(stop_signals, "_received", None)
    # Python's defaults first: install() keeps a signal that the test process inherited as
    # ignored (a CI job started in the background) ignored.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stop_signals.install()
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _signal_after_one_batch(monkeypatch, sig, what_happens):
    """``embed_batches`` that raises ``sig`` after its first batch; ``what_happens`` to the
    exception the handler raises: ``"mangled"`` (a C extension's call back turned it into a
    ``TypeError``, as TensorFlow's ``nest`` did in CI) or ``"swallowed"`` (as in a ``__del__``).
    """
    real = elmo_tf.ELMo.embed_batches

    def signalled(self, *args, **kwargs):
        batches = real(self, *args, **kwargs)
        yield next(batches)
        try:
            signal.raise_signal(sig)  # the handler runs before this returns
        except BaseException as e:
            if what_happens == "mangled":
                raise TypeError("<built-in function __import__> returned a result") from e
        yield from batches

    monkeypatch.setattr(elmo_tf.ELMo, "embed_batches", signalled)


@pytest.mark.parametrize("what_happens", ["mangled", "swallowed"])
@pytest.mark.parametrize(
    "sig, status, message",
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_stop_signal_ends_the_command_whatever_became_of_its_exception(
    tmp_path, capsys, monkeypatch, stop_handlers, sig, status, message, what_happens
):
    source = _corpus(tmp_path / "in.txt", lines=4)
    output = tmp_path / "out.hdf5"
    output.write_bytes(PREVIOUS)
    _signal_after_one_batch(monkeypatch, sig, what_happens)
    argv = ["embed", str(source), str(output), *MODEL, "--batch-size", "1"]
    assert main(argv) == status
    assert _error_lines(capsys.readouterr().err) == [f"elmo-tf embed: error: {message}"]
    assert output.read_bytes() == PREVIOUS
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.hdf5"]


def test_temporaries_of_dead_processes_are_removed_by_the_next_run(tmp_path, capsys):
    source = _corpus(tmp_path / "in.txt", lines=3)
    output = tmp_path / "out.hdf5"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True).stdout.strip()  # fmt: skip
    stale = tmp_path / f".out.hdf5.{dead}-0badf00d.tmp"
    stale.write_bytes(b"left by a SIGKILLed run")
    alive = tmp_path / f".out.hdf5.{os.getpid()}-0000cafe.tmp"  # a live writer's: kept
    alive.write_bytes(b"being written")
    assert main(["embed", str(source), str(output), *MODEL]) == 0
    assert not stale.exists() and alive.exists()
    with h5py.File(output, "r") as f:
        assert f["0"].shape == (3, 11, 32)
    files.remove(alive)


def test_a_runaway_line_is_refused_by_name(tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("short line\n" + "x " * 50 + "\nend\n", encoding="utf-8")
    argv = ["embed", str(source), str(tmp_path / "o.hdf5"), *MODEL]
    assert main([*argv, "--max-tokens-per-line", "20"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"elmo-tf embed: error: {source}: line 2 has 50 tokens, more than the limit of 20 per "
        "line (split it, or raise max_tokens_per_line)"
    ]
    assert os.listdir(tmp_path) == ["in.txt"]
    assert main(argv) == 0  # within the default limit


ENDLESS = {
    "zero device": (
        lambda d: special_file(d / "zero", "zero device"),
        "line 1 is longer than 1,048,576 bytes",
    ),
    "one line": (lambda d: _write(d / "one_line.txt", b"w " * 3_000_000), "line 1 is longer than"),
    "a late line": (
        lambda d: _write(d / "late.txt", b"fine .\n" * 10 + b"x" * 2_000_000),
        "line 11 is",
    ),
}


def test_an_endless_or_newline_free_input_is_refused_in_bounded_memory(tmp_path):
    """A device, or a file without newlines, is refused as soon as a line passes the byte
    bound; the process never holds more than about one line. Each case is one ``embed`` of a
    child process held to 2 GB of address space beyond what it has when it starts (a
    regressed bound fails there, not in the test's process)."""
    cases = {name: (make(tmp_path), message) for name, (make, message) in ENDLESS.items()}
    argvs = [["embed", str(source), str(tmp_path / f"{name}.hdf5"), *MODEL]
             for name, (source, _) in cases.items()]  # fmt: skip
    script = textwrap.dedent(
        f"""
        import contextlib, io, json, resource, sys
        from elmo_tf.cli.main import main
        used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (2 << 30), resource.RLIM_INFINITY))
        answers = []
        for argv in {argvs!r}:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                answers.append([main(argv), err.getvalue()])
        print(json.dumps(answers))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for (name, (source, message)), (status, stderr) in zip(cases.items(), json.loads(done.stdout)):
        assert status == 1, (name, stderr[-2000:])
        (line,) = stderr.splitlines()
        assert message in line and str(source) in line, (name, line)
        assert not (tmp_path / f"{name}.hdf5").exists()


def _write(path, data):
    path.write_bytes(data)
    return path


def test_embed_reads_a_stream_in_windows(tmp_path, monkeypatch, capsys):
    """Lines are embedded a window at a time: the same file as one window, datasets and
    sentence_to_index alike; a pipe (no line count ahead) works too."""
    from elmo_tf.formats import embedding_file

    source = _corpus(tmp_path / "in.txt", lines=7, tokens_per_line=3)
    assert main(["embed", str(source), str(tmp_path / "whole.hdf5"), *MODEL]) == 0
    monkeypatch.setattr(embedding_file, "WINDOW_LINES", 3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat {source} > {fifo}"])
    assert main(["embed", str(fifo), str(tmp_path / "windows.hdf5"), *MODEL]) == 0
    writer.wait(timeout=60)
    with h5py.File(tmp_path / "whole.hdf5") as a, h5py.File(tmp_path / "windows.hdf5") as b:
        assert sorted(a) == sorted(b)
        assert a["sentence_to_index"][0] == b["sentence_to_index"][0]
        for name in a:
            if name != "sentence_to_index":
                assert a[name].shape == b[name].shape
    assert "7 sentences, " in capsys.readouterr().err
