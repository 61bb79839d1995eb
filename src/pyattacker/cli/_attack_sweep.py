"""``attack --sweep`` and ``--warmup``: their options, and the sweep's command.

A sweep is a loop over ``run_attack``, one level after another, each level the plan the
other flags describe with the level's load model in place of ``--rate``/``--clients``
(see :mod:`pyattacker.attack._sweep` for the levels, :mod:`pyattacker.report._sweep` for
the report and the saturation rule). Everything is checked before the first level
sends anything: the sweep's spec, every flag (the first level's plan is built first),
and the output paths.

Refused with ``--sweep`` (exit 2), because they mean one load or one verdict (or one live
run): ``--rate``, ``--stages``, ``--think``, ``--threshold``, ``--abort-on-fail``,
``--goodput`` and ``--serve``. ``--samples FILE`` holds every level's rows, each with its
level's number and name (``cli/_sweep_samples.py``). ``--clients`` sets the throughput
level of ``--sweep`` alone (default 64). With ``--workers``, each level runs on the
workers its load can be shared by (``level_workers``). Exit codes: 0 every request of
every level succeeded (and its rows were written), 1 some did not, 3 a worker died during
a level, 130 interrupted (the levels done are reported).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import click

from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    LoadModel,
    SweepLevel,
    SweepSpec,
    Warmup,
    sweep,
)
from pyattacker.cli._attack_flags import AttackFlags
from pyattacker.cli._attack_workers import (
    LOST_EXIT,
    check_shared,
    level_workers,
    run_level,
    workers_exit,
)
from pyattacker.cli._html import write_html
from pyattacker.cli._progress import LiveProgress
from pyattacker.cli._report_files import check_report_path, write_report
from pyattacker.cli._sweep_samples import SweepSamples
from pyattacker.errors import ConfigError
from pyattacker.http import Limits

__all__ = ["nothing_measured", "sweep_command", "sweep_options", "warmup_of"]

F = TypeVar("F", bound=Callable[..., Any])

_SWEEP_HELP = (
    "LLM (or HTTP) sweep, one attack per level, one report with a row per level and the "
    "level where the endpoint saturates. Alone: a synchronous level (1 client), a "
    "throughput level (--clients clients, default 64), then --sweep-levels rates evenly "
    "spaced between the two levels' OK answers per second. concurrency=1,8,32: a closed "
    "model at each. rate=1/s,5/s: an open model at each (a list runs in increasing order). "
    "Each level runs --duration or --requests "
    "(and --warmup). --samples FILE holds every level's rows, with columns level and load."
)


def sweep_options(command: F) -> F:
    """``--sweep``, ``--sweep-levels`` and ``--warmup`` on ``attack``."""
    options = [
        click.option(
            "--warmup",
            metavar="DURATION|N",
            help="Send the requests scheduled in the first DURATION (e.g. 10s), or the "
            "first N requests (with --scenario: flows, with all their steps), but leave them "
            "out of every figure (totals, percentiles, "
            "windows, targets, samples, thresholds); the report says how many were sent. "
            "Part of --duration/--requests.",
        ),
        click.option(
            "--sweep-levels",
            type=int,
            metavar="N",
            help="With --sweep alone: rates between synchronous and throughput.  [default: 5]",
        ),
        click.option(
            "--sweep",
            is_flag=False,
            flag_value="auto",
            metavar="[concurrency=..|rate=..]",
            help=_SWEEP_HELP,
        ),
    ]
    for option in options:
        command = option(command)
    return command


def warmup_of(flags: AttackFlags) -> Warmup | None:
    """The ``--warmup`` the flags ask for, or None. Called for every plan the command
    builds, so it also refuses ``--sweep-levels`` without ``--sweep`` (it would be
    silently ignored)."""
    if flags.sweep is None and flags.sweep_levels is not None:
        raise ConfigError("applies to --sweep", field="--sweep-levels",
                          hint="add --sweep")  # fmt: skip
    return None if flags.warmup is None else Warmup.parse(flags.warmup, field="--warmup")


def nothing_measured(result: AttackResult) -> str | None:
    """The note when a warmup took every request of a run that was not interrupted (a
    closed model's time warmup beside ``--requests``, which no check before the run can
    rule out: its requests come as fast as the answers do), else None."""
    warmup = result.warmup
    if warmup is None or result.total.requests or result.interrupted or not warmup.scheduled:
        return None
    return (
        f"nothing measured: the warmup took all {warmup.scheduled:,} requests of the run "
        "(give more --requests, or a shorter --warmup)"
    )


def sweep_command(
    flags: AttackFlags, plan_of: Callable[[AttackFlags], AttackPlan], limits: Limits
) -> int:
    """Run the sweep the flags describe (``plan_of`` turns flags into a plan, naming the
    flag in its errors) and write its reports; the exit code."""
    from pyattacker.report import sweep_dict, sweep_html, sweep_json, sweep_markdown, sweep_text

    spec = _spec(flags)
    _check_outputs(flags)

    def plan_for(load: LoadModel) -> AttackPlan:
        return plan_of(_level_flags(flags, load))

    for level in spec.first_levels():  # every flag checked before any traffic
        plan = plan_for(level.load)
        check_shared(plan, level_workers(flags, plan))
    samples = None if flags.samples_path is None else SweepSamples(flags.samples_path)
    runner = _Runner(flags.quiet, functools.partial(run_level, flags, limits=limits), samples)
    try:
        result = sweep(spec, plan_for, runner.run, on_level=runner.announce(spec.planned()))
    finally:
        if samples is not None:
            samples.close()
    data = sweep_dict(result)
    click.echo(sweep_text(result, data), err=flags.json_path == "-")
    if flags.json_path:
        write_report(flags.json_path, sweep_json(result, data))
    if flags.markdown_path:
        write_report(flags.markdown_path, sweep_markdown(result, data))
    if flags.html_path is not None:
        write_html(flags.html_path, sweep_html(data))
    if result.interrupted:
        click.echo("interrupted: the report covers the levels that ran", err=True)
        return 130
    if any(workers_exit(r, 0) == LOST_EXIT for _, r in result.runs):
        return LOST_EXIT  # a worker died during a level
    empty = [level.name for level, r in result.runs if nothing_measured(r)]
    if empty:
        what = f"nothing measured at {', '.join(empty)}: the warmup took every request"
        click.echo(f"{what} of the level (give more --requests, or a shorter --warmup)", err=True)
        return 1
    if runner.samples_failed or (samples is not None and samples.failed is not None):
        return 1
    return 0 if all(r.failed_requests == 0 for _, r in result.runs) else 1


class _Runner:
    """Runs each level with live progress on a terminal (none when ``quiet``), its rows
    into ``samples`` (if any) as the level ends."""

    def __init__(
        self,
        quiet: bool,
        run: Callable[..., tuple[AttackResult, bool]],
        samples: SweepSamples | None,
    ) -> None:
        """``run(plan, on_progress=..., samples_path=...)`` runs one level (in this process
        or on workers) and says whether writing its rows failed."""
        self._quiet, self._run, self._samples = quiet, run, samples
        self._level: tuple[int, str] = (0, "")
        self.samples_failed = False

    def announce(self, planned: int) -> Callable[[int, SweepLevel], None]:
        def on_level(i: int, level: SweepLevel) -> None:
            self._level = (i, level.name)
            total = f"{planned}" if i < planned else "?"
            click.echo(f"sweep level {i + 1}/{total}: {level.name} — Ctrl-C stops and "
                       "reports the levels done", err=True)  # fmt: skip

        return on_level

    def run(self, plan: AttackPlan) -> AttackResult:
        live = None if self._quiet else LiveProgress.for_stderr()
        i, name = self._level
        samples = self._samples
        try:
            result, failed = self._run(
                plan,
                on_progress=None if live is None else live.update,
                samples_path=None if samples is None else samples.level_path(i),
                live=live,  # closed before the level's worker lines
            )
        finally:
            if live is not None:
                live.close()
            if samples is not None:  # (also the rows of a level Ctrl-C cut short)
                samples.append(i, name)
        self.samples_failed = self.samples_failed or failed
        return result


_REFUSED = {
    "rate": "--rate",
    "stages": "--stages",
    "think": "--think",
    "thresholds": "--threshold",
    "abort_on_fail": "--abort-on-fail",
    "goodput": "--goodput",
    "serve": "--serve",
}


def _spec(flags: AttackFlags) -> SweepSpec:
    assert flags.sweep is not None
    if flags.scenario is not None:
        raise ConfigError(
            "--scenario cannot be combined with --sweep",
            field="--scenario",
            hint="sweep the endpoint with plain requests, then run the scenario at a level",
        )
    for name, flag in _REFUSED.items():
        if getattr(flags, name):
            raise ConfigError(
                "cannot be combined with --sweep",
                field=flag,
                hint="the sweep sets each level's load and judges no single level; run a "
                "plain attack at the level you want to gate or watch",
            )
    if flags.clients is not None and flags.clients < 1:
        raise ConfigError(f"must be >= 1, got {flags.clients}", field="--clients")
    if flags.sweep_levels is not None and flags.sweep.strip() != "auto":
        raise ConfigError("applies to --sweep alone (its rates between)", field="--sweep-levels",
                          hint="a list sweep names each level itself")  # fmt: skip
    arrival = flags.arrival or "constant"
    return SweepSpec.parse(
        flags.sweep,
        levels=5 if flags.sweep_levels is None else flags.sweep_levels,
        max_concurrency=flags.clients,
        arrival=arrival,  # type: ignore[arg-type]
    )


def _level_flags(flags: AttackFlags, load: LoadModel) -> AttackFlags:
    """The flags of one level: its load in place of the sweep's."""
    if isinstance(load, ClosedModel):
        return replace(flags, clients=load.clients, rate=None, arrival=None, stages=None)
    return replace(flags, rate=f"{load.rate!r}/s", clients=None, stages=None)


def _check_outputs(flags: AttackFlags) -> None:
    check_report_path(flags.json_path, "--json")
    check_report_path(flags.markdown_path, "--markdown")
    check_report_path(flags.samples_path, "--samples")
