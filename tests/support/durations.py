"""A pytest plugin: at the end of a run, the time each test file took (setup, call and
teardown of its tests, summed over the workers) and each level's total, so that a run's log
shows where its time goes by file as ``--durations`` shows it by test."""

import collections

_seconds = collections.Counter()
_tests = collections.Counter()


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _seconds[path] += report.duration
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _tests[path] += 1


def pytest_terminal_summary(terminalreporter):
    if not _seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("seconds per test file (all workers)")
    levels = collections.Counter()
    for path, seconds in _seconds.items():
        parts = path.split("/")
        levels[parts[1] if len(parts) > 2 else parts[0]] += seconds
    for path, seconds in _seconds.most_common(15):
        write(f"{seconds:8.1f}  {_tests[path]:5d}  {path}")
    write(
        "levels: "
        + ", ".join(f"{level} {seconds:.0f} s" for level, seconds in levels.most_common())
        + f"; total {sum(_seconds.values()):.0f} s"
    )
