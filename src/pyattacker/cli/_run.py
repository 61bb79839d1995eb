"""``pyattacker run``: your pipeline over every row of a JSON Lines file, durably.

The pipeline (or a single task) and the pools are Python objects named ``module:name`` or
``path/to/file.py:name``; the rows are read one line at a time, so a file of any size
runs in bounded memory. The store is a SQLite file: run again with ``--resume`` after a
crash or Ctrl-C (the input may be left out then: every unfinished pipeline continues from
its last checkpoint, reading its input from the store).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from pyattacker.cli._run_commands import print_run_report
from pyattacker.cli._run_progress import RunProgress
from pyattacker.errors import ConfigError
from pyattacker.pool import Pool
from pyattacker.report._run import summarize
from pyattacker.run import PipelineTemplate, Runner, RunReport, Task, pipeline

__all__ = ["run_command"]

_EPILOG = """\b
Examples:
  pyattacker run evals.py:evaluation --input items.jsonl --pools evals.py:pools \\
      --store runs/eval.db --concurrency 32
  pyattacker run evals.py:evaluation --pools evals.py:pools --store runs/eval.db --resume
  pyattacker run mypkg.evals:judge --input items.jsonl --key id --repeats 3

\b
TARGET is a pipeline template (pyattacker.pipeline(...) or a | b | c) or a single @task.
--pools names a Pool, a list of Pools, or a function returning them.
Exit codes: 0 all succeeded, 1 some pipelines failed, 2 bad input, 130 interrupted.
"""


@click.command("run", epilog=_EPILOG)
@click.argument("target", metavar="TARGET")
@click.option(
    "--input",
    "input_path",
    metavar="FILE",
    help="JSON Lines: one input row per line (blank lines skipped).",
)
@click.option(
    "--store",
    metavar="PATH",
    help="SQLite file of the run [default: runs/<pipeline>-<timestamp>.db, a new file].",
)
@click.option("--resume", is_flag=True, help="Continue the run recorded in --store.")
@click.option("--pools", "pools_target", metavar="TARGET", help="The pools tasks lease from.")
@click.option(
    "--concurrency",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Attempts in flight at most.",
)
@click.option(
    "--repeats",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="K",
    help="Pipelines per row (repeat indices 0..K-1).",
)
@click.option("--key", "key_field", metavar="FIELD", help="Name each pipeline by this row field.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def run_command(
    target: str,
    input_path: str | None,
    store: str | None,
    resume: bool,
    pools_target: str | None,
    concurrency: int,
    repeats: int,
    key_field: str | None,
    as_json: bool,
) -> int:
    """Run a pipeline over every row of a JSON Lines file, with a durable record."""
    template = _template(load_target(target, field="TARGET"))
    pools = _pools(load_target(pools_target, field="--pools")) if pools_target else []
    leasing = sorted({t.resource for t in template.tasks if t.resource is not None})
    if leasing and not pools:
        raise ConfigError(
            f"the pipeline leases from {', '.join(map(repr, leasing))} and no pools were given",
            field="--pools",
            hint="pass --pools FILE.py:NAME (a Pool, a list of Pools or a function)",
        )
    if input_path is None and not resume:
        raise ConfigError(
            "which rows? pass --input FILE",
            field="--input",
            hint="or --resume with --store to continue a run without its input",
        )
    rows = _Rows(Path(input_path)) if input_path is not None else None
    path = _store_path(store, template, resume=resume)
    specs: Any = template
    if rows is not None:
        key_of = None if key_field is None else _key_of(key_field)
        specs = template.map(rows, repeats=repeats, key_of=key_of)
    with Runner(path, pools=pools, concurrency=concurrency) as runner:
        total = rows.count() * repeats if rows is not None else runner.store.count_pipelines()
        report = _run(runner, specs, total=total, resume=resume, quiet=as_json)
        if as_json:
            click.echo(json.dumps({"run": report.to_dict(), "report": summarize(runner.store)}))
        else:
            print_run_report(runner.store, as_json=False, errors=5)
    click.echo(_outcome(report, target, path), err=True)
    return report.exit_code


def load_target(spec: str, *, field: str) -> Any:
    """The object ``module:name`` or ``path/to/file.py:name`` names; ``ConfigError`` if none."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise ConfigError(
            f"{spec!r} is not module:name", field=field, hint="e.g. evals.py:pipeline"
        )
    module = _module(where, field=field)
    found = module
    for part in name.split("."):
        if not hasattr(found, part):
            raise ConfigError(f"{where} has no {name!r}", field=field, hint=f"check {spec!r}")
        found = getattr(found, part)
    return found


