"""``pyattacker bench``: which acquire algorithm should this workload use?

A shell over :mod:`pyattacker.benchmark`: it resolves the scenario (a shipped name or a
file) and the flags, checks every name and output path before the first run, calls
:func:`~pyattacker.benchmark.run_benchmark`, and prints the report. Progress goes to
stderr, the table to stdout; the progress display and the ``--list`` text are in
:mod:`pyattacker.cli._bench_output`. A run that cannot finish (wall budget, stalled
simulation) is an error with exit code 1, never partial numbers.

Output paths are resolved once (``~`` expanded, symlinks followed) before the first run;
the resolved path is the one checked, compared with the other outputs and the scenario
file, and written. Every report is rendered and written to a temporary file beside its
target before anything is printed or renamed, so a failure to write (a full disk) leaves
stdout empty and every old file in place; only the renames, one per file, come after.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from pyattacker._atomic import check_output, replace, stage
from pyattacker._units import parse_duration
from pyattacker.benchmark import (
    SCENARIOS,
    BenchmarkReport,
    check_algorithms,
    default_algorithms,
    get_scenario,
    load_scenario_file,
    run_benchmark,
    usable_cores,
)
from pyattacker.cli._bench_output import progress_for_stderr, render_list
from pyattacker.cli._html import bench_page, html_option
from pyattacker.clock import wall_time
from pyattacker.errors import ConfigError, PyAttackerError, SimulationError
from pyattacker.world import Scenario

__all__ = ["bench_command"]

DEFAULT_SCENARIO = "bursty_provider"

_EPILOG = f"""\b
Examples:
  pyattacker bench                      {DEFAULT_SCENARIO}: the suited algorithms, 3 seeds
  pyattacker bench --list               scenarios, algorithms and every metric
  pyattacker bench --algorithms wait,immediate --seeds 1 --jobs 200 --concurrency 4 \\
      --horizon 60
  pyattacker bench --scenario multi_vendor --jobs-parallel 4 --markdown multi.md
  pyattacker bench --seeds 5 --html bench.html       the same, as a page with charts
  pyattacker bench --scenario-file my_provider.toml --json - | jq .winners

\b
A scenario file (.toml, .json, .yaml) mirrors pyattacker.world.Scenario: top-level fields,
[[endpoints]] tables with latency, failures, rate_limit, cache and degradation tables,
[cycle], [[outages]], [retry] (Retrying settings) and [unsuited]; base = "NAME" starts from
a shipped scenario and overrides what the file names. A file with a base and no name is
reported under its own name, never the shipped one: my_provider.toml is
"my_provider (from NAME)". A JSON report of this command (--json) is a scenario file too:
its scenario.definition is the scenario it ran. A key may appear once per table, and YAML
reads as YAML 1.2 (010 is ten, 1:30 a string). --jobs, --concurrency, --horizon and
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
    help="Your own scenario, from a .toml, .json or .yaml file, or the JSON report of an "
    "earlier run (instead of --scenario).",
)
@click.option(
    "--list",
    "list_",
    is_flag=True,
    help="Print scenarios, algorithms, metrics; exit (takes no other flag).",
)
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
    help="Processes sharing the runs [default: 0, one per core this process may use]; the "
    "numbers do not change, only wall_s.",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="",
    metavar="[ADDRESS]",
    help="Run the runs as Ray tasks (pip install 'pyattacker[ray]'): on the cluster at "
    "ADDRESS (e.g. 10.0.0.5:6379, auto), or without one on a local Ray of --jobs-parallel "
    "CPUs. The report is the same. A cluster lost mid-sweep exits 1 with no report, "
    "saying how many runs were done.",
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
@html_option("the report (each algorithm's spread over the seeds, the winners and why)")
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
    ray_address: str | None,
    json_path: str | None,
    markdown_path: str | None,
    html_path: str | None,
    quiet: bool,
) -> int:
    """Simulate an API provider and run the acquire algorithms against it: one row per
    metric, the algorithms that can claim it (or nobody), over several seeds.
    """
    if list_:
        _check_list_alone()
        click.echo(render_list(DEFAULT_SCENARIO), nl=False)
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
    outputs = _Outputs(json_path, markdown_path, scenario_file, html_path)
    plan = _Plan(scenario, names, seeds, jobs_parallel or usable_cores(), ray_address)
    report = _sweep(plan, real_clock=clock == "real", speedup=speedup, quiet=quiet)
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


