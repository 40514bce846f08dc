"""Runs the fuzz targets with atheris (libFuzzer for Python; ``pip install -e ".[dev]"``).

A target is a module ``fuzz/NAME.py`` that defines, at its top level:

- ``TestOneInput(data)``: feeds ``data`` (bytes) to one parser of bytes from outside and asserts
  its contract: a result, or one of our errors, never another exception;
- ``seed_corpus()``: a list of valid inputs (bytes), made when called: the fuzzer starts from
  them, and ``tests/unit/test_fuzz_targets.py`` runs them through ``TestOneInput`` in the
  normal suite, so that a target that rots fails there;
- optionally ``DICTIONARY``: byte strings the fuzzer inserts whole (a format's keywords),
  given to libFuzzer as its ``-dict``.

A target whose optional extra is missing raises ``elmo_tf.system.extras.MissingExtraError`` when
imported (``extras.require``); every module here that defines ``TestOneInput`` is a target.

Each target runs in a child process of its own (libFuzzer exits when it is done), with a
fixed seed, for a number of seconds or of runs, its memory bounded (``RLIMIT_AS``: the address
space it has once its imports are done, plus ``--memory-mb``; and libFuzzer's RSS limit) and
its time per input (libFuzzer's ``-timeout``). Only elmo_tf's own modules are instrumented for
coverage. A crashing input (an exception, a timeout, memory past the bound) is saved as
``fuzz/crashes/NAME/crash-<sha1>`` (``timeout-``, ``oom-``), to become a regression test::

    python fuzz/run.py --list
    python fuzz/run.py --seconds 60                   # every target, a minute each
    python fuzz/run.py rest_body --runs 100000 --seed 7
    python fuzz/run.py --reproduce fuzz/crashes/rest_body/crash-...  rest_body

It prints one line per target: seconds, executions, crashes.
"""

import argparse
import ast
import importlib.util
import os
import pathlib
import re
import resource
import subprocess
import sys
import tempfile
import time

FUZZ = pathlib.Path(__file__).resolve().parent
CRASHES = FUZZ / "crashes"
DEFAULT_SECONDS = 60
DEFAULT_SEED = 1
DEFAULT_MEMORY_MB = 2048  # address space a target may take past its imports
DEFAULT_INPUT_SECONDS = 10  # libFuzzer's -timeout: one input
RSS_LIMIT_MB = 4096  # libFuzzer's -rss_limit_mb: the whole process, TensorFlow included
ARTIFACTS = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def targets():
    """``{name: path}`` of every target module in ``fuzz/``, by name (found in its source,
    without importing it)."""
    found = {}
    for path in sorted(FUZZ.glob("*.py")):
        if path.name.startswith("_") or path.resolve() == pathlib.Path(__file__).resolve():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if any(isinstance(n, ast.FunctionDef) and n.name == "TestOneInput" for n in tree.body):
            found[path.stem] = path
    return found


