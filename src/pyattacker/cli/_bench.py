"""``pyattacker bench``: which acquire algorithm should this workload use?

A shell over :mod:`pyattacker.benchmark`: it resolves the scenario (a shipped name or a
file) and the flags, checks every name and output path before the first run, calls
:func:`~pyattacker.benchmark._run.run_benchmark`, and prints the report. Progress goes to
stderr (a bar on a terminal, one plain line per finished run otherwise), the table to
stdout. ``--list`` is generated from ``SCENARIOS``, ``ALGORITHMS`` and ``METRICS``, never a
second list. A run that cannot finish (wall budget, stalled simulation) is an error with
exit code 1, never partial numbers.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pyattacker._units import parse_duration
from pyattacker.benchmark._file import load_scenario_file
from pyattacker.benchmark._metrics import METRICS
from pyattacker.benchmark._report import BenchmarkReport, default_algorithms
from pyattacker.benchmark._result import RunResult
from pyattacker.benchmark._run import check_algorithms, run_benchmark
from pyattacker.benchmark._scenarios import SCENARIOS, get_scenario
from pyattacker.errors import ConfigError, PyAttackerError, SimulationError
from pyattacker.pool import ALGORITHMS
from pyattacker.world import Scenario

__all__ = ["bench_command", "render_list"]

DEFAULT_SCENARIO = "bursty_provider"

_EPILOG = f"""\b
Examples:
  pyattacker bench                      {DEFAULT_SCENARIO}: the suited algorithms, 3 seeds
  pyattacker bench --list               scenarios, algorithms and every metric
  pyattacker bench --algorithms wait,immediate --seeds 1 --jobs 200 --concurrency 4 \\
      --horizon 60
  pyattacker bench --scenario multi_vendor --jobs-parallel 4 --markdown multi.md
  pyattacker bench --scenario-file my_provider.toml --json - | jq .winners

\b
A scenario file (.toml, .json, .yaml) mirrors pyattacker.world.Scenario: top-level fields,
[[endpoints]] tables with latency, failures, rate_limit, cache and degradation tables,
[cycle], [[outages]], [retry] (Retrying settings) and [unsuited]; base = "NAME" starts from
a shipped scenario and overrides what the file names. --jobs, --concurrency, --horizon and
--wall-budget then override the scenario.