def _check_list_alone() -> None:
    """``--list`` prints and exits: a flag beside it would be silently ignored, so refuse."""
    ctx = click.get_current_context()
    given = [
        max(param.opts, key=len)
        for param in ctx.command.params
        if param.name != "list_"
        and ctx.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE
    ]
    if given:
        raise ConfigError(
            f"prints the lists and exits, so it takes no other flag (got {', '.join(given)})",
            field="--list",
            hint="run the lists and the benchmark separately",
        )


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
        scenario = _flagged(lambda: get_scenario(DEFAULT_SCENARIO if name is None else name))
    changes = {field: value for field, value in overrides.items() if value is not None}
    return _flagged(lambda: scenario.with_overrides(**changes)) if changes else scenario


def _from_file(path: str) -> Scenario:
    try:
        return load_scenario_file(_resolved(path, "--scenario-file"))
    except ConfigError as exc:
        if exc.field is not None:
            raise  # a mistake inside the file: its field is the path of the key
        raise ConfigError(exc.message, field="--scenario-file", hint=exc.hint) from None


def _algorithms(text: str | None, scenario: Scenario) -> list[str]:
    if text is None:
        return default_algorithms(scenario)
    return _flagged(lambda: check_algorithms(n.strip() for n in text.split(",") if n.strip()))


@dataclass(frozen=True)
class _Plan:
    """What the sweep will run: ``names`` x ``seeds`` on ``processes`` processes."""

    scenario: Scenario
    names: list[str]
    seeds: int
    processes: int
    ray: str | None = None  # None: local processes; "": a local Ray; else a cluster address

    @property
    def runs(self) -> int:
        return len(self.names) * self.seeds

    def __str__(self) -> str:
        s, runs = self.scenario, self.runs
        where = "1 process" if self.processes == 1 else f"{min(self.processes, runs)} processes"
        if self.ray is not None:
            where = f"Ray ({self.ray or 'a local Ray or RAY_ADDRESS'})"
        return (
            f"bench {s.name}: {len(self.names)} algorithm(s) ({', '.join(self.names)}) x "
            f"{self.seeds} seed(s) = {runs} run(s) of {s.jobs:,} jobs on {where}"
        )


def _sweep(plan: _Plan, *, real_clock: bool, speedup: float | None, quiet: bool) -> BenchmarkReport:
    """Run ``plan``, with the plan, the progress and the elapsed time on stderr unless
    ``quiet``. The report's headline only knows the runs' summed time; the elapsed time
    is known here."""
    progress = None if quiet else progress_for_stderr(plan.runs)
    if progress is not None:
        click.echo(str(plan), err=True)
    started = wall_time()
    try:
        with progress or _nothing():
            report = run_benchmark(
                plan.scenario,
                plan.names,
                seeds=plan.seeds,
                jobs_parallel=plan.processes,
                clock="real" if real_clock else "virtual",
                speedup=10.0 if speedup is None else speedup,
                on_result=None if progress is None else progress.finished,
                ray=False if plan.ray is None else plan.ray or True,
            )
    except SimulationError as exc:  # its message has the numbers; the context repeats them
        raise type(exc)(exc.message) from None
    if progress is not None:
        click.echo(f"bench: {plan.runs} run(s) in {wall_time() - started:.2f}s elapsed", err=True)
    return report


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# -------------------------------------------------------------------------- the outputs


@dataclass(frozen=True)
class _Target:
    """One report file: the flag that named it, the text given, and the resolved path."""

    flag: str
    given: str
    path: Path


