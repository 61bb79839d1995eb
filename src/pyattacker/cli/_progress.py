"""Live progress of an attack on a terminal (rich); nothing when stderr is not a terminal."""

from __future__ import annotations

import sys

from rich.columns import Columns
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from pyattacker.attack import Progress

__all__ = ["LiveProgress"]


class LiveProgress:
    """Redraws one small table a few times a second: achieved vs planned, in flight,
    percentiles so far on both clocks, errors and throttles; for an LLM attack also time
    to first token (sent clock) and generated tokens per second."""

    def __init__(self, console: Console) -> None:
        self._live = Live(console=console, auto_refresh=False, transient=True)
        self._workers: list[str] = []  # --per-worker: a line per worker under the figures
        self._live.start()

    @classmethod
    def for_stderr(cls) -> LiveProgress | None:
        """A live view on stderr, or None when stderr is not a terminal."""
        console = Console(file=sys.stderr)
        return cls(console) if console.is_terminal else None

    def update(self, progress: Progress) -> None:
        rate = progress.sent / progress.elapsed if progress.elapsed > 0 else 0.0
        planned = (
            ""
            if progress.planned is None or progress.elapsed <= 0
            else (f" of {progress.planned / progress.elapsed:.0f}")
        )
        cells = [
            ("elapsed", f"{progress.elapsed:.1f}s"),
            ("sent", str(progress.sent)),
            ("rate", f"{rate:.0f}/s{planned}"),
            ("in flight", str(progress.in_flight)),
            ("failed", str(progress.failed)),
            ("throttled", str(progress.throttled)),
            ("dropped", str(progress.dropped)),
            ("p50/p99 sched ms", f"{_ms(progress.latency_p50)}/{_ms(progress.latency_p99)}"),
            ("p50/p99 sent ms", f"{_ms(progress.service_p50)}/{_ms(progress.service_p99)}"),
        ]
        if progress.completion_tokens is not None:
            tokens = progress.completion_tokens / progress.elapsed if progress.elapsed > 0 else 0.0
            cells.append(("ttft p50/p99 ms", f"{_ms(progress.ttft_p50)}/{_ms(progress.ttft_p99)}"))
            cells.append(("tokens/s", f"{tokens:.0f}"))
        # One small block per figure, name over value, laid side by side and wrapped onto
        # another row when the terminal is narrow: a number is never cut short.
        blocks = [Text(f"{name}\n{value}", justify="right", no_wrap=True) for name, value in cells]
        figures = Columns(blocks, padding=(0, 2))
        # --per-worker: a line per worker under the figures, cut (not wrapped) to the width
        lines = Text("\n".join(self._workers), no_wrap=True, overflow="ellipsis")
        self._live.update(Group(figures, lines) if self._workers else figures, refresh=True)

    def show_workers(self, lines: list[str]) -> None:
        """Each worker's line, drawn under the figures from the next :meth:`update` on
        (``--per-worker``: which worker lags, spends CPU or has gone silent)."""
        self._workers = lines

    def echo(self, line: str) -> None:
        """Print ``line`` as is on the live view's stream: above the block while it is
        drawn (the block is then drawn again below it), plainly once it is closed. A line
        written to the stream behind rich's back would be glued to the block's last row,
        and the next redraw, which moves up over the block's rows, would erase it."""
        self._live.console.print(Text(line), soft_wrap=True, highlight=False)

    def close(self) -> None:
        """Stop drawing; the last frame is cleared (the report that follows has the final
        figures). Again is harmless."""
        self._live.stop()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"
