"""``attack --workers`` on a terminal: the workers' lines are printed once the live view is
closed, and whatever is printed while it draws lands above it; nothing is erased.

The screen is what :func:`terminal_screen.screen` makes of the bytes written, replaying
rich's cursor-up and clear-line sequences as a terminal does.
"""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from pyattacker.attack import AttackPlan, OpenModel, WorkerOutcome, merge_outcomes
from pyattacker.attack._engine import Progress
from pyattacker.attack._result import RunTimes
from pyattacker.attack._tally import Tally
from pyattacker.cli._attack_workers import Shared
from pyattacker.cli._progress import LiveProgress
from pyattacker.servers import EchoServerProcess
from terminal_screen import screen

PLAN = AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=50), duration=8.0)
TIMES = RunTimes(started_at=1.7e9, start=0.0, schedule_end=8.0, end=9.0, last_offset=7.9)


def progress(elapsed: float, sent: int) -> Progress:
    return Progress(elapsed, 50 * elapsed, sent, sent, sent, 0, 0, 0, 0, None, None, None, None)


def outcome(index: int, *, snapshot_at: float | None = None) -> WorkerOutcome:
    tally = Tally(origin=0.0, window=1.0, late_after=0.01, per_target=False, on_record=None)
    taken = None if snapshot_at is None else progress(snapshot_at, 0)
    return WorkerOutcome(index, tally, TIMES, {}, None, None, 0.2, final=snapshot_at is None,
                         progress=taken)  # fmt: skip


def fake_terminal() -> tuple[LiveProgress, io.StringIO]:
    stream = io.StringIO()
    return LiveProgress(Console(file=stream, force_terminal=True, width=100)), stream


def test_the_workers_lines_follow_the_closed_live_view_whole_and_no_frame_is_left() -> None:
    live, stream = fake_terminal()
    live.update(progress(1.0, 50))
    live.update(progress(1.5, 75))  # a redraw: up over the block's rows, clearing each
    newest = [progress(1.5, 30), None]
    result = merge_outcomes(PLAN, [outcome(0, snapshot_at=1.0), outcome(1)], lost=[0],
                            workers=2, per_worker=True, progress=newest)  # fmt: skip
    Shared(2, True, (), None, live=live).told(result)
    live.close()  # as the command does once the run returned (again: harmless)
    shown = screen(stream.getvalue())
    assert shown[0].startswith(
        "worker 0: lost, counted up to its last snapshot at 1.00s (it sent at least 30 more"
    )
    assert shown[1].startswith("worker 1: finished; scheduled 0, sent 0")
    assert len(shown) == 2  # the live view's last frame cleared, none left above


def test_a_line_printed_while_the_live_view_draws_lands_above_it_and_the_view_goes_on() -> None:
    live, stream = fake_terminal()
    live.update(progress(1.0, 50))
    live.echo("a note in the middle of the run")
    live.update(progress(2.0, 100))
    shown = screen(stream.getvalue())
    assert shown[0] == "a note in the middle of the run"
    assert any("100" in line for line in shown[1:])  # the newest frame, below the note
    assert not any("1.0s" in line for line in shown)  # the older frame is gone
    live.close()
    assert screen(stream.getvalue()) == ["a note in the middle of the run"]


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


@pytest.mark.slow
def test_on_a_real_terminal_the_per_worker_lines_and_the_report_are_left_whole(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    # stderr on a pseudo-terminal (the live view draws), stdout to a file (the report).
    leader, follower = pty.openpty()
    command = [sys.executable, "-m", "pyattacker", "attack", echo.url, "--rate", "100/s",
               "--duration", "1.5s", "--workers", "2", "--per-worker"]  # fmt: skip
    with (tmp_path / "report.txt").open("w") as report:
        env = {**os.environ, "COLUMNS": "120", "LINES": "40"}
        proc = subprocess.Popen(command, stdout=report, stderr=follower, env=env)
    os.close(follower)
    written = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed: the run is over
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    shown = screen(written.decode())
    workers = [line for line in shown if line.startswith("worker ")]
    assert [line[:20] for line in workers] == ["worker 0: finished; ", "worker 1: finished; "]
    assert all(line.endswith("ms") for line in workers)  # not cut short by a redraw
    assert shown[-2:] == workers  # after the live view, nothing of it left below
    assert not any("elapsed" in line for line in shown)  # its frames are all cleared
    assert "Latency (ms)" in (tmp_path / "report.txt").read_text()


def test_per_worker_lines_are_drawn_under_the_figures_and_the_default_view_has_none() -> None:
    live, stream = fake_terminal()
    live.update(progress(1.0, 50))
    assert not any(line.startswith("worker") for line in screen(stream.getvalue()))
    live.show_workers(["worker 0: sent 25 · loop lag 1.0 ms · CPU 0.10 s",
                       "worker 1: sent 25 · loop lag 1490.0 ms · CPU 0.10 s"])  # fmt: skip
    live.update(progress(1.5, 75))
    live.update(progress(2.0, 100))  # redrawn over the last frame, workers' lines and all
    shown = screen(stream.getvalue())
    assert shown[-2:] == ["worker 0: sent 25 · loop lag 1.0 ms · CPU 0.10 s",
                          "worker 1: sent 25 · loop lag 1490.0 ms · CPU 0.10 s"]  # fmt: skip
    assert len(shown) == 4  # one frame: two rows of figures, then the workers' lines
    assert "2.0s" in shown[1]
    live.close()
    assert screen(stream.getvalue()) == []
