"""Live progress of an attack on a terminal (rich); nothing when stderr is not a terminal."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.live import Live
from rich.table import Table

from pyattacker.attack import Progress

__all__ = ["LiveProgress"]


class LiveProgress:
    """Redraws one small table a few times a second: achieved vs planned, in flight,
    percentiles so far on both clocks, errors and throttles; for an LLM attack also time
    to first token (sent clock) and generated tokens per second."""

    def __init__(self, console: Console) -> None:
        self._live = Live(console=console, auto_refresh=False, transient=True)
        self._live.start()

    @classmethod
    def for_stderr(cls) -> LiveProgress | None:
        """A live view on stderr, or None when stderr is not a terminal."""
        console = Console(file=sys.stderr)
        return cls(console) if console.is_terminal else None

    def update(self, progress: Progress) -> None:
        table = Table(box=None, show_header=True, pad_edge=False)
        for name in (
            "elapsed",
            "sent",
            "rate",
            "in flight",
            "failed",
            "throttled",
            "dropped",
            "p50/p99 sched ms",
            "p50/p99 sent ms",
            *(("ttft p50/p99 ms", "tokens/s") if progress.completion_tokens is not None else ()),
        ):
            table.add_column(name, justify="right")
        rate = progress.sent / progress.elapsed if progress.elapsed > 0 else 0.0
        planned = (
            ""
            if progress.planned is None or progress.elapsed <= 0
            else (f" of {progress.planned / progress.elapsed:.0f}")
        )
        llm: tuple[str, ...] = ()
        if progress.completion_tokens is not None:
            tokens = progress.completion_tokens / progress.elapsed if progress.elapsed > 0 else 0.0
            llm = (f"{_ms(progress.ttft_p50)}/{_ms(progress.ttft_p99)}", f"{tokens:.0f}")
        table.add_row(
            f"{progress.elapsed:.1f}s",
            str(progress.sent),
            f"{rate:.0f}/s{planned}",
            str(progress.in_flight),
            str(progress.failed),
            str(progress.throttled),
            str(progress.dropped),
            f"{_ms(progress.latency_p50)}/{_ms(progress.latency_p99)}",
            f"{_ms(progress.service_p50)}/{_ms(progress.service_p99)}",
            *llm,
        )
        self._live.update(table, refresh=True)

    def close(self) -> None:
        self._live.stop()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"
