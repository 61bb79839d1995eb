"""``pyattacker watch STORE``: a live run in a terminal, for machines without a browser.

Every ``--every`` seconds the store is opened read-only (as ``pyattacker report`` opens it:
never a write, never in the live run's way), summarized, and a compact status shown: the
run's state (live, or judged crashed), pipelines done of the input's rows with the rate
since the previous look and an ETA, attempts and errors by class, throttles per resource.
On a terminal the status is redrawn in place; otherwise (a pipe, a log) it is one plain
line per look, without escape codes.

When no run of the store is live any more, the full report (``pyattacker report``'s) is
printed and the exit code is the run's: 0 when its last run succeeded, 1 otherwise (it
failed, was interrupted or crashed). Ctrl-C stops watching (130); the run is not touched.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import click

from pyattacker._units import parse_duration
from pyattacker.cli._run_commands import open_reader, print_run_report
from pyattacker.clock import block_for, wall_time
from pyattacker.report import summarize

__all__ = ["Look", "status_lines", "watch_command"]

_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen

_EPILOG = """\b
Examples:
  pyattacker watch runs/eval.db
  pyattacker watch runs/eval.db --every 10s > watch.log     # one line per look

\b
Exit codes: 0 the run succeeded, 1 it failed, was interrupted or crashed, 2 bad input
(no such STORE), 130 Ctrl-C (the run goes on). A finished store prints its report at once.
"""


class Look:
    """Two consecutive looks at a store make a rate: pipelines done per second between
    them (None on the first look, or when no time passed)."""

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None

    def rate(self, at: float, done: int) -> float | None:
        last, self._last = self._last, (at, done)
        if last is None or at <= last[0]:
            return None
        return max(0, done - last[1]) / (at - last[0])


def status_lines(summary: Mapping[str, Any], rate: float | None) -> list[str]:
    """The compact status of a summary: state, progress (rate, ETA), attempts, errors by
    class and throttles per resource, one fact per line. Reads only its arguments."""
    runs = summary["runs"]
    run = runs[-1] if runs else None
    state = "no run yet" if run is None else _state(run)
    by_state = summary["pipelines"]["by_state"]
    done = by_state.get("succeeded", 0) + by_state.get("failed", 0)
    total = _total(summary, run)
    attempts = summary["attempts"]
    lines = [
        f"{datetime.now().strftime('%H:%M:%S')} {state}",
        f"pipelines {done}/{total if total is not None else '?'} done "
        f"({_counts(by_state)}) {_pace(done, total, rate)}".rstrip(),
        f"attempts {attempts['total']} ({_counts(attempts['by_outcome'])})",
    ]
    if attempts["by_error_class"]:
        lines.append(f"errors by class: {_counts(attempts['by_error_class'])}")
    throttled = {r: c["throttled"] for r, c in attempts["by_resource"].items() if c["throttled"]}
    if throttled:
        lines.append(f"throttled: {_counts(throttled)}")
    return lines


def _state(run: Mapping[str, Any]) -> str:
    what = f"run {run['run_id']} {run['state']}"
    if run.get("live"):
        return what + " (live)"
    return what + (f" ({run['crashed_because']})" if run.get("crashed_because") else "")


def _total(summary: Mapping[str, Any], run: Mapping[str, Any] | None) -> int | None:
    """The rows of the run's input when it recorded how many; else None (a stream)."""
    consumed = (run or {}).get("consumed") or {}
    rows = consumed.get("rows_total")
    return None if rows is None else max(int(rows), int(summary["pipelines"]["total"]))


def _pace(done: int, total: int | None, rate: float | None) -> str:
    if rate is None:
        return ""
    text = f"{rate:.1f}/s"
    if total is not None and rate > 0 and total > done:
        text += f", ETA {_duration((total - done) / rate)}"
    return text


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    return (
        f"{minutes} min {secs:02d} s"
        if minutes < 60
        else f"{minutes // 60} h {minutes % 60:02d} min"
    )


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items()) or "none"


def _look(store: str) -> dict[str, Any]:
    reader = open_reader(store)
    try:
        return summarize(reader)
    finally:
        reader.close()


def _ended(summary: Mapping[str, Any]) -> bool:
    runs = summary["runs"]
    return bool(runs) and not any(run.get("live") for run in runs)


def _show(lines: list[str], *, terminal: bool) -> None:
    """A terminal's screen is cleared and redrawn; anything else gets one plain line."""
    if terminal:
        click.echo(_CLEAR + "\n".join(lines), color=True)  # a tty: keep the escape codes
    else:
        click.echo(" | ".join(lines))
    sys.stdout.flush()


@click.command("watch", epilog=_EPILOG)
@click.argument("store", metavar="STORE")
@click.option(
    "--every",
    default="2s",
    show_default=True,
    metavar="DURATION",
    help="How often to look at the store, e.g. 2s, 500ms, 1m.",
)
def watch_command(store: str, every: str) -> int:
    """Show a run's progress in the terminal until it ends, then its report."""
    period = parse_duration(every, field="--every")
    if period <= 0:
        raise click.BadParameter("must be more than 0, e.g. 2s", param_hint="--every")
    terminal = sys.stdout.isatty()
    look = Look()
    summary = _look(store)
    while not _ended(summary):
        done = sum(summary["pipelines"]["by_state"].get(s, 0) for s in ("succeeded", "failed"))
        _show(status_lines(summary, look.rate(wall_time(), done)), terminal=terminal)
        block_for(period)
        summary = _look(store)
    reader = open_reader(store)
    try:
        print_run_report(reader, as_json=False, errors=5)
    finally:
        reader.close()
    return 0 if summary["runs"][-1]["state"] == "succeeded" else 1
