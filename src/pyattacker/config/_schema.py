"""The fields of each section of a config file, and the one check every section goes
through: unknown fields (with "did you mean"), required ones, types and ranges, each
``ConfigError`` naming its field path (``pipeline.tasks[2].timeout_s``).

What a field's value means is checked where the value is used (the algorithm registry,
``Retrying``, ``Resource.create``, the task factories), by ``pyattacker.config._build``;
this module checks only what a value *is*.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyattacker.errors import ConfigError

__all__ = [
    "PIPELINE",
    "POOL",
    "RESOURCE",
    "RUN",
    "SOURCE",
    "TASK",
    "TOP",
    "Field",
    "checked",
    "did_you_mean",
]


@dataclass(frozen=True, slots=True)
class Field:
    """One field: its ``kind`` (``str``, ``int``, ``number``, ``bool``, ``map``, ``list``,
    ``name`` (a string or a mapping: algorithms, retry policies), ``duration`` (seconds,
    or a text like ``90s``), ``version`` (a string or an integer), ``any``), whether it is
    ``required``, its ``default`` (shown in the effective config) and a lower bound."""

    kind: str
    required: bool = False
    default: Any = None
    at_least: float | None = None
    above: float | None = None
    help: str = ""


TOP = {
    "run": Field("map", help="store, concurrency, admission, stop conditions, label"),
    "pools": Field("map", help="pools by name: algorithm, health, resources"),
    "pipeline": Field("map", required=True, help="name and tasks"),
    "source": Field("map", help="the rows: path or range, limit, key, repeats"),
}
RUN = {
    "store": Field("str", help="SQLite file [default: runs/<pipeline>-<timestamp>.db]"),
    "concurrency": Field("int", default=16, at_least=1, help="attempts in flight at most"),
    "admission": Field("int", at_least=1, help="live pipelines at most [4 * concurrency]"),
    "stop_after_failures": Field("int", at_least=1, help="stop once N pipelines failed"),
    "stop_after": Field("duration", help="stop after this long: 90s, 5m, 1.5h"),
    "grace_s": Field("number", default=10.0, at_least=0, help="grace for attempts on stop"),
    "write_behind": Field("bool", default=True, help="history written in batches"),
    "history_batch": Field("int", default=1024, at_least=1, help="rows per history batch"),
    "heartbeat_s": Field("number", default=1.0, above=0, help="heartbeat and flush period"),
    "strict_leases": Field("bool", default=False, help="a forgotten lease fails the attempt"),
    "artifacts": Field("str", default="inline", help="outputs kept: inline, file or null"),
    "label": Field("str", help="a label recorded with the run"),
    "notes": Field("str", help="free text recorded with the run"),
}
_HEALTH = {
    "degrade_after": Field("int", at_least=1, help="failures before a resource rests"),
    "dead_after": Field("int", at_least=1, help="failures before it is dead"),
    "cooldown_s": Field("number", at_least=0, help="how long a degraded resource rests"),
}
POOL = {
    "algorithm": Field("name", help="acquire algorithm: a name or {name: ..., params}"),
    "resources": Field("list", required=True, help="the endpoints or keys"),
    **_HEALTH,
}
RESOURCE = {
    "id": Field("str", required=True, help="unique in its pool"),
    "kind": Field("str", default="endpoint", help="what it is (openai, http, ...)"),
    "capacity": Field("int", default=1, at_least=1, help="leases at once"),
    "rpm": Field("number", above=0, help="requests per minute (paced)"),
    "tpm": Field("number", above=0, help="tokens per minute (paced)"),
    "rpd": Field("int", at_least=1, help="requests per rolling day"),
    "burst": Field("int", at_least=1, help="calls back to back after a quiet spell"),
    "tokens_per_call": Field("number", above=0, help="token estimate of one call"),
    "quota_group": Field("str", help="resources sharing one quota"),
    "tags": Field("list", help="selector tags"),
    "options": Field("map", help="settings the tasks read (base_url, model)"),
    "secrets": Field("map", help="like options, always masked (api_key: ${KEY})"),
    **_HEALTH,
}
PIPELINE = {
    "name": Field("str", required=True, help="the pipeline's name (part of each item's id)"),
    "tasks": Field("list", required=True, help="the steps, in order"),
}
TASK = {
    "use": Field("str", required=True, help="a built-in task's name, or module:attr"),
    "name": Field("str", help="the step's name [the use: name]"),
    "resource": Field("str", help="the pool the task leases from"),
    "algorithm": Field("name", help="acquire algorithm for this task's leases"),
    "retry": Field("name", help="'none', 'exponential' or {max_attempts: ..., ...}"),
    "timeout_s": Field("number", above=0, help="per attempt"),
    "args": Field("map", help="the built-in's arguments, or the factory's"),
    "config": Field("map", help="JSON-able parameters that are part of the identity"),
    "version": Field("version", help="bump to rerun the step"),
    "executor": Field("str", help="where the body runs: local [default] or ray (pyattacker[ray])"),
}
SOURCE = {
    "path": Field("str", help=".jsonl, .csv or .parquet file"),
    "format": Field("str", help="jsonl, csv or parquet when the suffix does not say"),
    "range": Field("int", at_least=0, help="the integers 0..N-1 as rows"),
    "limit": Field("int", at_least=0, help="only the first N rows"),
    "repeats": Field("int", at_least=1, help="pipelines per row"),
    "key": Field("str", help="name each pipeline by this row field"),
}

_KINDS = {
    "str": "a string",
    "int": "an integer",
    "number": "a number",
    "bool": "true or false",
    "map": "a mapping",
    "list": "a list",
    "name": "a name or a mapping",
    "duration": "a duration (90s, 5m, 1.5h) or seconds",
    "version": "a string or an integer",
}


def did_you_mean(word: str, known: Any) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def checked(value: Any, fields: Mapping[str, Field], path: str) -> dict[str, Any]:
    """``value`` as a dict with defaults filled in, once it is a mapping with only known
    fields, every required one, each of its kind and range; ``ConfigError`` names the
    first field that is wrong."""
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"must be a mapping, got {_what(value)}", field=path, hint=_fields_hint(fields)
        )
    for key in value:
        if key not in fields:
            where = f"{path}.{key}" if path else str(key)
            raise ConfigError(
                f"unknown field {key!r}{did_you_mean(str(key), fields)}",
                field=where,
                hint=_fields_hint(fields),
            )
    out: dict[str, Any] = {}
    for name, spec in fields.items():
        where = f"{path}.{name}" if path else name
        if name not in value or value[name] is None:
            if spec.required:
                raise ConfigError(f"{name} is required", field=where, hint=spec.help or None)
            if spec.default is not None:
                out[name] = spec.default
            continue
        out[name] = _of_kind(value[name], spec, where)
    return out


def _of_kind(value: Any, spec: Field, where: str) -> Any:
    kind = spec.kind
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "number": _is_number(value),
        "bool": isinstance(value, bool),
        "map": isinstance(value, Mapping),
        "list": isinstance(value, list),
        "name": isinstance(value, str | Mapping),
        "duration": isinstance(value, str) or _is_number(value),
        "version": isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool)),
        "any": True,
    }[kind]
    if not ok:
        hint = spec.help or None
        if isinstance(value, bool) and kind != "bool":
            hint = "YAML 1.1 reads yes/no/on/off as booleans: quote the value"
        raise ConfigError(f"must be {_KINDS[kind]}, got {_what(value)}", field=where, hint=hint)
    if kind in ("int", "number"):
        _in_range(value, spec, where)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _in_range(value: float, spec: Field, where: str) -> None:
    if spec.at_least is not None and value < spec.at_least:
        bound = f">= {spec.at_least:g}"
    elif spec.above is not None and value <= spec.above:
        bound = f"> {spec.above:g}"
    else:
        return
    raise ConfigError(f"must be {bound}, got {value!r}", field=where, hint=spec.help or None)


def _what(value: Any) -> str:
    if value is None:
        return "nothing"
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type(value).__name__} {text}"


def _fields_hint(fields: Mapping[str, Field]) -> str:
    return "known fields: " + ", ".join(fields)
