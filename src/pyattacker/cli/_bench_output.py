"""What ``pyattacker bench`` shows besides the report: the progress and the ``--list``.

Progress goes to stderr while the sweep runs: on a terminal, a rich bar with the last
finished run beside it (gone when the sweep ends); otherwise one plain line per finished
run, for logs and pipes. :func:`progress_for_stderr` picks one; either is a context manager
whose ``finished`` is the sweep's ``on_result``.

``--list`` is generated from ``SCENARIOS``, ``ALGORITHMS`` and ``METRICS``, never a second
list; the command passes its default scenario, which is its own to choose.

Not here: the command, its inputs, and writing the reports (:mod:`pyattacker.cli._bench`).
"""

from __future__ import annotations

import inspect
import shutil
import sys
import textwrap

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pyattacker.benchmark import METRICS, SCENARIOS, RunResult
from pyattacker.pool import ALGORITHMS

__all__ = ["progress_for_stderr", "render_list"]


# ------------------------------------------------------------------------- the progress


class _Lines:
    """One plain line per finished run on stderr (for logs and pipes)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0

    def __enter__(self) -> _Lines:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def finished(self, run: RunResult) -> None:
        self.done += 1
        click.echo(f"bench [{self.done}/{self.total}] {_run_line(run)}", err=True)


class _Bar(_Lines):
    """A rich progress bar on a terminal; the last finished run beside it."""

    def __init__(self, total: int, console: Console) -> None:
        super().__init__(total)
        self._progress = Progress(
            TextColumn("bench"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
        )
        self._task = self._progress.add_task("", total=total)

    def __enter__(self) -> _Bar:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def finished(self, run: RunResult) -> None:
        self.done += 1
        self._progress.update(self._task, advance=1, description=_run_line(run))


def progress_for_stderr(total: int) -> _Lines:
    """A bar when stderr is a terminal, else plain lines; ``total`` runs to count."""
    console = Console(file=sys.stderr)
    return _Bar(total, console) if console.is_terminal else _Lines(total)


def _run_line(run: RunResult) -> str:
    m = run.metrics
    return f"{run.algorithm} seed={run.seed} jobs_done={m['jobs_done']:g} wall_s={m['wall_s']:.2f}"


# ----------------------------------------------------------------------------- --list


def render_list(default_scenario: str, width: int | None = None) -> str:
    """Scenarios, algorithms and metrics, from ``SCENARIOS``, ``ALGORITHMS``, ``METRICS``,
    wrapped to ``width`` (default: the terminal's, between 80 and 140); the scenarios'
    heading names ``default_scenario`` as the default."""
    if width is None:
        width = min(max(shutil.get_terminal_size((100, 24)).columns, 80), 140)
    sections = [
        _scenario_lines(width, default_scenario),
        _algorithm_lines(width),
        _metric_lines(width),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


def _scenario_lines(width: int, default_scenario: str) -> list[str]:
    lines = [f"Scenarios (--scenario NAME; default {default_scenario}):"]
    pad = max(map(len, SCENARIOS)) + 4
    for name, scenario in SCENARIOS.items():
        lines += _wrapped(f"  {name:<{pad - 2}}", scenario.summary, width)
        for algorithm, reason in scenario.unsuited.items():
            lines += _wrapped(" " * pad + "unsuited: ", f"{algorithm} ({reason})", width)
    return lines


def _algorithm_lines(width: int) -> list[str]:
    lines = ["Algorithms (--algorithms A,B,...; default: all but a scenario's unsuited):"]
    pad = max(map(len, ALGORITHMS)) + 4
    for name, cls in ALGORITHMS.items():
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("``", "`")
        lines += _wrapped(f"  {name:<{pad - 2}}", " ".join(doc.split()), width)
    return lines


def _metric_lines(width: int) -> list[str]:
    lines = [
        "Metrics (better: higher, lower or neutral; * ranked only among algorithms that",
        "completed comparable work):",
    ]
    name_w = max(map(len, METRICS))
    unit_w = max(len(m.unit) for m in METRICS.values())
    lines.append(f"  {'metric':<{name_w}}  {'unit':<{unit_w}}  better    meaning")
    for m in METRICS.values():
        gated = "*" if m.requires_comparable_completion else " "
        head = f"  {m.name:<{name_w}}  {m.unit:<{unit_w}}  {m.better:<7} {gated} "
        lines += _wrapped(head, m.meaning, max(width, len(head) + 40))
    return lines


def _wrapped(head: str, text: str, width: int) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=head,
        subsequent_indent=" " * len(head),
        break_on_hyphens=False,
    ) or [head.rstrip()]
