"""Live progress of a run on a terminal (rich); nothing when stderr is not a terminal.

rich's refresh thread asks for the picture (``get_renderable``) a few times a second and
the picture reads ``Runner.stats()``, which is safe from any thread: the run's loop is
never touched from here and never waits for the display.

The rate is measured over the last ``RATE_WINDOW_S`` seconds of the run's own clock
(``stats["elapsed_s"]``), not since the start: after a slow start, a resume that skipped
thousands of finished items, or a key that came back, the ETA follows what the run does
now. Skipped and duplicate rows count as done but not in the rate (they cost nothing).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

__all__ = ["RATE_WINDOW_S", "RunProgress", "pace", "progress_counts", "steps_line"]

Stats = Callable[[], Mapping[str, Any]]

#: How far back the rate looks, in seconds of the run.
RATE_WINDOW_S = 10.0


def progress_counts(stats: Mapping[str, Any]) -> dict[str, int | float]:
    """The figures the bar shows, from one ``Runner.stats()`` snapshot.

    ``done`` counts every pipeline that needs nothing more from this run: ended in it (any
    state), skipped because the store already had it succeeded, or a duplicate of one in
    the input (it runs once; the bar's total counts input rows).
    """
    pipelines = stats["pipelines"]
    ended = pipelines["ended"]
    attempts = stats["attempts"]
    succeeded = ended.get("succeeded", 0) + pipelines["skipped"]
    failed = ended.get("failed", 0)
    interrupted = ended.get("interrupted", 0)
    return {
        "done": succeeded + failed + interrupted + pipelines.get("duplicates", 0),
        "succeeded": succeeded,
        "failed": failed,
        "interrupted": interrupted,
        "in_flight": stats["in_flight"],
        "parked": pipelines["parked"],
        "attempts": attempts["total"],
        "retries": attempts["retries"],
        "throttled": attempts["by_error_class"].get("rate_limit", 0),
        "elapsed_s": stats["elapsed_s"],
        "ended": succeeded - pipelines["skipped"] + failed + interrupted,
    }


def pace(
    samples: Sequence[tuple[float, int]], *, remaining: int, window_s: float = RATE_WINDOW_S
) -> tuple[float | None, float | None]:
    """``(rate, eta_s)``: pipelines per second over the last ``window_s`` seconds, and the
    seconds left at that rate for ``remaining`` pipelines.

    ``samples`` are ``(elapsed_s, ended)`` pairs, oldest first. The rate runs from the
    newest sample back to the oldest one inside the window (or the last one before it, so
    a window with one sample still spans an interval); None until two samples are apart
    in time. ``eta_s`` is 0 when nothing remains, None while the rate is unknown or zero.
    """
    eta_done: float | None = 0.0 if remaining <= 0 else None
    if len(samples) < 2:
        return None, eta_done
    t_last, n_last = samples[-1]
    start = len(samples) - 2
    while start > 0 and samples[start - 1][0] >= t_last - window_s:
        start -= 1
    t_first, n_first = samples[start]
    if t_last <= t_first:
        return None, eta_done
    rate = max(0, n_last - n_first) / (t_last - t_first)
    if remaining <= 0:
        return rate, 0.0
    return rate, (remaining / rate if rate > 0 else None)


def steps_line(stats: Mapping[str, Any]) -> str | None:
    """ "N steps reused, M ran" when the run counts them (``stats["steps"]``), else None."""
    steps = stats.get("steps")
    if not isinstance(steps, Mapping):
        return None
    return f"{steps.get('reused', 0)} steps reused, {steps.get('ran', 0)} ran"


def _duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class RunProgress:
    """A bar of pipelines done out of ``total`` and a line of counters, redrawn by rich."""

    def __init__(self, console: Console, stats: Stats, *, total: int, label: str) -> None:
        self._stats = stats
        self._total = total
        self._label = label
        # (elapsed_s, ended) per picture: a few per second, so the window needs ~100
        self._samples: deque[tuple[float, int]] = deque(maxlen=256)
        self._live = Live(
            console=console,
            get_renderable=self.render,
            refresh_per_second=10,
            transient=False,
        )

    @classmethod
    def for_stderr(cls, stats: Stats, *, total: int, label: str) -> RunProgress | None:
        """A live view on stderr, or None when stderr is not a terminal."""
        console = Console(file=sys.stderr)
        return cls(console, stats, total=total, label=label) if console.is_terminal else None

    def __enter__(self) -> RunProgress:
        self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._live.stop()

    def render(self) -> RenderableType:
        """The current picture (also usable without a terminal, for tests)."""
        stats = self._stats()
        counts = progress_counts(stats)
        self._samples.append((float(counts["elapsed_s"]), int(counts["ended"])))
        # an estimated total (one shard's share) may fall short: never show done > total
        total = max(self._total, int(counts["done"]))
        rate, eta = pace(self._samples, remaining=total - int(counts["done"]))
        speed = "" if rate is None else f"  {rate:.1f}/s  ETA {_duration(eta)}"
        bar = _BarLine(
            Text(self._label, style="bold"),
            ProgressBar(total=max(1, total), completed=counts["done"]),
            Text(f"{counts['done']}/{total} pipelines  {counts['elapsed_s']:.1f} s{speed}"),
        )
        line = Text("  ")
        for name, style in (
            ("succeeded", "green"),
            ("failed", "red"),
            ("in_flight", "cyan"),
            ("parked", "yellow"),
            ("attempts", ""),
            ("retries", ""),
            ("throttled", "magenta"),
        ):
            line.append(f"{counts[name]}", style=style or None)
            line.append(f" {name.replace('_', ' ')}   ", style="dim")
        if counts["interrupted"]:
            line.append(f"{counts['interrupted']} interrupted   ", style="red")
        steps = steps_line(stats)
        if steps is not None:
            line.append(steps, style="dim")
        return Group(bar, line)


class _BarLine:
    """The label, the bar and the figures on one line. The bar takes the columns the
    figures leave (5 to 40), so the rate and the ETA stay whole on an 80-column terminal."""

    def __init__(self, label: Text, bar: ProgressBar, figures: Text) -> None:
        self.label, self.bar, self.figures = label, bar, figures

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = options.max_width - self.label.cell_len - self.figures.cell_len - 2
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(width=max(5, min(40, room)))
        grid.add_column(no_wrap=True)
        grid.add_row(self.label, self.bar, self.figures)
        yield grid
