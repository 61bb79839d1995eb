"""``pyattacker run -c FILE``, ``pyattacker resume -c FILE`` and ``pyattacker validate -c
FILE``: a run described by a config file (``pyattacker.config``).

All three go through :func:`pyattacker.config.load_config`, the one validation path; a
problem is a ``ConfigError`` naming its field path (exit 2) before anything is written.
Flags given on the command line override the file's values (``--store`` is
``run.store``, ``--input`` is ``source.path``, ...); the effective config, secrets masked,
is recorded in the run's row (``config["file"]``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from pyattacker.cli._run import _execute, _flags, run_command, sharded_store
from pyattacker.cli._run_input import Wanted, rows_to_run
from pyattacker.cli._run_ray import check_run_ray
from pyattacker.cli._run_shards import run_shards, shard_of_flag
from pyattacker.config import (
    LoadedConfig,
    SourceSpec,
    load_config,
    missing_fields,
    render_effective,
)
from pyattacker.errors import ConfigError
from pyattacker.run import FileSource, check_captured_clients, range_rows

__all__ = ["resume_command", "run_from_config", "validate_command"]

#: flag (click parameter name) -> the config field it overrides
OVERRIDES = {
    "store": "run.store",
    "concurrency": "run.concurrency",
    "stop_after": "run.stop_after",
    "stop_after_failures": "run.stop_after_failures",
    "input_path": "source.path",
    "input_format": "source.format",
    "limit": "source.limit",
    "key_field": "source.key",
    "repeats": "source.repeats",
    "artifacts": "run.artifacts",
}

_VALIDATE_EPILOG = """\b
Examples:
  pyattacker validate -c eval.yaml
  pyattacker validate -c eval.yaml --strict-env
  pyattacker validate -c eval.yaml --json > effective.json

\b
Prints the effective config (defaults filled in, ${VAR}s substituted, secrets masked) on
stdout and a summary on stderr. Every field is checked as `run -c` checks it: unknown
fields, types and ranges, pool references, algorithms and their parameters, retry
settings, `use:` targets (imported), the source's rows. Exit 0 when it would run, 2 with
the field path of the first problem. Nothing is created.
"""


def run_from_config(ctx: click.Context, *, target: str | None, resume: bool = False) -> int:
    """``run -c``: the config's pipeline over its source, as ``run`` runs TARGET."""
    params = ctx.params
    config = params.get("config_path")
    if config is None:
        raise ConfigError(
            "name a TARGET (module:pipeline) or a config file",
            field="TARGET",
            hint="pyattacker run evals.py:pipeline --input items.jsonl, or run -c eval.yaml",
        )
    if target is not None or params.get("pools_target") is not None:
        raise ConfigError(
            "-c gives the pipeline and the pools: TARGET and --pools cannot be added",
            field="TARGET" if target is not None else "--pools",
            hint="drop them, or run without -c",
        )
    sharded = shard_of_flag(params.get("shard"), params.get("shards"), params.get("jobs"))
    shards = params.get("shards")
    loaded = _load(ctx, config)
    fresh, add_pipeline = bool(params["fresh"]), bool(params["add_pipeline"])
    store_exists = loaded.store is not None and Path(loaded.store).is_file()
    resume = resume or bool(params.get("resume")) or fresh or (add_pipeline and store_exists)
    check_captured_clients(loaded.template.tasks)  # before the store is created
    # a RAY_ADDRESS cluster is connected to now: one refusal, not one per item
    check_run_ray(loaded.template.tasks, open_session=shards is None)  # shards connect
    if loaded.source is None and not resume:
        raise ConfigError(
            "which rows? the config has no source",
            field="source",
            hint="add source: {path: items.jsonl} (or range: N), pass --input, or --resume",
        )
    if resume and loaded.store is None:
        raise ConfigError(
            "which run should it continue? the config names no store",
            field="run.store",
            hint="set run.store in the file, or pass --store PATH",
        )
    given = ctx.get_parameter_source("store") is ParameterSource.COMMANDLINE
    path = sharded_store(
        loaded.store, loaded.template, resume=resume, shard=sharded, shards=shards, verbatim=given
    )
    wanted = _wanted(loaded.source, bool(params["input_changed"]))
    source, repeats, key = _rows(wanted, path if resume and not shards else None)
    _warn_fields(loaded, source)
    if shards is not None:
        if source is not None:
            source.close()
        return run_shards(ctx, path, shards, params.get("jobs"))
    try:
        return int(
            _execute(
                loaded.template,
                source,
                path,
                loaded.pools,
                target=f"-c {config}",
                repeats=repeats,
                key_field=key,
                resume=resume,
                fresh=fresh,
                add_pipeline=add_pipeline,
                as_json=bool(params["as_json"]),
                runner_settings={**loaded.runner, "config_file": loaded.effective},
                shard=sharded,
                artifacts=loaded.artifacts,
            )
        )
    finally:
        if source is not None:
            source.close()


