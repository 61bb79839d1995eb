"""``attack -c PLAN.yaml|.toml|.json``: the flags, written down.

A plan file is a mapping whose keys are the long flags' names (``rate``, ``duration``,
``max-in-flight`` or ``max_in_flight``), plus ``urls`` (or ``url``), ``stages`` (the
flag's string, or a list of ``"30s:500/s"`` strings or ``{duration, rate}`` objects),
``targets`` (a file, or an inline list of request objects as a targets file's lines),
``thresholds``/``headers``/``keys`` (lists, as the repeatable flags), ``data``. A value a
flag given on the command line also sets is the command line's (a repeatable flag's whole
list replaces the file's), and a load given on the command line (``--rate``, ``--stages``,
``--clients`` or ``--sweep``) replaces the file's whole load (:data:`LOAD_KEYS`): the two
are never merged into one model. ``${VAR}`` in a string is the environment variable ``VAR``
(``$${`` for a literal ``${``); an unset one is an error. Files the plan reads (targets,
data, keys-file, prompts, TLS files, ``body: "@FILE"``, the scenario's FILE.py) are found
relative to the plan file; the reports it writes, relative to the working directory.

Every mistake (an unknown key, a value of the wrong kind, an unset variable) is a
ConfigError naming the file and the key: exit 2 before any traffic.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import yaml
from click.core import ParameterSource

from pyattacker._inputs import MiB, loads, read_bounded
from pyattacker.attack import line_from_object
from pyattacker.errors import ConfigError

__all__ = ["CONFIG_PARAM", "LOAD_FLAGS", "LOAD_KEYS", "OFF_FLAGS", "from_plan_file"]

CONFIG_PARAM = "config_path"
_LIMIT = 16 * MiB
_ALIASES = {"url": "urls", "thresholds": "threshold", "headers": "header", "keys": "key"}
# Files the plan reads, found relative to the plan file (as are --scenario's FILE.py and
# ``body: "@FILE"``).
_READS = ("targets_path", "data_path", "keys_file", "prompts_path", "cacert", "cert", "cert_key")
_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FROM_USER = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
# The flags that name a load. Any of them on the command line means "this load, not the
# file's": every key of the file's load model (LOAD_KEYS) is then left out, since a merge
# makes a model no one wrote (the file's stages ramping from the typed --rate) or one the
# command refuses (the file's rate beside a typed --clients). A companion alone (--arrival,
# --think, --sweep-levels) tunes the file's load instead, as any other flag does.
LOAD_FLAGS = ("rate", "stages", "clients", "sweep")
LOAD_KEYS = (*LOAD_FLAGS, "arrival", "think", "sweep_levels")
# Value flags a plan can set that the command line switches off, as --no-X does an on/off
# key: each off flag's parameter, and the one it clears (and cannot be typed beside).
OFF_FLAGS = {"no_serve": ("serve", "--serve"), "no_ray": ("ray_address", "--ray")}


def from_plan_file(
    urls: Sequence[str], options: dict[str, Any]
) -> tuple[Sequence[str], dict[str, Any]]:
    """``urls`` and ``options`` with the plan file's values (when ``-c`` names one) for
    every parameter the command line did not set, and the file's path as ``plan_file``
    (for the report's plan); none of the file's load when the command line gives one;
    none of ``serve`` or ``ray`` with ``--no-serve`` or ``--no-ray`` (:data:`OFF_FLAGS`)."""
    off = [name for name in OFF_FLAGS if options.pop(name, False)]
    path = options.pop(CONFIG_PARAM, None)
    typed = _typed(click.get_current_context())
    if path is not None:
        urls = _merged(urls, options, path, typed)
    for name in off:
        cleared, flag = OFF_FLAGS[name]
        off_flag = "--" + name.replace("_", "-")
        if cleared in typed:
            raise ConfigError(f"cannot be combined with {flag}", field=off_flag,
                              hint=f"give one of {flag} or {off_flag}")  # fmt: skip
        options[cleared] = None
    return urls, options


def _merged(
    urls: Sequence[str], options: dict[str, Any], path: str, typed: set[str]
) -> Sequence[str]:
    """The URLs, and ``options`` updated in place, with the plan file at ``path`` for the
    parameters not ``typed`` on the command line."""
    ctx = click.get_current_context()
    params = _params(ctx.command)
    plan = _read(path)
    base = Path(path).parent
    options["plan_file"] = path
    for key, value in plan.items():
        param = _param_for(key, params, path)
        where = f"{path}: {key}"
        if param.name == "urls":
            if not urls:
                urls = _strings(value, where)
            continue
        assert param.name is not None
        if value is None or param.name in typed:
            continue  # null: as if the key were absent
        options[param.name] = _value(param, _expand(value, where), where, base, ctx)
    return urls


def _typed(ctx: click.Context) -> set[str]:
    """The parameters whose value is the command line's, not the file's: those it set, and
    every key of the load when it set a load (the file's load is then dropped whole)."""
    typed = {
        p.name
        for p in ctx.command.params
        if p.name and ctx.get_parameter_source(p.name) in _FROM_USER
    }
    if not typed.isdisjoint(LOAD_FLAGS):
        typed.update(LOAD_KEYS)
    return typed


def _read(path: str) -> dict[str, Any]:
    raw = read_bounded(path, "-c", _LIMIT)
    suffix = Path(path).suffix.lower()
    try:
        text = raw.decode("utf-8-sig")
        if suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = loads(text, "-c")
        else:
            raise ConfigError(
                f"{path}: cannot tell the format from the name", field="-c",
                hint="name it .yaml, .yml, .toml or .json",
            )  # fmt: skip
    except (UnicodeDecodeError, yaml.YAMLError, tomllib.TOMLDecodeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: cannot read it ({first})", field="-c") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a plan is a mapping of flag names to values", field="-c",
            hint="e.g. rate: 500/s",
        )  # fmt: skip
    return data


def _params(command: click.Command) -> dict[str, click.Parameter]:
    """Every plan key and its parameter: each long flag's name (``max-in-flight`` and
    ``max_in_flight``), ``urls``, and the aliases."""
    found: dict[str, click.Parameter] = {}
    for param in command.params:
        if isinstance(param, click.Argument):
            found["urls"] = param
            continue
        for opt in param.opts:
            if opt.startswith("--") and param.name not in (CONFIG_PARAM, "help", *OFF_FLAGS):
                found[opt[2:]] = found[opt[2:].replace("-", "_")] = param
    for alias, key in _ALIASES.items():
        found[alias] = found[key]
    return found


def _param_for(key: Any, params: Mapping[str, click.Parameter], path: str) -> click.Parameter:
    param = params.get(key) if isinstance(key, str) else None
    if param is not None:
        return param
    close = difflib.get_close_matches(str(key), [k for k in params if "_" not in k], n=1)
    raise ConfigError(
        f"{path}: unknown key {key!r}",
        field="-c",
        hint=f"did you mean {close[0]!r}?" if close else "the keys are the long flags' names",
    )


def _expand(value: Any, where: str) -> Any:
    """``value`` with ``${VAR}`` in every string replaced by the environment's ``VAR``."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: _env(m, where), value)
    if isinstance(value, list):
        return [_expand(v, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, where) for k, v in value.items()}
    return value


def _env(match: re.Match[str], where: str) -> str:
    name = match.group(1)
    if name is None:
        return "${"
    if name not in os.environ:
        raise ConfigError(f"{where}: ${{{name}}} is not set", field="-c",
                          hint=f"export {name}=... or write the value")  # fmt: skip
    return os.environ[name]


def _value(param: click.Parameter, value: Any, where: str, base: Path, ctx: click.Context) -> Any:
    """The file's ``value`` as click would have handed the flag over."""
    name = param.name
    if name == "stages" and isinstance(value, list):
        value = ",".join(_stage(s, f"{where}[{i}]") for i, s in enumerate(value))
    if name == "targets_path" and isinstance(value, list):
        return tuple(line_from_object(v, f"{where}[{i}]", base) for i, v in enumerate(value))
    if name == "headers" and isinstance(value, dict):
        value = [f"{k}: {v}" for k, v in value.items()]
    if param.multiple:
        items = value if isinstance(value, list) else [value]
        return tuple(_cast(param, v, where, ctx) for v in items)
    if isinstance(value, list | dict):
        raise ConfigError(f"{where}: expected one value, got a {type(value).__name__}",
                          field="-c")  # fmt: skip
    cast = _cast(param, value, where, ctx)
    if name in _READS and isinstance(cast, str):
        return str(base / cast)
    if name == "body" and isinstance(cast, str) and cast.startswith("@"):
        return "@" + str(base / cast[1:])
    if name == "scenario" and isinstance(cast, str) and ":" in cast:
        file, attr = cast.rsplit(":", 1)
        return f"{base / file}:{attr}"
    return cast


def _cast(param: click.Parameter, value: Any, where: str, ctx: click.Context) -> Any:
    is_flag = isinstance(param, click.Option) and param.is_flag
    if is_flag and not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}", field="-c")
    if isinstance(value, bool) and not is_flag:
        raise ConfigError(f"{where}: expected a value, got {value!r}", field="-c")
    try:
        return param.type.convert(value, param, ctx)
    except click.BadParameter as exc:
        raise ConfigError(f"{where}: {exc.message}", field="-c") from None


def _stage(stage: Any, where: str) -> str:
    if isinstance(stage, str):
        return stage
    if isinstance(stage, dict) and set(stage) == {"duration", "rate"}:
        return f"{stage['duration']}:{stage['rate']}"
    raise ConfigError(
        f"{where}: a stage is 'DURATION:RATE' or {{duration: ..., rate: ...}}", field="-c"
    )


def _strings(value: Any, where: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{where}: URLs are strings", field="-c")
    return [_expand(v, where) for v in items]
