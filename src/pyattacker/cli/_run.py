"""``pyattacker run``: your pipeline over every row of a JSON Lines, CSV or Parquet file (or
stdin), durably.

The pipeline (or a single task) and the pools are Python objects named ``module:name`` or
``path/to/file.py:name``. Every row is checked before anything is written (it parses, it
can be stored, its ``--key`` is there and unique); then the rows are read one at a time,
so a file of any size runs in bounded memory. The store is a SQLite file that records the
input and how far it was read: run again with ``--resume`` after a crash or Ctrl-C, and the
recorded file is re-opened (when unchanged) and read on from where the last run stopped.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from pyattacker.cli._run_artifacts import artifacts_option, store_with
from pyattacker.cli._run_commands import print_run_report
from pyattacker.cli._run_input import Wanted, duration, pipelines_to_run, rows_to_run
from pyattacker.cli._run_progress import RunProgress
from pyattacker.cli._run_ray import check_run_ray, ray_option
from pyattacker.cli._run_shards import (
    run_shards,
    shard_of_flag,
    shard_options,
    shard_path,
    sharded_pools,
)
from pyattacker.errors import ConfigError
from pyattacker.pool import Pool
from pyattacker.report import summarize
from pyattacker.run import (
    INPUT_FORMATS,
    FieldKey,
    FileSource,
    PipelineTemplate,
    Runner,
    RunReport,
    Shard,
    Task,
    check_captured_clients,
    not_read,
    pipeline,
)
from pyattacker.store import RunState

__all__ = ["run_command"]

_EPILOG = """\b
Examples:
  pyattacker run evals.py:evaluation --input items.jsonl --pools evals.py:pools \\
      --store eval.db --concurrency 32
  pyattacker run evals.py:evaluation --pools evals.py:pools --store eval.db --resume
  pyattacker run mypkg.evals:judge --input items.csv --key id --repeats 3 --limit 100
  cat items.jsonl | pyattacker run evals.py:evaluation --input - --pools evals.py:pools
  pyattacker run evals.py:evaluation --input items.parquet --pools evals.py:pools \\
      --stop-after 30m --stop-after-failures 50
  pyattacker run -c eval.yaml                   (the pipeline, pools and rows from a file)
  pyattacker run -c eval.yaml --store other.db --concurrency 4 --strict-env
  pyattacker run -c eval.yaml --shards 4 --jobs 2   (4 child processes; merged report)
  pyattacker run -c eval.yaml --shard 2/4           (one shard: eval.shard-2-of-4.db)

