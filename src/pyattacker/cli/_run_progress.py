"""Live progress of a run on a terminal (rich); nothing when stderr is not a terminal.

rich's refresh thread asks for the picture (``get_renderable``) a few times a second and
the picture reads ``Runner.stats()``, which is safe from any thread: the run's loop is
never touched from here and never waits for the display.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

__all__ = ["RunProgress", "progress_counts"]

Stats = Callable[[], Mapping[str, Any]]


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
    }


class RunProgress:
    """A bar of pipelines done out of ``total`` and a line of counters, redrawn by rich."""

    def __init__(self, console: Console, stats: Stats, *, total: int, label: str) -> None:
        self._stats = stats
        self._total = total
        self._label = label
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
        counts = progress_counts(self._stats())
        bar = Table.grid(padding=(0, 1))
        bar.add_column(no_wrap=True)
        bar.add_column(width=40)
        bar.add_column(no_wrap=True)
        bar.add_row(
            Text(self._label, style="bold"),
            ProgressBar(total=max(1, self._total), completed=counts["done"]),
            Text(f"{counts['done']}/{self._total} pipelines  {counts['elapsed_s']:.1f} s"),
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
            line.append(f"{counts['interrupted']} interrupted", style="red")
        return Group(bar, line)
