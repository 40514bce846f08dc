"""``elmo-tf train``'s progress where its output is no terminal (nohup, a log file, a
scheduler): a plain line after the first step, then every minute, naming the step, the loss,
the tokens per second and the time to the next checkpoint; a line at each checkpoint."""

import io

from elmo_tf.cli.train import _duration, _TrainingProgress


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _metrics(step, checkpoint=None):
    return {"loss": 5.0 - step / 100, "tokens": 200, "checkpoint": checkpoint}


def test_a_log_gets_a_line_after_the_first_step_then_every_minute_and_at_checkpoints():
    clock, log = _Clock(), io.StringIO()
    progress = _TrainingProgress(
        3000, 0, checkpoint_every=1000, stream=log, log_seconds=60, clock=clock
    )
    for step in range(1, 1121):
        clock.now += 0.5  # two steps a second
        progress.step(_metrics(step, "ckpt-1000" if step == 1000 else None))
    lines = log.getvalue().splitlines()
    # after step 1, then each 60 s (every 120 steps: 121, 241, ... 961), the checkpoint, and
    # 60 s after it
    assert [line.split(" ", 1)[0] for line in lines] == [
        "1/3000", *(f"{n}/3000" for n in range(121, 1000, 120)), "1000/3000", "1120/3000",
    ]  # fmt: skip
    assert lines[0].startswith("1/3000 steps, 400 tokens/s, loss 4.9900, 0.5s")
    assert lines[0].endswith("; next checkpoint at step 1000")  # no rate after one step
    assert lines[-2].endswith(", saved ckpt-1000")
    assert lines[1].endswith("; next checkpoint (step 1000) in about 7m 20s")
    assert lines[-1].endswith("; next checkpoint (step 2000) in about 7m 20s")


def test_the_estimate_leaves_out_the_first_step_which_traces_the_graph():
    """The first step took 9 minutes (tracing); the others a tenth of a second each: the next
    checkpoint is 90 s away, not hours."""
    clock, log = _Clock(), io.StringIO()
    progress = _TrainingProgress(5000, 0, checkpoint_every=1000, stream=log, clock=clock)
    clock.now += 540.0
    progress.step(_metrics(1))
    for step in range(2, 102):
        clock.now += 0.1
        progress.step(_metrics(step))
    clock.now += 60.0
    progress.step(_metrics(102))
    lines = log.getvalue().splitlines()
    assert lines[0].endswith("; next checkpoint at step 1000")
    # 101 steps in 70 s since the first: 898 more steps in about 10m 22s
    assert lines[-1].startswith("102/5000 ") and lines[-1].endswith("in about 10m 22s")


def test_a_resumed_run_counts_its_rate_from_where_it_resumed():
    clock, log = _Clock(), io.StringIO()
    progress = _TrainingProgress(500, 400, checkpoint_every=1000, stream=log, log_seconds=1,
                                 clock=clock)  # fmt: skip
    for step in (401, 402):
        clock.now += 2.0
        progress.step(_metrics(step))
    lines = log.getvalue().splitlines()
    # the next checkpoint is the end of the run; 98 steps at one step in 2 s
    assert lines[0].startswith("401/500 steps") and lines[0].endswith("at step 500")
    assert lines[1].startswith("402/500 steps") and lines[1].endswith("(step 500) in about 3m 16s")


def test_durations_read_as_a_person_reads_them():
    assert [_duration(s) for s in (0.4, 59.6, 61, 3599, 3600, 12_345)] == [
        "0s", "1m 0s", "1m 1s", "59m 59s", "1h 0m", "3h 25m",
    ]  # fmt: skip


def test_the_last_step_names_no_next_checkpoint():
    clock, log = _Clock(), io.StringIO()
    progress = _TrainingProgress(1, 0, checkpoint_every=1000, stream=log, clock=clock)
    clock.now += 2.0
    progress.step(_metrics(1))
    (line,) = log.getvalue().splitlines()
    assert line.startswith("1/1 steps") and "next checkpoint" not in line
