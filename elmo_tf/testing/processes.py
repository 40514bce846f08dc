"""Measuring servers from outside: a server in a child process, its CPU, memory and thread
count, percentiles, tables (``serving/loadtest.py`` and the benchmarks use these)."""

import collections
import os
import re
import signal
import subprocess
import threading

STARTUP_SECONDS = 120

ProcStats = collections.namedtuple("ProcStats", "cpu_seconds rss_mib threads")


def proc_stats(pid):
    """``ProcStats(cpu seconds, RSS MiB, threads)`` of process ``pid`` from ``/proc/PID/stat``
    (user + system time) and ``/proc/PID/status`` (``VmRSS``, ``Threads``); Nones if unknown."""
    if pid is None:
        return ProcStats(None, None, None)
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            status = f.read()
    except (OSError, ValueError, IndexError):
        return ProcStats(None, None, None)
    rss = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    threads = re.search(r"^Threads:\s+(\d+)", status, re.M)
    return ProcStats(
        cpu,
        int(rss.group(1)) / 1024 if rss else None,
        int(threads.group(1)) if threads else None,
    )


def peak_rss_mib(pid):
    """The highest resident memory process ``pid`` has had (``VmHWM`` of ``/proc/PID/status``,
    in MiB), or ``None`` if unknown."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            match = re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return None
    return int(match.group(1)) / 1024 if match else None


def percentile(values, q):
    """The ``q``-th percentile of sorted ``values``, interpolated linearly between the two
    nearest ranks (numpy's default method); ``None`` if there are none."""
    if not values:
        return None
    position = q / 100 * (len(values) - 1)
    below = int(position)
    above = min(below + 1, len(values) - 1)
    return values[below] + (values[above] - values[below]) * (position - below)


class ServerProcess:
    """A server in a child process (``command``): its first stdout
    line, read within ``startup_seconds``, is ``first_line`` (``""`` if none came). Stopped on
    exit, or by ``stop()``: by SIGTERM (``stop_by="sigterm"``) or by closing its stdin
    (``stop_by="stdin"``), then killed if it has not exited within 60 s. Its stderr goes to
    ``stderr`` (a file, or nowhere), its environment is ``env`` (else ours), its working
    directory ``cwd`` (else ours)."""

    def __init__(
        self,
        command,
        stop_by="sigterm",
        startup_seconds=STARTUP_SECONDS,
        stderr=subprocess.DEVNULL,
        env=None,
        cwd=None,
    ):
        if stop_by not in ("sigterm", "stdin"):
            raise ValueError(f"stop_by must be 'sigterm' or 'stdin', not {stop_by!r}")
        self.stop_by = stop_by
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if stop_by == "stdin" else None,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            cwd=cwd,
        )
        self.pid = self.process.pid
        lines = []
        reader = threading.Thread(
            target=lambda: lines.append(self.process.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(startup_seconds)
        self.first_line = lines[0] if lines else ""

    def stop(self):
        if self.process.poll() is None:
            try:
                if self.stop_by == "stdin":
                    self.process.stdin.close()
                else:
                    self.process.send_signal(signal.SIGTERM)
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def format_table(columns, rows, style="plain"):
    """``rows`` (dicts) as a table of ``columns``, each ``(header, key, format)`` (a ``None``
    value is ``n/a``): ``style="plain"``, right-aligned text columns two spaces apart, or
    ``"markdown"``, a Markdown table whose first column is left-aligned, the others right."""
    cells = [[header for header, _, _ in columns]]
    for row in rows:
        cells.append(
            ["n/a" if row[key] is None else fmt.format(row[key]) for _, key, fmt in columns]
        )
    if style == "markdown":
        lines = ["| " + " | ".join(cells[0]) + " |", "|---|" + "---:|" * (len(columns) - 1)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]])
    if style != "plain":
        raise ValueError(f"style must be 'plain' or 'markdown', not {style!r}")
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in cells
    )
