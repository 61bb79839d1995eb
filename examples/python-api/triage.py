"""Triage support tickets from a CSV file with the Python API: run, resume, results.

``python triage.py`` runs every ticket of ``tickets.csv`` through ``classify → route``,
recording to ``triage.db``; run it again after a crash or Ctrl-C and it continues (a
ticket already routed is not classified again). Then it writes ``results.csv``, one row
per ticket, and prints how many went to each team.

``classify`` leases one of two keys from the pool ``llm``; the model is ``FakeClassifier``,
a local stand-in (no network). Swap in your SDK's client in ``client()`` to use a real one.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyattacker import Pool, Resource, Runner, TaskContext, pipeline, task
from pyattacker.store import export_rows, results

HERE = Path(__file__).resolve().parent
STORE = HERE / "triage.db"
LABELS = {"refund": "billing", "invoice": "billing", "crash": "engineering", "login": "accounts"}


class FakeClassifier:
    """A stand-in for an LLM client on one key: labels a ticket by its first known word."""

    def __init__(self, key: str) -> None:
        self.key = key

    async def classify(self, text: str, ctx: TaskContext) -> tuple[str, int]:
        await ctx.clock.sleep(0.02)  # the call's latency
        words = text.lower().split()
        label = next((w for w in words if w in LABELS), "other")
        return label, len(words)  # the label and the tokens the call used


def client(resource: Resource) -> FakeClassifier:
    return FakeClassifier(resource.id)


def pools() -> list[Pool]:
    keys = [Resource.create("llm", id=f"key-{n}", capacity=4, factory=client) for n in (1, 2)]
    return [Pool("llm", keys)]


@task("classify", resource="llm", retry="exponential")
async def classify(ticket: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    async with ctx.acquire() as lease:
        model = lease.client
        assert isinstance(model, FakeClassifier)
        label, tokens = await model.classify(ticket["text"], ctx)
        lease.report(ok=True, usage={"tokens": tokens})
    return {"ticket": ticket["ticket"], "label": label}


@task
def route(classified: dict[str, Any]) -> dict[str, Any]:
    return {**classified, "team": LABELS.get(classified["label"], "support")}


triage = pipeline("triage", classify, route)


def tickets() -> Iterator[dict[str, str]]:
    """The rows of tickets.csv, read lazily (a file of any size runs in bounded memory)."""
    with (HERE / "tickets.csv").open(newline="", encoding="utf-8") as f:
        yield from csv.DictReader(f)


def main() -> int:
    resume = STORE.exists()  # a second run continues the first
    with Runner(store=STORE, pools=pools(), concurrency=8) as runner:
        report = runner.run(triage.map(tickets(), key_of=lambda t: t["ticket"]), resume=resume)
        for failure in report.failures:
            print(f"ticket {failure['key']} failed: {failure['error']}", file=sys.stderr)
        export_rows(runner.store, HERE / "results.csv", kind="results")
        teams = Counter(
            row["output"]["team"] for row in results(runner.store) if row["state"] == "succeeded"
        )
    print(f"{report.state.value}: {dict(report.by_state)}")
    print("by team:", ", ".join(f"{team} {n}" for team, n in teams.most_common()))
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
