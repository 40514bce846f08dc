"""What the benchmarks share: timing a call or a command, the machine's float32 matmul rate, the
process's memory, and the workload (a corpus file's sentences, random weights in a published
shape).

A script run as ``python benchmarks/NAME.py`` has this folder on ``sys.path``, so ``import
timing`` finds this module (the peer's virtualenv too: it needs the standard library alone,
TensorFlow only inside ``matmul_gflops``)::

    from timing import Timing, seconds, timed

    run = timed(lambda: model.embed(sentences), repeats=3)  # after one untimed call
    print(f"{tokens / run.median:,.0f} tokens/s ({run})")    # run: "1.234 s (1.200-1.300)"
    each = Timing(seconds(lambda s=s: model.embed([s])) for s in sentences)  # one call each
    first, median, third = each.quartiles()
"""

import os
import resource
import statistics
import subprocess
import sys
import time


class Timing:
    """The wall-clock seconds of repeated calls, in the order they ran (``seconds``)."""

    def __init__(self, seconds):
        self.seconds = tuple(seconds)
        if not self.seconds:
            raise ValueError("a timing needs at least one call")

    @property
    def median(self):
        return statistics.median(self.seconds)

    @property
    def best(self):
        return min(self.seconds)

    @property
    def worst(self):
        return max(self.seconds)

    def quartiles(self):
        """``(first quartile, median, third quartile)`` (the median thrice for one call)."""
        if len(self.seconds) < 2:
            return (self.median,) * 3
        first, _, third = statistics.quantiles(self.seconds, n=4)
        return first, self.median, third

    def __str__(self):
        return f"{self.median:.3f} s ({self.best:.3f}-{self.worst:.3f})"


def seconds(function):
    """The wall-clock seconds of one call of ``function()``."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def timed(function, repeats=3, warmups=1, rounds=1, report=None):
    """``function()`` called ``warmups`` times untimed (tracing, compiling, warming caches),
    then ``repeats`` times timed: a ``Timing``.

    ``rounds > 1`` times that many rounds of ``repeats`` and keeps the one with the lowest
    median: a fresh process's first rounds read slow (thread pools and pages warming up).
    ``report(i, seconds)``, if given, is called after each timed call (progress)."""
    for _ in range(warmups):
        function()
    best = None
    for _ in range(rounds):
        times = []
        for i in range(repeats):
            times.append(seconds(function))
            if report is not None:
                report(i, times[-1])
        if best is None or statistics.median(times) < best.median:
            best = Timing(times)
    return best


def run_seconds(argv, env=None):
    """The wall-clock seconds of the command ``argv``, from its start to its exit; exits this
    process with the command's last error lines if it fails."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stderr[-3000:]}")
    return elapsed


MATMUL_N = 2048


def matmul_gflops(n=MATMUL_N, repeats=7, rounds=3, library="tensorflow"):
    """This process's float32 matmul rate in GFLOP/s: ``n x n`` by ``n x n`` (in a
    ``tf.function``, reduced to a scalar inside the graph; or NumPy's ``@``), the best of
    ``rounds`` medians of ``repeats``."""
    if library == "numpy":
        import numpy as np

        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))

        def product():
            return a @ b
    else:
        import tensorflow as tf  # lazy: the peer's virtualenv imports this module too

        x, y = tf.random.normal([n, n], seed=1), tf.random.normal([n, n], seed=2)
        graph = tf.function(lambda: tf.reduce_sum(tf.matmul(x, y)))

        def product():
            return graph().numpy()

    return 2 * n**3 / timed(product, repeats, warmups=2, rounds=rounds).median / 1e9


def read_matmul_gflops(n=MATMUL_N):
    """``matmul_gflops(n)`` read in a fresh child process: TensorFlow's default thread pools
    (every core on one matmul, the machine's ceiling), whatever pools this process set."""
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--matmul", str(n)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    return float(child.stdout)


def peak_rss_mib():
    """This process's peak resident memory in MiB (``ru_maxrss``)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes on macOS, else KiB


def rss_now_mib():
    """This process's resident memory now in MiB (``VmRSS``), or ``None`` without /proc."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def read_sentences(path, limit=None):
    """The sentences of ``path`` (at most ``limit``), one whitespace-tokenised sentence per
    line, blank lines skipped; exits if it holds none."""
    sentences = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if limit and len(sentences) >= limit:
                break
            if line.split():
                sentences.append(line.split())
    if not sentences:
        sys.exit(f"no sentences in {path}")
    return sentences


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def random_weights(shape, directory):
    """``(options.json, weights.hdf5)`` of random weights in the published ``shape``
    (``small``, ``full``) under ``directory/shape``, written by ``tests/fixtures/make_weights.py``
    the first time (its report goes to stderr: stdout is for tables)."""
    target = os.path.join(directory, shape)
    files = os.path.join(target, "options.json"), os.path.join(target, "weights.hdf5")
    if not all(os.path.isfile(f) for f in files):
        print(f"writing random {shape} weights to {target}", file=sys.stderr, flush=True)
        make = os.path.join(ROOT, "tests", "fixtures", "make_weights.py")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
        subprocess.run(
            [sys.executable, make, shape, directory], check=True, stdout=sys.stderr, env=env
        )
    return files


if __name__ == "__main__":
    if sys.argv[1:2] == ["--matmul"]:
        print(matmul_gflops(int(sys.argv[2])))