def _load(ctx: click.Context, config: str) -> LoadedConfig:
    """The config with the flags given on the command line as overrides."""
    given = {
        name for name in ctx.params if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
    overrides: dict[str, Any] = {
        field: ctx.params[name] for name, field in OVERRIDES.items() if name in given
    }
    if "input_path" in given:
        overrides["source.range"] = None  # --input replaces the file's rows, whatever they were
    loaded = load_config(config, strict_env=bool(ctx.params.get("strict_env")), overrides=overrides)
    _warn_unset(loaded)
    return loaded


def _warn_unset(loaded: LoadedConfig) -> None:
    for where, name in loaded.unset:
        click.echo(
            f"warning: {where}: ${{{name}}} is not set; using an empty value "
            "(--strict-env makes this an error)",
            err=True,
        )


#: the run command's input flags -> the config fields they stand for
_SOURCE_FIELDS = {
    "--input": "source.path",
    "--input-format": "source.format",
    "--limit": "source.limit",
    "--key": "source.key",
    "--repeats": "source.repeats",
}


def _rows(wanted: Wanted, store: Path | None) -> tuple[FileSource | None, int, str | None]:
    """``rows_to_run``, its errors naming the config's field (and the flag that sets it)."""
    try:
        found: tuple[FileSource | None, int, str | None] = _flags(
            lambda: rows_to_run(wanted, store)
        )
    except ConfigError as exc:
        field = _SOURCE_FIELDS.get(exc.field or "")
        if field is None:
            raise
        raise ConfigError(exc.message, field=f"{field} ({exc.field})", hint=exc.hint) from None
    return found


def _warn_fields(loaded: LoadedConfig, source: FileSource | None) -> None:
    """Warn about template fields the first row will not have (``missing_fields``)."""
    if source is None:
        return
    rows = iter(source)
    first = next(rows, None)
    rows.close()  # type: ignore[attr-defined]  # a generator: closes the file it opened
    for where, message in missing_fields(loaded.template.tasks, first):
        click.echo(f"warning: {where}: {message}", err=True)


def _wanted(spec: SourceSpec | None, changed: bool) -> Wanted:
    if spec is None:
        return Wanted(None, None, None, None, None, changed)
    rows = None
    if spec.range is not None:
        count, limit = spec.range, spec.limit

        def rows() -> FileSource:
            return range_rows(count, limit=limit)

    return Wanted(spec.path, spec.format, spec.limit, spec.key, spec.repeats, changed, rows)


def _resume(ctx: click.Context, /, **_: Any) -> int:
    if ctx.params.get("config_path") is None:
        raise ConfigError(
            "which run? pass -c FILE", field="-c", hint="pyattacker resume -c eval.yaml"
        )
    return run_from_config(ctx, target=None, resume=True)


def _validate(config_path: str, strict_env: bool, as_json: bool) -> None:
    loaded = load_config(config_path, strict_env=strict_env)
    _warn_unset(loaded)
    rows = "no source (a resume reads the recorded rows)"
    if loaded.source is not None:
        source, _, _ = _rows(_wanted(loaded.source, False), None)
        _warn_fields(loaded, source)
        if source is not None:
            total = source.rows_total
            source.close()
            rows = f"{total} rows from {source.name}"
    if as_json:
        click.echo(json.dumps(loaded.effective, indent=2))
    else:
        click.echo(render_effective(loaded), nl=False)
    resources = sum(len(pool.resources) for pool in loaded.pools)
    click.echo(
        f"{config_path}: OK. Pipeline {loaded.template.name!r} "
        f"({len(loaded.template.tasks)} tasks), {len(loaded.pools)} pools "
        f"({resources} resources), {rows}.",
        err=True,
    )


@click.command("validate", epilog=_VALIDATE_EPILOG)
@click.option("-c", "--config", "config_path", metavar="FILE", required=True,
              help="The config file (.yaml, .yml, .toml, .json).")  # fmt: skip
@click.option("--strict-env", is_flag=True, help="An unset ${VAR} is an error, not a warning.")
@click.option("--json", "as_json", is_flag=True, help="Print the effective config as JSON.")
def validate_command(config_path: str, strict_env: bool, as_json: bool) -> None:
    """Check a config file as `run -c` would, print the effective config; create nothing."""
    _validate(config_path, strict_env, as_json)


def _resume_params() -> list[click.Parameter]:
    """run's parameters but TARGET and --pools; --resume kept (the printed command that
    continues a run adds it) but hidden, as copies: run's own stay as they are."""
    params = []
    for param in run_command.params:
        if param.name in ("target", "pools_target"):
            continue
        if param.name == "resume":
            param = copy.copy(param)
            param.hidden = True  # type: ignore[attr-defined]
        params.append(param)
    return params


resume_command = click.Command(
    "resume",
    callback=click.pass_context(_resume),
    params=_resume_params(),
    help="Continue the run a config file describes: `run -c FILE --resume`.",
    epilog="\b\nExamples:\n  pyattacker resume -c eval.yaml\n"
    "  pyattacker resume -c eval.yaml --store runs/eval-20261201.db --fresh",
)