def _module(where: str, *, field: str) -> Any:
    if where.endswith(".py") or "/" in where:
        path = Path(where)
        if not path.is_file():
            raise ConfigError(f"{where} does not exist", field=field, hint="check the path")
        name = f"pyattacker_user_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigError(f"cannot import {where}", field=field)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # dataclasses and codecs look modules up by name
        sys.path.insert(0, str(path.resolve().parent))  # its own imports of siblings
        module_spec.loader.exec_module(module)
        return module
    sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(where)
    except ImportError as exc:
        raise ConfigError(f"cannot import {where}: {exc}", field=field) from exc


def _template(found: Any) -> PipelineTemplate:
    if isinstance(found, PipelineTemplate):
        return found
    if isinstance(found, Task):
        return pipeline(found.name, found)
    raise ConfigError(
        f"TARGET is a {type(found).__name__}, not a pipeline or a task",
        field="TARGET",
        hint="name a pyattacker.pipeline(...) template or an @task function",
    )


def _pools(found: Any) -> list[Pool]:
    if callable(found) and not isinstance(found, Pool):
        found = found()
    pools = [found] if isinstance(found, Pool) else list(found) if _iterable(found) else None
    if pools is None or not all(isinstance(p, Pool) for p in pools):
        raise ConfigError(
            "--pools must name a Pool, a list of Pools or a function returning them",
            field="--pools",
        )
    return pools


def _iterable(found: Any) -> bool:
    return isinstance(found, Iterable) and not isinstance(found, str | bytes)


class _Rows:
    """The rows of a JSON Lines file, read lazily (again on each iteration)."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise ConfigError(f"{path} does not exist", field="--input", hint="check the path")
        self.path = path

    def count(self) -> int:
        with self.path.open(encoding="utf-8") as lines:
            return sum(1 for line in lines if line.strip())

    def __iter__(self) -> Iterator[Any]:
        with self.path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise ConfigError(
                        f"line {number} of {self.path} is not JSON: {exc}",
                        field="--input",
                        hint="one JSON value per line; fix the line and run with --resume",
                    ) from exc


def _key_of(field: str) -> Any:
    def key_of(row: Any) -> str:
        if not isinstance(row, dict) or field not in row:
            raise ValueError(f"the row has no field {field!r}")
        return str(row[field])

    return key_of


def _store_path(store: str | None, template: PipelineTemplate, *, resume: bool) -> Path:
    if store is None:
        if resume:
            raise ConfigError("needs --store: which run should it continue?", field="--resume")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{_safe(template.name)}-{stamp}.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(store)
    if resume and not path.is_file():
        raise ConfigError(
            f"there is no store at {store} to resume", field="--store", hint="drop --resume"
        )
    return path


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name) or "run"


def _run(runner: Runner, specs: Any, *, total: int, resume: bool, quiet: bool) -> RunReport:
    progress = None if quiet else RunProgress.for_stderr(runner.stats, total=total, label="run")
    if progress is None:
        return runner.run(specs, resume=resume)
    with progress:
        return runner.run(specs, resume=resume)


def _outcome(report: RunReport, target: str, path: Path) -> str:
    by_state = report.by_state
    counts = ", ".join(f"{n} {state}" for state, n in sorted(by_state.items()))
    head = f"Run {report.run_id} {report.state.value} in {report.elapsed_s:.1f} s: {counts}."
    again = f"pyattacker run {target} --store {path} --resume  (plus --pools as before)"
    if report.resume_hint is not None:
        why = f" ({report.stop_reason})" if report.stop_reason else ""
        return f"{head}\nInterrupted{why}; every finished task is kept. Continue with:\n  {again}"
    lines = [head, f"Recorded in {path}: pyattacker report {path}"]
    if by_state.get("failed"):
        lines.append(f"Retry the failed ones from their last checkpoint: {again}")
    return "\n".join(lines)
