"""benchmarks/gpu.py, the measurement a GPU machine runs first, checked on the CPU (``--device
cpu``, the tiny shape): it runs each backend it finds, times the Keras model against the
hand-written JAX ``lax.scan``, which computes the same numbers, prints one table, and never
imports TensorFlow (a GPU machine has none)."""

import os
import subprocess
import sys

from support.extras import installed
from support.paths import ROOT


def test_runs_on_the_cpu_with_the_tiny_shape(tmp_path):
    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--device", "cpu",
            "--shape", "tiny", "--batch-sizes", "1,3", "--precisions", "fp32,bf16",
            "--repeats", "1", "--json", str(tmp_path / "rows.json")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| backend | what | precision | B | tokens/s | ms a call |")
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in table[1:]]
    jax_rows = {(r[1], r[2], r[3]): r for r in rows if r[0] == "jax"}
    for precision in ("fp32", "bf16"):
        for batch in ("1", "3"):
            keras_row, scan = (
                jax_rows[("keras", precision, batch)],
                jax_rows[("lax.scan", precision, batch)],
            )
            assert float(keras_row[4].replace(",", "")) > 0
            assert keras_row[6].endswith("x lax.scan")
            # The hand-written scan computes the model's numbers: within float32 round-off,
            # bfloat16's in bfloat16.
            assert float(scan[7]) <= (1e-5 if precision == "fp32" else 0.1), scan
    if installed("torch"):
        assert {(r[1], r[2]) for r in rows if r[0] == "torch"} >= {
            ("keras", "fp32"),
            ("keras", "bf16"),
        }
    assert "- TensorFlow imported: no" in done.stdout
