"""What the reports say of the workers: a lost worker named near the top, with where its
figures stop and what it sent after; each worker's late sends and loop lag p99 and max."""

from __future__ import annotations

import json
from dataclasses import replace

from pyattacker.attack import AttackPlan, OpenModel, WorkerOutcome, merge_outcomes
from pyattacker.attack._engine import Progress
from pyattacker.attack._result import RunTimes
from pyattacker.attack._tally import Tally
from pyattacker.cli._attack_workers import worker_lines
from pyattacker.measure import Attempt, Histogram, Outcome
from pyattacker.report import attack_json, attack_markdown, attack_text
from pyattacker.report._workers import worker_now_line, workers_now

ORIGIN = 100.0
PLAN = AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=50), duration=8.0)
TIMES = RunTimes(started_at=1.7e9, start=ORIGIN, schedule_end=ORIGIN + 8, end=ORIGIN + 9,
                 last_offset=7.9)  # fmt: skip


def progress(elapsed: float, sent: int) -> Progress:
    return Progress(elapsed, None, sent, sent, sent, 0, 0, 0, 0, None, None, None, None)


def counted(sent: int, *, late_by: float = 0.0) -> Tally:
    """A tally of ``sent`` OK requests, each sent ``late_by`` after its scheduled time."""
    tally = Tally(origin=ORIGIN, window=1.0, late_after=0.01, per_target=False, on_record=None)
    for n in range(sent):
        at = ORIGIN + n * 0.01
        attempt = Attempt(n, 1, scheduled=at, sent=at + late_by, first_byte=at + 0.03,
                          end=at + 0.03, status=200)  # fmt: skip
        attempt.outcome = Outcome.OK
        tally.arrival(at, 1)
        tally.finished([attempt])
    return tally


def worker(index: int, tally: Tally, *, snapshot_at: float | None = None,
           lag: Histogram | None = None) -> WorkerOutcome:  # fmt: skip
    """A worker's final count, or with ``snapshot_at`` its snapshot taken then."""
    final = snapshot_at is None
    taken = None if snapshot_at is None else progress(snapshot_at, tally.sent)
    return WorkerOutcome(index=index, tally=tally, times=TIMES, decisions={}, stop_reason=None,
                         loop_lag=lag, cpu_s=0.5, final=final, progress=taken)  # fmt: skip


def lost_at_six_seconds() -> list[WorkerOutcome]:
    """Worker 0 lost after a snapshot at 6 s (300 sent), worker 1 finished (400 sent)."""
    return [worker(0, counted(300), snapshot_at=6.0), worker(1, counted(400))]


def test_a_lost_worker_says_when_its_snapshot_was_and_how_many_it_sent_after_it() -> None:
    # Its newest progress (7.5 s, 736 sent) came after its last snapshot (6 s, 300 sent).
    result = merge_outcomes(PLAN, lost_at_six_seconds(), lost=[0], workers=2,
                            progress=[progress(7.5, 736), progress(8.0, 400)])  # fmt: skip
    section = result.to_dict()["workers"]
    assert section["lost"] == [0]
    [lost] = section["lost_each"]
    assert lost["index"] == 0
    assert lost["snapshot_at_s"] == 6.0
    assert lost["last_heard_at_s"] == 7.5
    assert lost["sent_after_snapshot_at_least"] == 436
    assert "each" not in section  # every worker's figures only with --per-worker
    assert json.loads(attack_json(result))["workers"]["lost_each"] == [lost]


def test_the_text_and_markdown_reports_name_a_lost_worker_near_the_top() -> None:
    result = merge_outcomes(PLAN, lost_at_six_seconds(), lost=[0], workers=2,
                            progress=[progress(7.5, 736), None])  # fmt: skip
    text = attack_text(result).splitlines()
    line = next(n for n, text_line in enumerate(text) if "WORKER LOST" in text_line)
    assert line < text.index("Latency (ms)")  # before any table
    assert text[line] == (
        "WORKER LOST: worker 0 died; its figures stop at its last snapshot, 6.00s into the "
        "run (300 requests sent by then); last heard from 7.50s into the run, it had sent "
        "at least 436 more requests, not in these figures."
    )
    markdown = attack_markdown(result)
    assert f"- {text[line]}" in markdown
    assert markdown.index("WORKER LOST") < markdown.index("## Latency")


