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
import shlex
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
      --store eval.db --concurrency 32
  pyattacker run evals.py:evaluation --pools evals.py:pools --store eval.db --resume
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
@click.option(
    "--fresh",
    is_flag=True,
    help="Rerun every step of the stored pipelines (implies --resume; old outputs are kept).",
)
@click.option(
    "--add-pipeline",
    is_flag=True,
    help="Add this pipeline to a store that holds pipelines of another one.",
)
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
    fresh: bool,
    add_pipeline: bool,
    as_json: bool,
) -> int:
    """Run a pipeline over every row of a JSON Lines file, with a durable record."""
    resume = resume or fresh
    template = _template(load_target(target, field="TARGET"))
    pools = _pools(load_target(pools_target, field="--pools")) if pools_target else []
    _check_pools(template, pools)
    if input_path is None and not resume:
        raise ConfigError(
            "which rows? pass --input FILE",
            field="--input",
            hint="or --resume with --store to continue a run without its input",
        )
    rows = _Rows(Path(input_path), key_field) if input_path is not None else None
    count = rows.check() if rows is not None else 0  # every line, before anything is written
    path = _store_path(store, template, resume=resume)
    specs: Any = template
    if rows is not None:
        key_of = None if key_field is None else _key_of(key_field)
        specs = template.map(rows, repeats=repeats, key_of=key_of)
    again = _again(sys.argv[1:] if _invoked_as_cli() else None, target, path)
    with Runner(path, pools=pools, concurrency=concurrency) as runner:
        total = count * repeats if rows is not None else runner.store.count_pipelines()
        options = {"resume": resume, "fresh": fresh, "add_pipeline": add_pipeline}
        report = _flags_named(lambda: _run(runner, specs, total=total, quiet=as_json, **options))
        if as_json:
            click.echo(json.dumps({"run": report.to_dict(), "report": summarize(runner.store)}))
        else:
            print_run_report(runner.store, as_json=False, errors=5)
    click.echo(_outcome(report, path, again), err=True)
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


_LOADED: dict[Path, Any] = {}  # a file is run once, however many targets name it


def _module(where: str, *, field: str) -> Any:
    try:
        return _load_module(where, field=field)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module failed: their code, their message
        raise ConfigError(
            f"importing {where} failed: {type(exc).__name__}: {exc}",
            field=field,
            hint="run `python -c 'import ...'` on it to see the whole traceback",
        ) from exc


def _load_module(where: str, *, field: str) -> Any:
    if where.endswith(".py") or "/" in where:
        path = Path(where).resolve()
        if path in _LOADED:
            return _LOADED[path]
        if not path.is_file():
            raise ConfigError(f"{where} does not exist", field=field, hint="check the path")
        name = f"pyattacker_user_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigError(f"cannot import {where}", field=field)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # dataclasses and codecs look modules up by name
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))  # its own imports of siblings
        module_spec.loader.exec_module(module)
        _LOADED[path] = module
        return module
    if str(Path.cwd()) not in sys.path:
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
        try:
            found = found()
        except Exception as exc:
            raise ConfigError(
                f"the pools function failed: {type(exc).__name__}: {exc}", field="--pools"
            ) from exc
    pools = [found] if isinstance(found, Pool) else list(found) if _iterable(found) else None
    if pools is None or not all(isinstance(p, Pool) for p in pools):
        raise ConfigError(
            "--pools must name a Pool, a list of Pools or a function returning them",
            field="--pools",
        )
    return pools


def _check_pools(template: PipelineTemplate, pools: list[Pool]) -> None:
    """Every pool a task (or a fanout branch, at any depth) leases from is among ``pools``."""
    names = {pool.name for pool in pools}
    missing = template.missing_pool(names)
    if missing is not None:
        given = ", ".join(sorted(names)) or "none"
        raise ConfigError(
            f"task {missing[0]!r} leases from pool {missing[1]!r}; --pools gave: {given}",
            field="--pools",
            hint="pass --pools FILE.py:NAME (a Pool, a list of Pools or a function)",
        )