\b
TARGET is a pipeline template (pyattacker.pipeline(...) or a | b | c) or a single @task.
-c FILE (.yaml, .toml, .json) replaces TARGET, --pools and --input: see `pyattacker
validate --help` and docs/run.md, "Config files". Flags given override the file.
--pools names a Pool, a list of Pools, or a function returning them.
--input: .jsonl/.ndjson (one JSON value per line), .csv (a header row; every value a
string), .parquet (pip install 'pyattacker[parquet]'), or - for stdin (JSON Lines unless
--input-format says otherwise). Every row is checked before anything is written.
--resume without --input re-opens the recorded input and reads on where the last run
stopped; a changed or missing input is refused, another one needs --input-changed.
Exit codes: 0 every row read and every pipeline succeeded, 1 some failed or the input was
not read to its end (incomplete), 2 bad input (nothing written), 130 interrupted.
"""

# Library fields, as the flags that set them.
_INPUT_FLAGS = {"input": "--input", "format": "--input-format", "limit": "--limit"}


@click.command("run", epilog=_EPILOG)
@click.argument("target", metavar="[TARGET]", required=False)
@click.option(
    "-c",
    "--config",
    "config_path",
    metavar="FILE",
    help="Run from a config file (.yaml, .toml, .json) instead of TARGET/--pools; "
    "flags given here override its values.",
)
@click.option(
    "--strict-env",
    is_flag=True,
    help="With -c: an unset ${VAR} in the file is an error (default: a warning, and empty).",
)
@click.option(
    "--input",
    "input_path",
    metavar="FILE",
    help="The rows: .jsonl, .csv or .parquet by suffix, or - for stdin.",
)
@click.option(
    "--input-format",
    type=click.Choice(INPUT_FORMATS),
    help="The input's format when its name does not say (stdin: jsonl).",
)
@click.option(
    "--input-changed",
    is_flag=True,
    help="On --resume: read --input although it is not the input the run recorded.",
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
    type=click.IntRange(min=1, max=100_000),
    metavar="N",
    help="Attempts in flight at most.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1, max=1_000_000),
    metavar="K",
    help="Pipelines per row (repeat indices 0..K-1) [default: 1; on --resume, the run's].",
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
    help="Add this pipeline to a store that holds pipelines of another one (implies --resume).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0, max=10**12),
    metavar="N",
    help="Only the first N rows: the run's input is those rows (a resume keeps the limit).",
)
@click.option(
    "--stop-after-failures",
    type=click.IntRange(min=1, max=10**12),
    metavar="N",
    help="Stop gracefully once N pipelines failed.",
)
@click.option(
    "--stop-after",
    "stop_after",
    metavar="DURATION",
    help="Stop gracefully after this long: 90s, 5m, 1.5h (a bare number is seconds).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@shard_options
@artifacts_option
@ray_option
def run_command(
    target: str | None,
    config_path: str | None,
    strict_env: bool,
    input_path: str | None,
    input_format: str | None,
    input_changed: bool,
    store: str | None,
    resume: bool,
    pools_target: str | None,
    concurrency: int,
    repeats: int | None,
    key_field: str | None,
    fresh: bool,
    add_pipeline: bool,
    limit: int | None,
    stop_after_failures: int | None,
    stop_after: str | None,
    as_json: bool,
    shard: str | None,
    shards: int | None,
    jobs: int | None,
    artifacts: str | None,
) -> int:
    """Run a pipeline over every row of a file (or stdin), with a durable record."""
    sharded = shard_of_flag(shard, shards, jobs)
    if config_path is not None or target is None:
        # imported here: the config path builds on this module's helpers
        from pyattacker.cli._run_config import run_from_config

        return run_from_config(click.get_current_context(), target=target)
    # --add-pipeline asks to add to an existing store: continuing it, as --fresh does
    resume = resume or fresh or (add_pipeline and store is not None and Path(store).is_file())
    template = _template(load_target(target, field="TARGET"))
    pools = _pools(load_target(pools_target, field="--pools")) if pools_target else []
    _check_pools(template, pools)
    check_captured_clients(template.tasks)  # before the store is created
    # a RAY_ADDRESS cluster is connected to now: one refusal, not one per item
    check_run_ray(template.tasks, open_session=shards is None)  # shards connect
    stop_after_s = None if stop_after is None else duration(stop_after)
    if input_path is None and not resume:
        raise ConfigError(
            "which rows? pass --input FILE",
            field="--input",
            hint="or --resume with --store to continue a run without its input",
        )
    path = sharded_store(
        store, template, resume=resume, shard=sharded, shards=shards, verbatim=store is not None
    )
    # Everything is checked before the store is opened for writing: a refusal writes nothing.
    wanted = Wanted(input_path, input_format, limit, key_field, repeats, input_changed)
    at = None if shards else path if resume else None
    source, repeats, key_field = _flags(lambda: rows_to_run(wanted, at))
    if shards is not None:
        if source is not None:
            source.close()
        return run_shards(click.get_current_context(), path, shards, jobs)
    try:
        return _execute(
            template, source, path, pools, target=target, repeats=repeats, key_field=key_field,
            resume=resume, fresh=fresh, add_pipeline=add_pipeline, as_json=as_json, shard=sharded,
            artifacts=artifacts,
            runner_settings={
                "concurrency": concurrency, "stop_after_failures": stop_after_failures,
                "stop_after_s": stop_after_s,
            },
        )  # fmt: skip
    finally:
        if source is not None:
            source.close()


def _execute(
    template: PipelineTemplate,
    source: FileSource | None,
    path: Path,
    pools: list[Pool],
    *,
    target: str,
    repeats: int,
    key_field: str | None,
    resume: bool,
    fresh: bool,
    add_pipeline: bool,
    as_json: bool,
    runner_settings: dict[str, Any],
    shard: Shard | None = None,
    artifacts: str | None = None,
) -> int:
    """Run it, print the report and the outcome; the exit code."""
    specs: Any = template
    if source is not None:
        key_of = None if key_field is None else FieldKey(key_field)
        specs = template.map(source, repeats=repeats, key_of=key_of, shard=shard)
    pools = sharded_pools(pools, shard)
    if not resume:
        _new_store_folder(path)
    again = _again(sys.argv[1:] if _invoked_as_cli() else None, target, path)
    with (
        store_with(path, artifacts) as opened,
        Runner(
            opened,
            pools=pools,
            # recorded for readers, who may be elsewhere: from the folder the paths are relative to
            command=f"cd {shlex.quote(os.getcwd())} && {again}",
            **runner_settings,
        ) as runner,
    ):
        label, count = "run", 1
        if shard is not None and shard.count > 1:
            label, count = f"shard {shard.index}/{shard.count} (total estimated)", shard.count
        total = pipelines_to_run(source, repeats, runner, count)
        options = {"resume": resume, "fresh": fresh, "add_pipeline": add_pipeline}
        report: RunReport = _flags(
            lambda: _run(runner, specs, total=total, quiet=as_json, label=label, **options)
        )
        if as_json:
            click.echo(json.dumps({"run": report.to_dict(), "report": summarize(runner.store)}))
        else:
            print_run_report(runner.store, as_json=False, errors=5)
    click.echo(_outcome(report, path, again), err=True)
    return report.exit_code


def _flags(call: Callable[[], Any]) -> Any:
    """Call it; a ConfigError naming a library argument is re-raised naming the flag."""
    try:
        return call()
    except ConfigError as exc:
        field = exc.field or ""
        flag = _INPUT_FLAGS.get(field) or _FLAGS.get(field)
        if field == "specs":
            flag = "--input"
        message, hint = _as_flags(exc.message), exc.hint and _as_flags(exc.hint)
        if (flag is None or flag == field) and (message, hint) == (exc.message, exc.hint):
            raise
        raise ConfigError(message, field=flag or field, hint=hint) from exc


def _as_flags(text: str) -> str:
    """A library message in the CLI's words: ``resume=True (--resume)`` -> ``--resume``."""
    for argument, flag in (("resume", "--resume"), ("add_pipeline", "--add-pipeline")):
        for said in (f"{argument}=True (CLI: {flag})", f"{argument}=True ({flag})"):
            text = text.replace(said, flag)
        text = text.replace(f"{argument}=True", flag)
    return text


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