def load(name):
    """The target module ``name`` (``fuzz/NAME.py``), imported under the name ``fuzz_NAME``."""
    path = targets()[name]
    spec = importlib.util.spec_from_file_location(f"fuzz_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="TARGET", help="targets (default: all)")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=int, help=f"per target (default {DEFAULT_SECONDS})")
    budget.add_argument("--runs", type=int, help="inputs per target")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="libFuzzer's -seed")
    parser.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB)
    parser.add_argument("--input-seconds", type=int, default=DEFAULT_INPUT_SECONDS)
    parser.add_argument("--reproduce", metavar="FILE", help="run TARGET on FILE once")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args, libfuzzer = parser.parse_known_args(argv)
    found = targets()
    if args.list:
        print("\n".join(found))
        return 0
    names = args.names or list(found)
    unknown = [n for n in names if n not in found]
    if unknown:
        parser.error(f"no target {unknown[0]!r}; the targets: {', '.join(found)}")
    if args.reproduce:
        (name,) = names
        load(name).TestOneInput(pathlib.Path(args.reproduce).read_bytes())
        print(f"{name}: {args.reproduce} runs without a crash")
        return 0
    if args.child:
        (name,) = names
        return _fuzz(name, libfuzzer, args.memory_mb)
    if args.runs is None and args.seconds is None:
        args.seconds = DEFAULT_SECONDS
    budget = [f"-runs={args.runs}"] if args.runs is not None else []
    budget += [f"-max_total_time={args.seconds}"] if args.seconds is not None else []
    flags = [
        f"-seed={args.seed}",
        *budget,
        f"-timeout={args.input_seconds}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        "-print_final_stats=1",
        *libfuzzer,
    ]
    print(f"{'target':<20} {'seconds':>8} {'executions':>12} {'crashes':>8}")
    failed = 0
    for name in names:
        seconds, executions, crashes = _run_child(name, flags, args.memory_mb)
        failed += crashes
        print(f"{name:<20} {seconds:>8.0f} {executions:>12,} {crashes:>8}", flush=True)
    return 1 if failed else 0


def _run_child(name, flags, memory_mb):
    """Fuzzes ``name`` in a child process: ``(seconds, executions, crashes)``."""
    artifacts = CRASHES / name
    artifacts.mkdir(parents=True, exist_ok=True)
    before = set(artifacts.iterdir())
    log = FUZZ / "crashes" / f"{name}.log"
    command = [sys.executable, __file__, name, "--child", f"--memory-mb={memory_mb}", *flags]
    command.append(f"-artifact_prefix={artifacts}{os.sep}")
    started = time.monotonic()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    with open(log, "wb") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    seconds = time.monotonic() - started  # with the imports, if libFuzzer says nothing else
    text = log.read_text(encoding="utf-8", errors="replace")
    done_line = re.findall(r"^Done \d+ runs in (\d+) second", text, re.M)
    if done_line:
        seconds = int(done_line[-1])
    executions = re.findall(r"stat::number_of_executed_units: (\d+)", text)
    if not executions:  # a crash ends libFuzzer before its final stats
        executions = re.findall(r"^#(\d+)\s", text, re.M)
    new = [p for p in set(artifacts.iterdir()) - before if p.name.startswith(ARTIFACTS)]
    crashes = len(new) or (done.returncode != 0)
    for path in new:
        print(f"  {name}: {path} (log: {log})", file=sys.stderr)
    if done.returncode != 0 and not new:
        print(f"  {name}: exit status {done.returncode} (log: {log})", file=sys.stderr)
    return seconds, int(executions[-1]) if executions else 0, int(crashes)


def _fuzz(name, flags, memory_mb):
    """The child: imports the target (elmo_tf's modules instrumented), writes its seed corpus,
    bounds its memory, and hands it to libFuzzer, which exits when done."""
    import atheris  # lazy: the parent and the seed corpus test need no atheris

    with atheris.instrument_imports(include=["elmo_tf"]):
        module = load(name)
    corpus = pathlib.Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    for index, seed in enumerate(module.seed_corpus()):
        (corpus / f"seed-{index}").write_bytes(seed)
    words = getattr(module, "DICTIONARY", ())
    if words:
        dictionary = corpus.with_name(corpus.name + ".dict")
        # libFuzzer's format: one quoted string a line, bytes as \xNN
        lines = ['"' + "".join(f"\\x{b:02x}" for b in word) + '"' for word in words]
        dictionary.write_text("\n".join(lines) + "\n", encoding="ascii")
        flags = [*flags, f"-dict={dictionary}"]
    used = _address_space()
    if used is not None:
        limit = used + memory_mb * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    atheris.Setup([sys.argv[0], *flags, str(corpus)], module.TestOneInput)
    atheris.Fuzz()
    return 0


def _address_space():
    """This process's address space in bytes (``VmSize``), or ``None`` off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            match = re.search(r"^VmSize:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


if __name__ == "__main__":
    sys.exit(main())
