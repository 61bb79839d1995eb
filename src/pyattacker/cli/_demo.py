"""``pyattacker demo``: the zero-config first run of the Runner, on simulated endpoints.

The command only chooses the store, draws the progress bar and prints the report; the
simulated world, the tasks and the Runner's settings live in :mod:`pyattacker._run_demo`.
Exit codes are the run's: 0 every pipeline succeeded, 1 some failed, 2 bad input, 130
interrupted (with the command that resumes it).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from pyattacker._run_demo import DEMO_POOLS, default_store_path, demo_runner, demo_specs
from pyattacker.cli._run_commands import print_run_report
from pyattacker.cli._run_progress import RunProgress
from pyattacker.errors import ConfigError
from pyattacker.report import summarize
from pyattacker.run import Runner, RunReport

__all__ = ["demo"]


def _endpoints() -> str:
    lines = []
    for pool, profiles in DEMO_POOLS.items():
        names = ", ".join(p.id for p in profiles)
        lines.append(f"  {pool}: {names}")
    return "\n".join(lines)


_EPILOG = f"""\b
Examples:
  pyattacker demo
  pyattacker demo --pipelines 2000 --concurrency 64 --seed 3
  pyattacker demo --store mine.db            (press Ctrl-C halfway, then:)
  pyattacker demo --store mine.db --resume
  pyattacker demo --pipelines 50 --json > demo.json

\b
Pools of simulated endpoints:
{_endpoints()}

flaky answers 503 often, metered refuses with 429 + Retry-After past its rate (its
rpm is declared, so the pool paces it and it never has to), slow is slow; search-b
fails now and then. About 1 document in 100 is empty and ask refuses it with an error
no retry policy retries: those pipelines fail, and the report says why.
Nothing touches the network.
"""


@click.command("demo", epilog=_EPILOG)
@click.option(
    "--pipelines",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    metavar="N",
    help="Pipelines to run (fetch → ask → judge → score, one per question).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=24,
    show_default=True,
    metavar="N",
    help="Attempts in flight at most.",
)
@click.option(
    "--seed",
    type=int,
    default=7,
    show_default=True,
    metavar="N",
    help="Seed of the simulated endpoints' dice (same seed, same dice).",
)
@click.option(
    "--store",
    "store",
    metavar="PATH",
    help="SQLite file to record the run in [default: runs/demo-<timestamp>.db, a new file].",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the run recorded in --store: succeeded pipelines are skipped, the others "
    "go on from their last checkpoint.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run and its report as one JSON document on stdout.",
)
def demo(
    pipelines: int, concurrency: int, seed: int, store: str | None, resume: bool, as_json: bool
) -> int:
    """Run simulated pipelines through the real Runner, with retries, in seconds.

    Each pipeline fetches a document (pool "retrieval"), asks a model about it and has a
    model judge the answer (pool "llm"), then scores it locally. Attempts lease endpoints
    from the pools, failed attempts are retried with exponential backoff (honouring
    Retry-After), and every attempt, decision and checkpoint is recorded in a SQLite store
    that `pyattacker report` and `pyattacker export` read.
    """
    path = _store_path(store, resume=resume)
    runner = demo_runner(path, seed=seed, concurrency=concurrency)
    with runner:
        report = _run(runner, pipelines=pipelines, resume=resume, quiet=as_json)
        if as_json:
            document = {"run": report.to_dict(), "report": summarize(runner.store)}
            click.echo(json.dumps(document, indent=2))
        else:
            print_run_report(runner.store, as_json=False, errors=5)
    click.echo(_outcome(report, path, requested=pipelines), err=as_json)
    return report.exit_code


def _store_path(store: str | None, *, resume: bool) -> Path:
    """The store to record to; refuses ``--resume`` without an existing ``--store``."""
    if store is None:
        if resume:
            raise ConfigError(
                "needs --store: which run should it continue?",
                field="--resume",
                hint="pyattacker demo --store runs/demo-<timestamp>.db --resume",
            )
        path = default_store_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(store)
    if resume and not path.is_file():
        raise ConfigError(
            f"there is no store at {store} to resume",
            field="--store",
            hint="drop --resume to start a new run there",
        )
    return path


def _run(runner: Runner, *, pipelines: int, resume: bool, quiet: bool) -> RunReport:
    progress = (
        None if quiet else RunProgress.for_stderr(runner.stats, total=pipelines, label="demo")
    )
    if progress is None:
        return runner.run(demo_specs(pipelines), resume=resume)
    with progress:
        return runner.run(demo_specs(pipelines), resume=resume)


def _outcome(report: RunReport, path: Path, *, requested: int) -> str:
    """How the run ended, in one line, and the commands to look further (or resume).

    Counts are the store's (earlier runs included); pipelines of the input that no run has
    reached yet are "not started"."""
    by_state = report.by_state
    total = max(requested, sum(by_state.values()))
    succeeded, failed = by_state.get("succeeded", 0), by_state.get("failed", 0)
    head = (
        f"Run {report.run_id} {report.state.value} in {report.elapsed_s:.1f} s: "
        f"{succeeded} of {total} pipelines succeeded"
    )
    if failed:
        head += f", {failed} failed"
    resume = f"pyattacker demo --store {path} --resume"
    if report.resume_hint is not None:
        unfinished = total - succeeded - failed
        why = f" ({report.stop_reason})" if report.stop_reason else ""
        return (
            f"{head}, {unfinished} unfinished.\nInterrupted{why}; every finished task is "
            f"kept. Continue where it stopped with:\n  {resume}"
        )
    head += "."
    lines = [
        head,
        f"Recorded in {path}. Look closer with:",
        f"  pyattacker report {path}",
        f"  pyattacker export {path} attempts.csv --rows attempts --format csv",
        f"  pyattacker export {path} results.csv --rows results    (one row per item)",
    ]
    if failed:
        lines.append(f"  {resume}    (retries the {failed} failed from their last checkpoint)")
    return "\n".join(lines)
