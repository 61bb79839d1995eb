"""``pyattacker kernel-demo``: the kernel on simulated endpoints, in virtual time.

The acquire algorithms compared on one pool, without the Runner (``pyattacker demo`` runs
the whole job)."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from pyattacker._demo import DEMO_ALGORITHMS, PROFILES, RETRY, DemoResult, run_demo
from pyattacker.errors import ConfigError
from pyattacker.pool import resolve_algorithm

__all__ = ["kernel_demo"]


def _algorithms(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise ConfigError("name at least one algorithm", field="--algorithms")
    for name in names:
        try:
            resolve_algorithm(name)
        except ConfigError as exc:
            raise ConfigError(exc.message, field="--algorithms", hint=exc.hint) from None
    return names


def _positive(name: str, value: int) -> int:
    if value < 1:
        raise ConfigError(f"must be >= 1, got {value}", field=name)
    return value


@click.command("kernel-demo")
@click.option(
    "--algorithms",
    default=",".join(DEMO_ALGORITHMS),
    show_default=True,
    help="Comma-separated acquire algorithms to compare.",
)
@click.option("--jobs", default=300, show_default=True, help="Jobs of two calls each.")
@click.option("--workers", default=24, show_default=True, help="Concurrent workers.")
@click.option("--seed", default=7, show_default=True, help="Same seed, same numbers.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead.")
def kernel_demo(algorithms: str, jobs: int, workers: int, seed: int, as_json: bool) -> None:
    """Compare acquire algorithms on three simulated endpoints, in virtual time.

    One pool holds fast-flaky, slow-steady and metered (a token bucket answering 429 with
    Retry-After). Workers run jobs of two calls; each call leases an endpoint through the
    acquire algorithm, reports how it went, and is retried as the retry policy decides.
    Simulated minutes cost a fraction of a real second; nothing touches the network.
    """
    names = _algorithms(algorithms)
    results = run_demo(
        names,
        jobs=_positive("--jobs", jobs),
        workers=_positive("--workers", workers),
        seed=seed,
    )
    if as_json:
        click.echo(json.dumps([_as_dict(r) for r in results], indent=2))
        return
    _render(results, jobs=jobs, workers=workers, seed=seed)


def _as_dict(result: DemoResult) -> dict[str, object]:
    return {name: getattr(result, name) for name in result.__dataclass_fields__}


def _render(results: list[DemoResult], *, jobs: int, workers: int, seed: int) -> None:
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=120)
    endpoints = ", ".join(f"{p.id} (capacity {p.capacity})" for p in PROFILES)
    table = Table(
        title=f"{jobs} jobs x 2 calls, {workers} workers, seed {seed} — simulated time",
        caption=f"endpoints: {endpoints}; retry: {RETRY!r}",
    )
    table.add_column("algorithm", no_wrap=True)
    headers = ("done", "failed", "calls", "429", "errors", "no lease", "retries", "sim s")
    for header in (*headers, "wait p95"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("leaked", justify="right", no_wrap=True)
    table.add_column("wall", justify="right", no_wrap=True)
    for r in results:
        table.add_row(
            r.algorithm,
            str(r.jobs_done),
            str(r.jobs_failed),
            str(r.requests),
            str(r.refusals),
            str(r.errors),
            str(r.unavailable),
            str(r.retries),
            f"{r.makespan_s:.1f}",
            f"{r.wait_p95_s:.2f} s",
            str(r.leaked),
            f"{r.wall_s * 1000:.0f} ms",
        )
    console.print(table)
    console.print(
        "Same seed, same world: every algorithm meets the same dice. 'sim s' is the "
        "simulated makespan, 'no lease' calls refused by the acquire algorithm itself, "
        "'wait p95' the lease wait, 'wall' what simulating it cost.",
        style="dim",
    )