\b
The numbers are properties of the scenario's assumptions, not of this machine (wall_s is
cost, never quality), and there is no composite score: each row names the algorithms that
can claim it, or nobody. An algorithm the scenario declares unsuited runs only when named
in --algorithms, and is shown N/A, never ranked.
Exit codes: 0 done, 1 a run could not finish (wall budget, stalled), 2 bad input,
130 interrupted.
"""


@click.command("bench", epilog=_EPILOG)
@click.option(
    "--scenario",
    "scenario_name",
    metavar="NAME",
    help=f"A shipped scenario: {', '.join(SCENARIOS)} [default: {DEFAULT_SCENARIO}].",
)
@click.option(
    "--scenario-file",
    metavar="PATH",
    help="Your own scenario, from a .toml, .json or .yaml file (instead of --scenario).",
)
@click.option("--list", "list_", is_flag=True, help="Print scenarios, algorithms, metrics; exit.")
@click.option(
    "--algorithms",
    metavar="A,B,...",
    help="Comma-separated algorithms [default: every one the scenario can exercise].",
)
@click.option(
    "--seeds",
    default=3,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Seeds per algorithm: the scenario's seed + 0 .. N-1.",
)
@click.option("--jobs", type=click.IntRange(min=1), metavar="N", help="Override: jobs to run.")
@click.option("--concurrency", type=click.IntRange(min=1), metavar="N", help="Override: workers.")
@click.option(
    "--horizon",
    metavar="SECONDS",
    help="Override: no job starts after this much simulated time (e.g. 90, 2m).",
)
@click.option(
    "--wall-budget",
    metavar="SECONDS",
    help="Override: real seconds one run may take before it is an error.",
)
@click.option(
    "--clock",
    type=click.Choice(["virtual", "real"]),
    default="virtual",
    show_default=True,
    help="Simulated time, or real time sped up by --speedup (the differential check).",
)
@click.option(
    "--speedup",
    type=click.FloatRange(min=0.0, min_open=True),
    metavar="X",
    help="With --clock real: simulated seconds per real second [default: 10].",
)
@click.option(
    "--jobs-parallel",
    default=0,
    type=click.IntRange(min=0),
    metavar="N",
    help="Processes sharing the runs [default: 0, one per core]; the numbers do not "
    "change, only wall_s.",
)
@click.option(
    "--json", "json_path", metavar="PATH", help="Write the JSON report to PATH ('-': stdout)."
)
@click.option(
    "--markdown",
    "markdown_path",
    metavar="PATH",
    help="Write the Markdown report to PATH ('-': stdout).",
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No progress on stderr (nor a copy of the table when stdout carries a report).",
)
def bench_command(
    scenario_name: str | None,
    scenario_file: str | None,
    list_: bool,
    algorithms: str | None,
    seeds: int,
    jobs: int | None,
    concurrency: int | None,
    horizon: str | None,
    wall_budget: str | None,
    clock: str,
    speedup: float | None,
    jobs_parallel: int,
    json_path: str | None,
    markdown_path: str | None,
    quiet: bool,
) -> int:
    """Simulate an API provider and run the acquire algorithms against it: one row per
    metric, the algorithms that can claim it (or nobody), over several seeds.
    """
    if list_:
        click.echo(render_list(), nl=False)
        return 0
    overrides = {
        "jobs": jobs,
        "concurrency": concurrency,
        "horizon_s": _seconds(horizon, "--horizon"),
        "wall_budget_s": _seconds(wall_budget, "--wall-budget"),
    }
    scenario = _scenario(scenario_name, scenario_file, overrides)
    names = _algorithms(algorithms, scenario)
    if speedup is not None and clock != "real":
        raise ConfigError(
            "applies to the real clock only", field="--speedup", hint="add --clock real"
        )
    outputs = _Outputs(json_path, markdown_path)
    jobs_parallel = jobs_parallel or os.cpu_count() or 1
    runs = len(names) * seeds
    progress = None if quiet else _progress_for_stderr(runs)
    if progress is not None:
        click.echo(_plan(scenario, names, seeds, jobs_parallel), err=True)
    try:
        with progress or _nothing():
            report = run_benchmark(
                scenario,
                names,
                seeds=seeds,
                jobs_parallel=jobs_parallel,
                clock="real" if clock == "real" else "virtual",
                speedup=10.0 if speedup is None else speedup,
                on_result=None if progress is None else progress.finished,
            )
    except SimulationError as exc:  # its message has the numbers; the context repeats them
        raise type(exc)(exc.message) from None
    outputs.write(report, quiet=quiet)
    return 0


# --------------------------------------------------------------------------- the inputs

_FLAGS = {
    "scenario": "--scenario",
    "algorithms": "--algorithms",
    "jobs": "--jobs",
    "concurrency": "--concurrency",
    "horizon_s": "--horizon",
    "wall_budget_s": "--wall-budget",
}

T = TypeVar("T")


def _flagged(make: Callable[[], T]) -> T:
    """``make()``; a ConfigError naming a library argument is re-raised naming the flag."""
    try:
        return make()
    except ConfigError as exc:
        flag = _FLAGS.get(exc.field or "")
        if flag is None:
            raise
        raise ConfigError(exc.message, field=flag, hint=exc.hint) from None


def _seconds(text: str | None, flag: str) -> float | None:
    return None if text is None else parse_duration(text, field=flag)


def _scenario(name: str | None, path: str | None, overrides: Mapping[str, Any]) -> Scenario:
    if path is not None and name is not None:
        raise ConfigError(
            "give --scenario or --scenario-file, not both",
            field="--scenario-file",
            hint=f'a file can start from a shipped scenario: base = "{name}"',
        )
    if path is not None:
        scenario = _from_file(path)
    else:
        scenario = _flagged(lambda: get_scenario(name or DEFAULT_SCENARIO))
    changes = {field: value for field, value in overrides.items() if value is not None}
    return _flagged(lambda: scenario.with_overrides(**changes)) if changes else scenario


def _from_file(path: str) -> Scenario:
    try:
        return load_scenario_file(path)
    except ConfigError as exc:
        if exc.field is not None:
            raise  # a mistake inside the file: its field is the path of the key
        raise ConfigError(exc.message, field="--scenario-file", hint=exc.hint) from None


def _algorithms(text: str | None, scenario: Scenario) -> list[str]:
    if text is None:
        return default_algorithms(scenario)
    return _flagged(lambda: check_algorithms(n.strip() for n in text.split(",") if n.strip()))


def _plan(scenario: Scenario, names: list[str], seeds: int, processes: int) -> str:
    runs = len(names) * seeds
    where = "1 process" if processes == 1 else f"{min(processes, runs)} processes"
    return (
        f"bench {scenario.name}: {len(names)} algorithm(s) ({', '.join(names)}) x {seeds} "
        f"seed(s) = {runs} run(s) of {scenario.jobs:,} jobs on {where}"
    )


# -------------------------------------------------------------------------- the outputs


class _Outputs:
    """Where the reports go. Built before the first run: a path that could not be written
    is refused (exit 2) while nothing has run; files are replaced atomically after."""

    def __init__(self, json_path: str | None, markdown_path: str | None) -> None:
        if json_path == "-" and markdown_path == "-":
            raise ConfigError(
                "only one report can go to stdout", field="--markdown", hint="name a file"
            )
        if json_path is not None and json_path == markdown_path:
            raise ConfigError("--json and --markdown name the same file", field="--markdown")
        for path, flag in ((json_path, "--json"), (markdown_path, "--markdown")):
            if path is not None and path != "-":
                _check_writable(path, flag)
        self.json_path = json_path
        self.markdown_path = markdown_path

    def write(self, report: BenchmarkReport, *, quiet: bool) -> None:
        """The table on stdout, unless a report goes there (then on stderr), and the files."""
        reports: list[tuple[str | None, Callable[[], str]]] = [
            (self.json_path, lambda: json.dumps(report.to_dict(), indent=2, allow_nan=False)),
            (self.markdown_path, report.render_markdown),
        ]
        to_stdout = [render for path, render in reports if path == "-"]
        table = report.render_table()
        if to_stdout:
            if not quiet:
                click.echo(table, err=True, nl=False)
            click.echo(to_stdout[0]())
        else:
            click.echo(table, nl=False)
        for path, render in reports:
            if path is not None and path != "-":
                _write_atomically(Path(path), render() + "\n")


def _check_writable(path: str, flag: str) -> None:
    target = Path(path).expanduser()
    parent = target.absolute().parent
    if target.is_dir():
        raise ConfigError(f"{path} is a folder", field=flag, hint="name a file in it")
    if not parent.is_dir():
        raise ConfigError(
            f"the folder {parent} does not exist", field=flag, hint="create it, or write elsewhere"
        )
    if not os.access(target if target.exists() else parent, os.W_OK):
        raise ConfigError(f"cannot write {path}", field=flag, hint="check its permissions")


def _write_atomically(path: Path, text: str) -> None:
    """A temporary file beside ``path``, flushed, then renamed over it: a reader sees the
    old file or the whole new one."""
    try:
        fd, name = tempfile.mkstemp(dir=path.absolute().parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise PyAttackerError(f"could not write {path}: {exc.strerror or exc}") from None
    temporary = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        temporary.chmod(0o644)  # mkstemp makes it private; a report is an ordinary file
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise PyAttackerError(f"could not write {path}: {exc.strerror or exc}") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


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


def _progress_for_stderr(total: int) -> _Lines:
    console = Console(file=sys.stderr)
    return _Bar(total, console) if console.is_terminal else _Lines(total)


def _run_line(run: RunResult) -> str:
    m = run.metrics
    return f"{run.algorithm} seed={run.seed} jobs_done={m['jobs_done']:g} wall_s={m['wall_s']:.2f}"


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# ----------------------------------------------------------------------------- --list


def render_list(width: int | None = None) -> str:
    """Scenarios, algorithms and metrics, from ``SCENARIOS``, ``ALGORITHMS``, ``METRICS``,
    wrapped to ``width`` (default: the terminal's, between 80 and 140)."""
    if width is None:
        width = min(max(shutil.get_terminal_size((100, 24)).columns, 80), 140)
    return (
        "\n".join(
            [*_scenario_lines(width), "", *_algorithm_lines(width), "", *_metric_lines(width)]
        )
        + "\n"
    )


def _scenario_lines(width: int) -> list[str]:
    lines = [f"Scenarios (--scenario NAME; default {DEFAULT_SCENARIO}):"]
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