def test_a_worker_lost_before_its_first_snapshot_is_said_to_be_in_no_figure() -> None:
    result = merge_outcomes(PLAN, [worker(1, counted(10))], lost=[0], workers=2,
                            progress=[progress(0.5, 12), None])  # fmt: skip
    [line] = [x for x in attack_text(result).splitlines() if "WORKER LOST" in x]
    assert "worker 0 died; it died before its first snapshot: none of its requests" in line
    assert "at least 12 more requests" in line
    assert result.to_dict()["workers"]["lost_each"][0]["snapshot_at_s"] is None


def test_a_report_without_a_lost_worker_says_nothing_of_workers() -> None:
    result = merge_outcomes(PLAN, [worker(0, counted(5)), worker(1, counted(5))])
    assert "WORKER" not in attack_text(result)
    assert "lost_each" not in result.to_dict()["workers"]


def test_per_worker_lines_give_late_sends_and_loop_lag_p99_and_max() -> None:
    # Worker 1 stalled once for 1.49 s: its p99 stays at the timer's few ms, its max shows it.
    lags = [Histogram(), Histogram()]
    for _ in range(1000):
        lags[0].record(0.004)
        lags[1].record(0.004)
    lags[1].record(1.49)
    outcomes = [worker(0, counted(20), lag=lags[0]),
                worker(1, counted(30, late_by=0.5), lag=lags[1])]  # fmt: skip
    result = merge_outcomes(PLAN, outcomes, per_worker=True)
    each = result.to_dict()["workers"]["each"]
    assert [w["late"] for w in each] == [0, 30]
    assert result.late == 30  # the whole's late is the workers' added up
    assert each[1]["loop_lag_max_s"] >= 1.49
    lines = worker_lines(result, every=True)
    assert lines[0].endswith("late 0; CPU 0.50s; loop lag p99 4.0ms, max 4.0ms")
    assert lines[1].endswith("late 30; CPU 0.50s; loop lag p99 4.0ms, max 1490.0ms")


def test_the_stderr_line_of_a_lost_worker_says_where_its_figures_stop() -> None:
    result = merge_outcomes(PLAN, lost_at_six_seconds(), lost=[0], workers=2,
                            progress=[progress(7.5, 736), None])  # fmt: skip
    [line] = worker_lines(result, every=False)
    assert line.startswith(
        "worker 0: lost, counted up to its last snapshot at 6.00s (it sent at least 436 "
        "more, not counted); scheduled 300, sent 300"
    )


def running(index: int, elapsed: float, sent: int, lag: float) -> WorkerOutcome:
    """A worker's last snapshot with its newest progress (as the driver hands them on)."""
    newest = replace(progress(elapsed, sent), loop_lag_s=lag, cpu_s=elapsed / 4)
    return replace(worker(index, counted(0), snapshot_at=0.5), progress=newest)


def test_while_running_a_worker_that_went_silent_is_named_with_its_lag_and_cpu() -> None:
    # Worker 1 was paused: its newest progress is 1.5 s older than worker 0's.
    rows = workers_now([running(0, 3.0, 150, 0.002), running(1, 1.5, 75, 0.004), None])
    lines = [worker_now_line(row) for row in rows]
    assert lines == [
        "worker 0: sent 150 · loop lag 2.0 ms · CPU 0.75 s",
        "worker 1: sent 75 · loop lag 4.0 ms · CPU 0.38 s · silent 1.5 s",
        "worker 2: waiting",
    ]
    # once it runs again, its first progress carries the stall as its lag
    rows = workers_now([running(0, 3.5, 175, 0.002), running(1, 3.5, 80, 1.49)])
    assert worker_now_line(rows[1]) == "worker 1: sent 80 · loop lag 1490.0 ms · CPU 0.88 s"
    assert rows[1]["loop_lag_s"] == 1.49
