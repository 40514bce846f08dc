"""Running the README's and the docs' code blocks as written (tests/integration/test_docs_*.py).
A fenced block in ``python``, ``bash`` or ``console`` is something a user copies, so the line
before it must hold one directive:

=====================================  ===================================================
``<!-- test: run -->``                 run it
``<!-- test: run fresh -->``           python: in a process of its own (for a block that
                                       sets the environment before importing TensorFlow)
``<!-- test: run background -->``      bash: a server, left running for the blocks after it
``<!-- test: run needs=EXTRA -->``     as ``run``; skipped, naming the extra, without it
``<!-- test: run needs-cpu=bfloat16 -->``  as ``run``; skipped on a CPU without AVX-512 BF16
                                       or AMX, or where oneDNN is kept from it
``<!-- test: skip REASON -->``         cannot run here (Docker, a GPU, a cluster, the
                                       network, hours): skipped with REASON
=====================================  ===================================================

A ``text`` block right after a run block, marked ``<!-- test: output -->``, is what that block
prints: the test compares it. A block without a directive fails, so a new example cannot go
untested by accident.

A document's blocks run in order, in a directory that holds what a clone holds besides the
package (``CLONE``) and the files the document says it starts from (``SETUP``), with
``elmo-tf`` on the PATH. Documents that start from the same files form a group: one directory
and one Python process, which runs their python blocks (each in a fresh namespace, as a user's
session would) and their ``elmo-tf`` commands (``Session``), so TensorFlow starts once a group,
not once a command.
The blocks are run by two test files, a group of documents each, so that the two halves run on
two workers; ``docs_sessions`` (a fixture of ``support.fixtures``) opens a file's groups.
The ports 8500 and 8501 in a document become free ports, so that tests never collide, and the
published models come from a loopback mirror (``model_mirror``: random weights in the ``small``
shape), never from the internet.
"""

import dataclasses
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from elmo_tf import precision
from elmo_tf.system.extras import EXTRAS
from support.extras import installed
from support.paths import ROOT

DOCUMENTS = [
    "README.md",
    "docs/models.md",
    "docs/migration.md",
    "docs/backends.md",
    "docs/beam.md",
    "docs/performance.md",
    "docs/robustness.md",
    "serving/README.md",
    "export/README.md",
    "elmo_tf/presets/sotu/MODEL_CARD.md",
]
# The documents each test file runs (tests/integration/test_docs_<half>.py): together, all.
DOCUMENTS_BY_TEST_FILE = {
    "readme": (
        "README.md",
        "serving/README.md",
        "export/README.md",
        "docs/performance.md",
        "docs/robustness.md",
        "elmo_tf/presets/sotu/MODEL_CARD.md",
    ),
    "guides": ("docs/models.md", "docs/migration.md", "docs/backends.md", "docs/beam.md"),
}
COMMAND_LANGUAGES = ("python", "bash", "console")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
DIRECTIVE = re.compile(r"<!-- test: (.*?) -->\s*$")
BLOCK_TIMEOUT = 600


@dataclasses.dataclass
class Block:
    document: str
    index: int
    line: int
    language: str
    code: str
    directive: str | None

    @property
    def id(self):
        return f"{self.document}:{self.line}"

    @property
    def words(self):
        return (self.directive or "").split()