def _store_path(store: str | None, template: PipelineTemplate, *, resume: bool) -> Path:
    if store is None:
        if resume:
            raise ConfigError("needs --store: which run should it continue?", field="--resume")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        return Path("runs") / f"{_safe(template.name)}-{stamp}.db"
    path = Path(store)
    if resume and not path.is_file():
        raise ConfigError(
            f"there is no store at {store} to resume", field="--store", hint="drop --resume"
        )
    return path


def sharded_store(
    store: str | None,
    template: PipelineTemplate,
    *,
    resume: bool,
    shard: Shard | None,
    shards: int | None,
    verbatim: bool,
) -> Path:
    """The store path (``_store_path``); with ``--shard``, the shard's own
    (``eval.shard-2-of-4.db``) unless ``verbatim`` (a ``--store`` given on the command
    line is used as it is); with ``--shards``, the name the children derive theirs from."""
    if shard is not None and store is not None and not verbatim:
        store = str(shard_path(Path(store), shard))
    path = _store_path(store, template, resume=resume and not shards)
    return path if verbatim or store is not None else shard_path(path, shard)


def _new_store_folder(path: Path) -> None:
    if path.parent == Path("runs"):
        path.parent.mkdir(exist_ok=True)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name) or "run"


def _run(
    runner: Runner, specs: Any, *, total: int, quiet: bool, label: str = "run", **options: bool
) -> RunReport:
    progress = None if quiet else RunProgress.for_stderr(runner.stats, total=total, label=label)
    if progress is None:
        return runner.run(specs, **options)
    with progress:
        return runner.run(specs, **options)


def _invoked_as_cli() -> bool:
    """Whether this process is the ``pyattacker`` command (or ``python -m pyattacker``),
    so that ``sys.argv`` is the command line to record; another program's ``__main__``
    (``python -m pytest``, an embedding script) has arguments of its own."""
    entry = Path(sys.argv[0])
    return entry.name == "pyattacker" or (
        entry.name == "__main__.py" and entry.parent.name == "pyattacker"
    )


def _again(argv: list[str] | None, target: str, path: Path) -> str:
    """The command that continues this run: the one given, with --store and --resume."""
    if argv is None:  # called in-process (tests, embedding): the essentials only
        argv = ["run", *(["-c", target[3:]] if target.startswith("-c ") else [target])]
    words = [w for w in argv if w not in ("--resume", "--fresh", "--input-changed")]
    if "--store" not in words:
        words += ["--store", str(path)]
    return shlex.join(["pyattacker", *words, "--resume"])


_FLAGS = {"key": "--key", "key_of": "--key", "resource": "--pools", "store": "--store"}
_FLAGS.update(add_pipeline="--add-pipeline", resume="--resume", shard="--shard")


def _outcome(report: RunReport, path: Path, again: str) -> str:
    by_state = report.by_state
    counts = ", ".join(f"{n} {state}" for state, n in sorted(by_state.items())) or "0 pipelines"
    duplicates = report.stats["pipelines"]["duplicates"]
    if duplicates:
        counts += f" ({duplicates} duplicate rows ran once)"
    took = _took(report.elapsed_s)
    head = f"Run {report.run_id} {report.state.value} in {took}: {counts}."
    if report.state is RunState.INCOMPLETE:
        record = report.input or {}
        return (
            f"{head}\nIncomplete: the input was read up to row {record.get('rows_read')}"
            f" ({not_read(record)} not read); every finished task is kept. Finish it with:"
            f"\n  {again}"
        )
    if report.resume_hint is not None:
        why = f" ({report.stop_reason})" if report.stop_reason else ""
        if (report.stop_reason or "").startswith("stop_after_failures"):
            # Kept, the flag stops the resume again as soon as the failed ones fail again
            # (they are retried first): the command would never continue the run.
            again = _without(again, "--stop-after-failures")
            why += " — the command below retries the failed ones without that limit"
        return f"{head}\nInterrupted{why}; every finished task is kept. Continue with:\n  {again}"
    lines = [head, f"Recorded in {path}: pyattacker report {path}"]
    if by_state.get("failed"):
        lines.append(f"Retry the failed ones from their last checkpoint: {again}")
    return "\n".join(lines)


def _without(command: str, flag: str) -> str:
    """``command`` without ``flag`` and its value (``--flag V`` or ``--flag=V``)."""
    words = shlex.split(command)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == flag:
            skip = True
        elif not word.startswith(flag + "="):
            kept.append(word)
    return shlex.join(kept)


def _took(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
