"""From a checked config to the run package's own objects: ``Pool``s of ``Resource``s, a
``PipelineTemplate`` of ``Task``s, the Runner's settings and the source of rows. No second
engine: a config builds exactly what a Python pipeline file would.

Meaning is checked by the code that owns it (``resolve_algorithm``, ``resolve_retry``,
``Resource.create``, ``Pool``, ``Task``, ``pipeline``, the built-in factories), with the
field path put in front of the field it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyattacker._units import parse_duration
from pyattacker.config._schema import PIPELINE, POOL, RESOURCE, SOURCE, TASK, checked, did_you_mean
from pyattacker.config._use import at, resolve_use
from pyattacker.errors import ConfigError
from pyattacker.pool import Pool, Resource, resolve_algorithm
from pyattacker.retry import resolve_retry
from pyattacker.run import INPUT_FORMATS, PipelineTemplate, Runner, Task, pipeline
from pyattacker.tasks import NEEDS_POOL, NOT_ON_RAY, ON_RAY

__all__ = ["SourceSpec", "build_pipeline", "build_pools", "build_source", "runner_settings"]

_RESOURCE_ARGS = ("capacity", "rpm", "tpm", "rpd", "burst", "tokens_per_call", "quota_group")
_HEALTH = ("degrade_after", "dead_after", "cooldown_s")
_RUNNER_ARGS = (
    "concurrency", "admission", "stop_after_failures", "grace_s", "write_behind",
    "history_batch", "heartbeat_s", "strict_leases",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """Where the rows come from: a file (``path``, ``format``) or ``range`` (the integers
    ``0..range-1``), with ``limit``, ``repeats`` and the ``key`` field."""

    path: str | None = None
    format: str | None = None
    range: int | None = None
    limit: int | None = None
    repeats: int | None = None
    key: str | None = None


def build_pools(raw: Any) -> tuple[list[Pool], dict[str, Any]]:
    """The pools of section ``pools`` (by name), and the section with defaults filled."""
    if raw is None:
        return [], {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping of pool names, got {raw!r}", field="pools")
    pools, shown = [], {}
    for name, spec in raw.items():
        path = f"pools.{name}"
        section = checked(spec, POOL, path)
        resources, rows = _resources(section, path)
        with at(path):
            algorithm = None
            if "algorithm" in section:
                with at(path):
                    algorithm = resolve_algorithm(section["algorithm"])
            pools.append(Pool(str(name), resources, algorithm=algorithm))
        shown[name] = {**section, "resources": rows}
    return pools, shown


def _resources(section: Mapping[str, Any], path: str) -> tuple[list[Resource], list[Any]]:
    resources: list[Resource] = []
    rows: list[Any] = []
    ids: dict[str, int] = {}
    for n, spec in enumerate(section["resources"]):
        where = f"{path}.resources[{n}]"
        row = checked(spec, RESOURCE, where)
        if row["id"] in ids:
            raise ConfigError(
                f"id {row['id']!r} is also resources[{ids[row['id']]}]'s",
                field=f"{where}.id",
                hint="ids are unique within a pool",
            )
        ids[row["id"]] = n
        options = dict(row.get("options") or {})
        if row.get("secrets"):
            options["secrets"] = dict(row["secrets"])
        health = {k: row.get(k, section.get(k)) for k in _HEALTH}
        with at(where):
            resources.append(
                Resource.create(
                    row["kind"],
                    id=row["id"],
                    options=options,
                    tags=[str(t) for t in row.get("tags") or []],
                    **{k: row[k] for k in _RESOURCE_ARGS if k in row},
                    **{k: v for k, v in health.items() if v is not None},
                )
            )
        rows.append(row)
    return resources, rows


def build_pipeline(raw: Any, pools: list[Pool]) -> tuple[PipelineTemplate, dict[str, Any]]:
    """The template of section ``pipeline``, and the section with defaults filled."""
    by_name = {pool.name: pool for pool in pools}
    section = checked(raw, PIPELINE, "pipeline")
    tasks: list[Task] = []
    shown: list[Any] = []
    names: dict[str, int] = {}
    for n, spec in enumerate(section["tasks"]):
        path = f"pipeline.tasks[{n}]"
        row = checked(spec, TASK, path)
        name = row.setdefault("name", _default_name(row["use"]))
        if name in names:
            raise ConfigError(
                f"two tasks named {name!r} (tasks[{names[name]}] too)",
                field=f"{path}.name",
                hint="give each step its own name:",
            )
        names[name] = n
        tasks.append(_task(row, path, by_name))
        shown.append(row)
    with at("pipeline"):
        template = pipeline(section["name"], *tasks)
    missing = template.missing_pool(by_name)
    if missing is not None:  # a task of yours (or a fanout branch) names a pool not here
        step = names.get(missing[0])
        raise ConfigError(
            f"task {missing[0]!r} leases from pool {missing[1]!r}, which the config lacks",
            field="pools" if step is None else f"pipeline.tasks[{step}].resource",
            hint=f"add pools.{missing[1]} (with its resources), or set the task's resource",
        )
    return template, {**section, "tasks": shown}


def _default_name(use: str) -> str:
    return use.rpartition(":")[2].rpartition(".")[2] if ":" in use else use


def _task(row: dict[str, Any], path: str, pools: Mapping[str, Pool]) -> Task:
    _check_on_ray(row, path)
    resource = row.get("resource")
    pool_names = list(pools)
    if resource is not None and resource not in pools:
        known = ", ".join(pool_names) or "none"
        raise ConfigError(
            f"no pool named {resource!r}{did_you_mean(resource, pool_names)}",
            field=f"{path}.resource",
            hint=f"pools of this config: {known}",
        )
    if resource is None and row["use"] in NEEDS_POOL:
        raise ConfigError(
            f"{row['use']} calls an endpoint: name the pool it leases from",
            field=f"{path}.resource",
            hint="resource: <a pool under pools:>",
        )
    if resource is not None and row["use"] in NEEDS_POOL:
        _check_endpoints(pools[resource], row["use"], path)
    with at(path):
        retry = resolve_retry(row.get("retry"))
        algorithm = None if "algorithm" not in row else resolve_algorithm(row["algorithm"])
    found, identity = resolve_use(row["use"], row.get("args"), path, row["name"])
    base = found if isinstance(found, Task) else None
    fn = base.fn if base is not None else found
    if not callable(fn):
        raise ConfigError(
            f"{row['use']} is a {type(fn).__name__}, not a task or a function",
            field=f"{path}.use",
            hint="name an @task, a function (value) or (value, ctx), or a factory with args",
        )
    with at(path):
        return Task(
            fn,
            name=row["name"],
            resource=resource if resource is not None else _of(base, "resource"),
            algorithm=algorithm if algorithm is not None else _of(base, "algorithm"),
            retry=retry if "retry" in row or base is None else base.retry,
            timeout_s=row.get("timeout_s", _of(base, "timeout_s")),
            config=row.get("config", _of(base, "config")),
            version=row.get("version", _of(base, "version")),
            executor=row.get("executor", _of(base, "executor") or "local"),
            identity=identity,
        )


def _check_on_ray(row: dict[str, Any], path: str) -> None:
    """A built-in whose body needs the Runner (leases, the run's clock) is refused on Ray
    saying why, in a config's words (the Task's own refusal speaks of Python's ``ctx``)."""
    use = row["use"]
    if row.get("executor") == "ray" and use in NOT_ON_RAY:
        raise ConfigError(
            f"{use} cannot run on Ray: {NOT_ON_RAY[use]}",
            field=f"{path}.executor",
            hint=f"built-ins that run on Ray: {', '.join(ON_RAY)}; "
            "drop executor: ray from this step (it runs in the Runner)",
        )


def _check_endpoints(pool: Pool, use: str, path: str) -> None:
    """Every resource of the pool an LLM task leases from says where its endpoint is."""
    for n, found in enumerate(pool.resources):
        if not found.options.get("base_url"):
            raise ConfigError(
                f"{use} ({path}) calls this resource's endpoint, and it has no base_url",
                field=f"pools.{pool.name}.resources[{n}].options.base_url",
                hint="options: {base_url: http://host:port/v1, model: ...}",
            )


def _of(task: Task | None, name: str) -> Any:
    return None if task is None else getattr(task, name)


def build_source(raw: Any) -> tuple[SourceSpec | None, dict[str, Any]]:
    """The rows of section ``source`` (None when absent: a resume reads the recorded ones)."""
    if raw is None:
        return None, {}
    row = checked(raw, SOURCE, "source")
    if ("path" in row) == ("range" in row):
        raise ConfigError(
            "give path or range (one of them)",
            field="source.path" if "path" not in row else "source.range",
            hint="path: items.jsonl, or range: 100 for the rows 0..99",
        )
    fmt = row.get("format")
    if fmt is not None and fmt not in INPUT_FORMATS:
        raise ConfigError(
            f"unknown format {fmt!r}{did_you_mean(fmt, INPUT_FORMATS)}",
            field="source.format",
            hint="one of " + ", ".join(INPUT_FORMATS),
        )
    if "range" in row and "format" in row:
        raise ConfigError("a range has no format", field="source.format", hint="drop it")
    return SourceSpec(**row), row


def runner_settings(run: Mapping[str, Any]) -> dict[str, Any]:
    """The Runner's keyword arguments from section ``run`` (checked)."""
    settings = {k: run[k] for k in _RUNNER_ARGS if k in run}
    if "stop_after" in run:
        settings["stop_after_s"] = parse_duration(run["stop_after"], field="run.stop_after")
    with at("run"):  # the Runner's own checks (admission >= concurrency, ...); opens nothing
        Runner(":memory:", handle_signals=False, **settings)
    return settings