def read_blocks(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    blocks = []
    for index, match in enumerate(FENCE.finditer(text)):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.search(before)
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(
            Block(
                document,
                index,
                line,
                match.group(1),
                match.group(2),
                directive.group(1).strip() if directive else None,
            )
        )
    return blocks


BLOCKS = [block for document in DOCUMENTS for block in read_blocks(document)]
COMMAND_BLOCKS = [b for b in BLOCKS if b.language in COMMAND_LANGUAGES]


# ------------------------------------------------------------------ documents' starting files


def _official_small_files(path, small_files):
    """docs/migration.md's starting directory: official-shape files (random weights in the
    published ``small`` shape), a simple_elmo-style directory and a sentence file."""
    options, weights = small_files
    shutil.copy(options, path / "options.json")
    shutil.copy(weights, path / "weights.hdf5")
    (path / "model_dir").mkdir()
    shutil.copy(options, path / "model_dir" / "options.json")
    shutil.copy(weights, path / "model_dir" / "model.hdf5")
    (path / "sentences.txt").write_text("The cat sat .\n\nHello world !\n", encoding="utf-8")


def _a_corpus(path, small_files):
    """docs/beam.md's starting directory: a small corpus of text files."""
    corpus = path / "corpus"
    corpus.mkdir()
    text = (ROOT / "examples" / "sentences.txt").read_text(encoding="utf-8")
    (corpus / "a.txt").write_text(text, encoding="utf-8")
    (corpus / "b.txt").write_text("One more line .\n\nAnd a last one .\n", encoding="utf-8")


SETUP = {
    "docs/migration.md": _official_small_files,
    "docs/backends.md": _official_small_files,
    "docs/models.md": _official_small_files,
    "docs/beam.md": _a_corpus,
}
# What a clone holds besides the package and the tests, copied into every document's directory
# (commands in the docs run from the repository's root).
CLONE = ("examples", "serving", "benchmarks", "export", "scripts")


# ------------------------------------------------------------------ running a document


# A line TensorFlow's or LiteRT's native code writes on its own: absl/glog, and the few
# prefix-less ones (elmo_tf.system.native_logs drops them).
NATIVE_LINE = re.compile(
    r"^(?:[IWEF]\d{4} \d\d:\d\d:\d\d.*|WARNING: All log messages before absl.*"
    r"|To enable the following instructions.*|INFO: Created TensorFlow Lite.*)$",
    re.MULTILINE,
)


# A block that imports the package (which keeps TensorFlow's start-up quiet).
USES_ELMO_TF = re.compile(r"^\s*(?:import|from) elmo_tf\b", re.MULTILINE)


class Session:
    """A group of documents that start from the same files (the same ``SETUP``): one
    directory, one Python process that runs their python blocks and their ``elmo-tf``
    commands, and the background servers of the document that runs now.

    An ``elmo-tf`` command in a bash block reaches the group's Python process through a
    small ``elmo-tf`` on the PATH (``SHIM``): the process runs ``elmo_tf.cli.main.main``
    with the command's arguments, working directory and environment, and the shim prints
    what it printed and exits with its status. The block's text is what a user types; what
    only a process of its own shows (signals, exit codes of the console script, the native
    log filter) is tested in test_cli.py. A server started in the background is a real
    process of its own.
    """

    def __init__(self, directory):
        self.directory = directory
        # the local mirror (docs/models.md), the gRPC and the REST port
        self.ports = {8000: _free_port(), 8500: _free_port(), 8501: _free_port()}
        self.kernel = None
        self.background = []
        self.document = None
        self.failed = {}  # document -> the id of its block that failed
        bin_dir = os.path.dirname(sys.executable)
        self.env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        self.env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        self.env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the docs' commands run as a user's do

    def code(self, block):
        code = block.code
        for documented, free in self.ports.items():
            code = re.sub(rf"\b{documented}\b", str(free), code)
        return code

    def run(self, block):
        if block.document != self.document:  # a document's servers end with it
            self._stop_background()
            self.document = block.document
        code = self.code(block)
        if block.language == "python":
            if "fresh" in block.words:
                return self._subprocess([sys.executable, "-c", code], self.env, code)
            return self._kernel().run(code)
        if block.language == "console":
            code = "\n".join(line[2:] for line in code.splitlines() if line.startswith("$ "))
        if "background" in block.words:
            return self._start_background(code)
        return self._subprocess(["bash", "-euo", "pipefail", "-c", code], self._kernel().env, code)

    def _subprocess(self, argv, env, code):
        done = subprocess.run(
            argv,
            cwd=self.directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
        )
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
        if USES_ELMO_TF.search(code):  # Python as a user runs it: no native log line
            native = NATIVE_LINE.findall(done.stderr)
            assert not native, f"native log lines on stderr: {native}"
        return done.stdout

    def _kernel(self):
        if self.kernel is None:
            self.kernel = _Kernel(self.directory, self.env)
        return self.kernel

    def _start_background(self, code):
        log = open(self.directory / f".background-{len(self.background)}.log", "w+")  # noqa: SIM115
        process = subprocess.Popen(
            ["bash", "-c", f"exec {code.strip()}"],
            cwd=self.directory,
            env=self.env,  # the real elmo-tf: a server is a process of its own
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.background.append((process, log))
        ports = [p for p in self.ports.values() if re.search(rf"\b{p}\b", code)]
        deadline = time.monotonic() + 120
        while not all(_accepts(port) for port in ports):
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"the server did not start:\n{log.read()[-3000:]}")
            time.sleep(0.2)
        return ""

    def _stop_background(self):
        for process, log in self.background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            log.close()
        self.background = []

    def close(self):
        if self.kernel is not None:
            self.kernel.close()
        self._stop_background()


# The group's Python process. Its main thread waits for two kinds of work: a block (the
# file named by a line on stdin: run in a fresh namespace, its output in FILE.out, then
# FILE.done holding the traceback if it failed) and an elmo-tf command (a connection on the
# Unix socket in argv[1]: a JSON request {argv, cwd, env}, answered {status, stdout,
# stderr}). Work runs on the main thread, where a command can install signal handlers.
KERNEL = r"""
import contextlib, io, json, os, selectors, socket, sys, traceback

def run_block(path):
    error = ""
    with open(path + ".out", "w") as out, contextlib.redirect_stdout(out):
        try:
            exec(compile(open(path).read(), path, "exec"), {"__name__": "__main__"})
        except BaseException:
            error = traceback.format_exc()
    with open(path + ".done", "w") as done:
        done.write(error)

def run_command(connection):
    with connection, connection.makefile("rwb") as stream:
        request = json.loads(stream.readline())
        cwd, environ = os.getcwd(), dict(os.environ)
        out, err = io.StringIO(), io.StringIO()
        try:
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            from elmo_tf.cli.main import main
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    status = main(request["argv"])
                except SystemExit as e:
                    status = e.code if isinstance(e.code, int) else int(e.code is not None)
                except BaseException:
                    traceback.print_exc()
                    status = 1
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(environ)
        answer = {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}
        stream.write(json.dumps(answer).encode() + b"\n")

listener = socket.socket(socket.AF_UNIX)
listener.bind(sys.argv[1])
listener.listen()
selector = selectors.DefaultSelector()
selector.register(sys.stdin, selectors.EVENT_READ)
selector.register(listener, selectors.EVENT_READ)
while True:
    for key, _ in selector.select():
        if key.fileobj is listener:
            run_command(listener.accept()[0])
            continue
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        run_block(line.strip())
"""

# The elmo-tf a bash block finds on its PATH: it hands its command to the group's process.
SHIM = r"""
import json, os, socket, sys
with socket.socket(socket.AF_UNIX) as s:
    s.connect(os.environ["ELMO_TESTS_DOCS_KERNEL"])
    with s.makefile("rwb") as stream:
        request = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}
        stream.write(json.dumps(request).encode() + b"\n")
        stream.flush()
        answer = json.loads(stream.readline())
sys.stdout.write(answer["stdout"])
sys.stderr.write(answer["stderr"])
sys.exit(answer["status"])
"""


class _Kernel:
    def __init__(self, directory, env):
        self.directory = directory
        self.count = 0
        self.log = open(directory / ".python-session.log", "w+")  # noqa: SIM115
        # A short path: a Unix socket's name holds at most 107 bytes.
        self.socket_dir = tempfile.mkdtemp(prefix="elmo-docs-")
        address = os.path.join(self.socket_dir, "kernel")
        shim_dir = directory / ".shim"
        shim_dir.mkdir()
        (shim_dir / "elmo-tf").write_text(f"#!{sys.executable}\n{SHIM}", encoding="utf-8")
        (shim_dir / "elmo-tf").chmod(0o755)
        self.env = dict(env, ELMO_TESTS_DOCS_KERNEL=address)
        self.env["PATH"] = str(shim_dir) + os.pathsep + env["PATH"]
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-c", KERNEL, address],
            cwd=directory,
            env=env,
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not os.path.exists(address):  # listening: commands may come
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                pytest.fail(f"the Python session did not start:\n{self.log.read()[-4000:]}")
            time.sleep(0.02)

    def run(self, code):
        self.count += 1
        path = self.directory / f".block-{self.count}.py"
        path.write_text(code, encoding="utf-8")
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        done = pathlib.Path(f"{path}.done")
        deadline = time.monotonic() + BLOCK_TIMEOUT
        while not done.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                pytest.fail(f"the Python session ended:\n{self.log.read()[-4000:]}")
            time.sleep(0.05)
        error = done.read_text(encoding="utf-8")
        assert not error, error[-4000:]
        return pathlib.Path(f"{path}.out").read_text(encoding="utf-8")

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def _untracked(directory, names):
    """What ``git`` ignores, left out of a document's copy of the clone."""
    return {n for n in names if n in ("__pycache__", "models", "results") or n.endswith(".pyc")}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def open_sessions(tmp_path_factory, model_mirror, small_official_files):
    """Yields ``session(document)``, the ``Session`` of each group of documents (those with
    the same ``SETUP``), opened on first use; published models come from the loopback mirror.
    Closes them at the end, then checks that git ignores what their commands wrote."""
    opened = {}

    def session(document):
        setup = SETUP.get(document)
        if setup not in opened:
            directory = tmp_path_factory.mktemp(re.sub(r"\W", "_", document))
            for name in CLONE:
                shutil.copytree(ROOT / name, directory / name, ignore=_untracked)
            if setup is not None:
                setup(directory, small_official_files)
            opened[setup] = Session(directory)
            opened[setup].given = {p.name for p in directory.iterdir()}
            opened[setup].env["ELMO_TF_MODEL_BASE_URL"] = model_mirror.base_url
        return opened[setup]

    yield session
    for session_ in opened.values():
        session_.close()
    # What the docs' commands write, a user writes in the checkout: git must ignore it.
    for session_ in opened.values():
        written = [
            p.name + ("/" if p.is_dir() else "")
            for p in session_.directory.iterdir()
            if p.name not in session_.given and not p.name.startswith(".")
        ]
        kept = _not_ignored(written)
        assert not kept, f"the docs' commands leave files git would track: {kept}"


def _not_ignored(names):
    """Those of ``names`` (top-level paths of a checkout) that the repository does not ignore."""
    if not names:
        return []
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(names),
        capture_output=True,
        text=True,
    )
    ignored = set(done.stdout.splitlines())
    return [name for name in names if name not in ignored]


def runnable(documents):
    """The blocks of ``documents`` that run, in order."""
    return [b for b in COMMAND_BLOCKS if b.document in documents and b.words[:1] == ["run"]]


OUTPUTS = {BLOCKS[BLOCKS.index(b) - 1].id: b for b in BLOCKS if b.directive == "output"}


def run_block(block, sessions):
    """Runs ``block`` in its document's session and compares what it prints with the
    output block after it; skipped without its extra or after a failed block before it."""
    for word in block.words:
        if word.startswith("needs=") and not installed(*EXTRAS[word[6:]]):
            pytest.skip(f"needs the [{word[6:]}] extra")
        if word == "needs-cpu=bfloat16" and not precision.runs("bfloat16", "tensorflow"):
            pytest.skip("needs a CPU with AVX-512 BF16 or AMX")
    session = sessions(block.document)
    if block.document in session.failed:
        pytest.skip(
            f"an earlier block of {block.document} failed ({session.failed[block.document]})"
        )
    try:
        printed = session.run(block)
    except BaseException:
        session.failed[block.document] = block.id
        raise
    expected = OUTPUTS.get(block.id)
    if expected is not None:
        assert printed.strip() == expected.code.strip()