class _Outputs:
    """Where the reports go. Built before the first run: a path that could not be written,
    or that names the same file as another output or the scenario file, is refused (exit
    2) while nothing has run. Files are replaced all together, atomically each, after."""

    def __init__(
        self,
        json_path: str | None,
        markdown_path: str | None,
        scenario_file: str | None,
        html_path: str | None = None,
    ) -> None:
        if json_path == "-" and markdown_path == "-":
            raise ConfigError(
                "only one report can go to stdout", field="--markdown", hint="name a file"
            )
        given = {"--json": json_path, "--markdown": markdown_path, "--html": html_path}
        self.to_stdout = next((flag for flag, path in given.items() if path == "-"), None)
        self.files = [
            _Target(flag, path, _resolved(path, flag))
            for flag, path in given.items()
            if path is not None and path != "-"
        ]
        _check_distinct(self.files, scenario_file)
        for target in self.files:
            check_output(target.path, target.flag, target.given)

    def write(self, report: BenchmarkReport, *, quiet: bool) -> None:
        """Every report rendered, the files staged beside their targets, then the table on
        stdout (on stderr when a report goes there) and the files renamed into place."""
        renderers: dict[str, Callable[[], str]] = {
            "--json": lambda: json.dumps(report.to_dict(), indent=2, allow_nan=False),
            "--markdown": report.render_markdown,
            "--html": lambda: bench_page(report),
        }
        texts = {t.flag: renderers[t.flag]() for t in self.files}
        table = report.render_table()
        stdout = None if self.to_stdout is None else renderers[self.to_stdout]()
        with _Staged() as staged:
            for target in self.files:
                staged.add(target, texts[target.flag] + "\n")
            _print(table, stdout, quiet=quiet)
            staged.commit()


def _print(table: str, report: str | None, *, quiet: bool) -> None:
    """The table on stdout; or, when a report goes there, the report, and the table on
    stderr unless ``quiet``."""
    if report is None:
        click.echo(table, nl=False)
        return
    if not quiet:
        click.echo(table, err=True, nl=False)
    click.echo(report)


def _resolved(given: str, flag: str) -> Path:
    """``given`` with ``~`` expanded and symlinks followed: the one path used from here on."""
    try:
        return Path(given).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # no home for ``~user``; a symlink loop
        raise ConfigError(f"cannot resolve {given}: {exc}", field=flag) from None


def _check_distinct(targets: list[_Target], scenario_file: str | None) -> None:
    """Two outputs naming one file would overwrite each other, and an output naming the
    scenario file would replace the input with the report: refuse either."""
    named = [(t.flag, t.path) for t in targets]
    if scenario_file is not None:
        named.insert(0, ("--scenario-file", _resolved(scenario_file, "--scenario-file")))
    for index, (flag, path) in enumerate(named):
        for other_flag, other in named[:index]:
            if _same_file(path, other):
                raise ConfigError(
                    f"{other_flag} and {flag} name the same file, {path}",
                    field=flag,
                    hint="write each report to a file of its own",
                )


def _same_file(a: Path, b: Path) -> bool:
    """The same resolved path, or two names of one existing file (a hard link)."""
    return a == b or (a.exists() and b.exists() and os.path.samefile(a, b))


class _Staged:
    """Reports written to temporary files beside their targets, renamed over them by
    :meth:`commit`; leaving the ``with`` block removes every one not renamed."""

    def __init__(self) -> None:
        self._pending: list[tuple[Path, _Target]] = []

    def __enter__(self) -> _Staged:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for temporary, _ in self._pending:
            temporary.unlink(missing_ok=True)

    def add(self, target: _Target, text: str) -> None:
        try:
            temporary, _ = stage(target.path, lambda t: t.write_text(text, encoding="utf-8"))
        except OSError as exc:
            raise _unwritable(target, exc) from None
        self._pending.append((temporary, target))

    def commit(self) -> None:
        while self._pending:
            temporary, target = self._pending[0]
            try:
                replace(temporary, target.path)
            except OSError as exc:
                raise _unwritable(target, exc) from None
            self._pending.pop(0)


def _unwritable(target: _Target, exc: OSError) -> PyAttackerError:
    return PyAttackerError(f"could not write {target.given}: {exc.strerror or exc}")