def _iterable(found: Any) -> bool:
    return isinstance(found, Iterable) and not isinstance(found, str | bytes)


class _Rows:
    """The rows of a JSON Lines file, read lazily (again on each iteration).

    ``check()`` reads the whole file once before the run (one row in memory at a time):
    a line that is not JSON, not UTF-8, or lacks the ``--key`` field is bad input found
    before anything is written.
    """

    def __init__(self, path: Path, key_field: str | None) -> None:
        if not path.is_file():
            raise ConfigError(f"{path} does not exist", field="--input", hint="check the path")
        self.path = path
        self.key_field = key_field

    def check(self) -> int:
        """How many rows; ``ConfigError`` naming the first bad line."""
        count = 0
        for number, row in self._numbered():
            if self.key_field is not None and not (isinstance(row, dict) and self.key_field in row):
                raise ConfigError(
                    f"line {number} of {self.path} has no field {self.key_field!r}",
                    field="--key",
                    hint="every row needs the key field, or leave --key out",
                )
            count += 1
        return count

    def __iter__(self) -> Iterator[Any]:
        return (row for _, row in self._numbered())

    def _numbered(self) -> Iterator[tuple[int, Any]]:
        with self.path.open(encoding="utf-8") as lines:
            number = 0
            try:
                for number, line in enumerate(lines, 1):
                    if line.strip():
                        yield number, _row(line, number, self.path)
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"line {number + 1} of {self.path} is not UTF-8: {exc.reason}",
                    field="--input",
                ) from exc


def _row(line: str, number: int, path: Path) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise ConfigError(
            f"line {number} of {path} is not JSON: {exc}",
            field="--input",
            hint="one JSON value per line",
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


def _run(runner: Runner, specs: Any, *, total: int, quiet: bool, **options: bool) -> RunReport:
    progress = None if quiet else RunProgress.for_stderr(runner.stats, total=total, label="run")
    if progress is None:
        return runner.run(specs, **options)
    with progress:
        return runner.run(specs, **options)


def _invoked_as_cli() -> bool:
    return Path(sys.argv[0]).name in {"pyattacker", "__main__.py"}


def _again(argv: list[str] | None, target: str, path: Path) -> str:
    """The command that continues this run: the one given, with --store and --resume."""
    if argv is None:  # called in-process (tests, embedding): the essentials only
        argv = ["run", target]
    words = [w for w in argv if w not in ("--resume", "--fresh")]  # continue, not rerun
    if "--store" not in words:
        words += ["--store", str(path)]
    return shlex.join(["pyattacker", *words, "--resume"])


_FLAGS = {"key": "--key", "key_of": "--key", "resource": "--pools", "store": "--store"}
_FLAGS["add_pipeline"] = "--add-pipeline"


def _flags_named(run: Any) -> RunReport:
    """Run it; a ConfigError naming a library argument is re-raised naming the flag."""
    try:
        report: RunReport = run()
    except ConfigError as exc:
        flag = _FLAGS.get(exc.field or "", "--input" if exc.field == "specs" else exc.field)
        if flag == exc.field:
            raise
        raise ConfigError(exc.message, field=flag, hint=exc.hint) from exc
    return report


def _outcome(report: RunReport, path: Path, again: str) -> str:
    by_state = report.by_state
    counts = ", ".join(f"{n} {state}" for state, n in sorted(by_state.items())) or "0 pipelines"
    duplicates = report.stats["pipelines"]["duplicates"]
    if duplicates:
        counts += f" ({duplicates} duplicate rows ran once)"
    took = _took(report.elapsed_s)
    head = f"Run {report.run_id} {report.state.value} in {took}: {counts}."
    if report.resume_hint is not None:
        why = f" ({report.stop_reason})" if report.stop_reason else ""
        return f"{head}\nInterrupted{why}; every finished task is kept. Continue with:\n  {again}"
    lines = [head, f"Recorded in {path}: pyattacker report {path}"]
    if by_state.get("failed"):
        lines.append(f"Retry the failed ones from their last checkpoint: {again}")
    return "\n".join(lines)


def _took(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
