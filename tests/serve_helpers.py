"""Runs into a store, and ``pyattacker serve``/``watch``/``run`` as child processes, for
the tests of ``serve`` and ``watch``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pyattacker.cli import run_cli

#: a pipeline whose ``ask`` fails for ids divisible by 5 and retries ids divisible by 3
#: once; with ``GATED``, every item waits until a file ``go`` exists (the run stays live)
RUN_MODULE = """
import asyncio
from pathlib import Path

from pyattacker import FatalError, Pool, Resource, RetryableError, TaskContext, pipeline, task

GATED = {gated}
SEEN = {{}}


@task
def prepare(row: dict) -> dict:
    return row


@task("ask", resource="llm", retry={{"max_attempts": 3, "base": 0.01}})
async def ask(row: dict, ctx: TaskContext) -> dict:
    async with ctx.acquire():
        while GATED and not Path("go").exists():
            await asyncio.sleep(0.02)
        SEEN[row["id"]] = SEEN.get(row["id"], 0) + 1
        if row["id"] % 5 == 0:
            raise FatalError('no "answer"\\n</script><b id=injected>')
        if row["id"] % 3 == 0 and SEEN[row["id"]] == 1:
            raise RetryableError("busy, try again")
        return {{"answer": 42}}


evaluation = pipeline("eval", prepare, ask)


def pools():
    return [Pool("llm", [Resource.create("openai", id="k1", capacity=2)])]
"""


def run_arguments(folder: Path, ids: range, *, gated: bool = False) -> list[str]:
    """Writes the module and the input into ``folder``; the ``run`` command's words."""
    (folder / "evals.py").write_text(RUN_MODULE.format(gated=gated))
    lines = "".join(json.dumps({"id": i, "name": f"item-{i}"}) + "\n" for i in ids)
    (folder / "items.jsonl").write_text(lines)
    return ["run", "evals.py:evaluation", "--pools", "evals.py:pools", "--input", "items.jsonl",
            "--key", "name", "--store", "eval.db"]  # fmt: skip


def finished_store(folder: Path, ids: range) -> tuple[Path, int]:
    """A finished run's store in ``folder`` (the current directory) and its exit code."""
    code = run_cli(run_arguments(folder, ids))
    return folder / "eval.db", code


def child(folder: Path, *words: str, out: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """``pyattacker WORDS`` as a child process in ``folder``, with this test's sys.path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-m", "pyattacker", *words],
        cwd=folder,
        env=env,
        stdout=out,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextmanager
def served(folder: Path, store: Path, *flags: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``pyattacker serve STORE --port 0 FLAGS`` running; yields its URL (read from stderr)."""
    process = child(folder, "serve", str(store), "--port", "0", *flags, out=subprocess.DEVNULL)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "http://" in line, line
        yield "http://" + line.split("http://", 1)[1].split()[0].rstrip("/"), process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stderr is not None:
            process.stderr.close()


def fetch(url: str, *, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request (an HTTP error is a response too)."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Each sample of Prometheus ``text`` (read by prometheus_client's parser), by name."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def assert_metrics_equal_the_report(text: str, report: dict[str, Any]) -> None:
    """The counts of ``/metrics`` are those of ``pyattacker report --json``."""
    found = samples(text)
    pipelines = {labels["state"]: value for labels, value in found["pyattacker_run_pipelines"]}
    assert pipelines == report["pipelines"]["by_state"]
    by_outcome: Counter[str] = Counter()
    by_task: Counter[str] = Counter()
    for labels, value in found["pyattacker_run_attempts_total"]:
        by_outcome[labels["outcome"]] += int(value)
        by_task[labels["task"]] += int(value)
    assert dict(by_outcome) == report["attempts"]["by_outcome"]
    assert dict(by_task) == {name: t["attempts"] for name, t in report["tasks"].items()}
    errors = {labels["class"]: value for labels, value in found["pyattacker_run_errors_total"]}
    assert errors == report["attempts"]["by_error_class"]
    assert found["pyattacker_run_retries_total"] == [({}, report["attempts"]["retries"])]
    attempts = _by_task_and_outcome(found["pyattacker_run_attempts_total"])
    name = "pyattacker_run_attempt_duration_seconds"
    assert _by_task_and_outcome(found[f"{name}_count"]) == attempts  # one per attempt
    every = [(labels, v) for labels, v in found[f"{name}_bucket"] if labels["le"] == "+Inf"]
    assert _by_task_and_outcome(every) == attempts


def _by_task_and_outcome(
    samples_: list[tuple[dict[str, str], float]],
) -> dict[tuple[str, str], float]:
    return {(labels["task"], labels["outcome"]): value for labels, value in samples_}


def leases_in_use(text: str) -> dict[str, float]:
    """``pyattacker_run_resource_leases_in_use`` of a ``/metrics`` text, by resource."""
    found = samples(text).get("pyattacker_run_resource_leases_in_use", [])
    return {labels["resource"]: value for labels, value in found}
