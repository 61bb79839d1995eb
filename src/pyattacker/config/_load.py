"""``load_config``: one config file to the objects of a run, through the one validation
path that ``validate`` and every run mode share. Nothing is opened for writing here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from pyattacker._secrets import mask, mask_url
from pyattacker.config._build import (
    SourceSpec,
    build_pipeline,
    build_pools,
    build_source,
    runner_settings,
)
from pyattacker.config._read import read_config, substitute
from pyattacker.config._schema import RUN, TOP, checked
from pyattacker.pool import Pool
from pyattacker.run import PipelineTemplate
from pyattacker.store import check_backend

__all__ = ["LoadedConfig", "load_config", "render_effective"]


@dataclass
class LoadedConfig:
    """A checked config as the run package's objects.

    ``runner`` holds the Runner's keyword arguments, ``store`` the store's path (None: the
    default), ``source`` the rows (None: a resume reads the recorded ones), ``effective``
    the config as it will run (overrides applied, defaults filled in, secrets masked), and
    ``unset`` the ``${VAR}``\\ s that were not set (field path, name).
    """

    template: PipelineTemplate
    pools: list[Pool]
    runner: dict[str, Any]
    store: str | None
    source: SourceSpec | None
    effective: dict[str, Any]
    unset: list[tuple[str, str]] = field(default_factory=list)
    artifacts: str = "inline"  # where outputs are kept (pyattacker.store, ARTIFACT_BACKENDS)


def load_config(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    strict_env: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> LoadedConfig:
    """Read, substitute, override, check and build; ``ConfigError`` names the field path
    of the first problem. ``overrides`` maps ``section.field`` to a value (the command
    line's flags), applied before anything is checked."""
    raw = read_config(path)
    found = substitute(raw, os.environ if environ is None else environ, strict_env=strict_env)
    data = _overridden(found.data, overrides or {})
    top = checked(data, TOP, "")
    run = checked(top.get("run", {}), RUN, "run")
    artifacts = check_backend(run.get("artifacts", "inline"), "run.artifacts")
    settings = runner_settings(run)
    pools, pools_shown = build_pools(top.get("pools"))
    template, pipeline_shown = build_pipeline(top["pipeline"], pools)
    source, source_shown = build_source(top.get("source"))
    shown = {"run": run, "pools": pools_shown, "pipeline": pipeline_shown}
    if source_shown:
        shown["source"] = source_shown
    return LoadedConfig(
        template=template,
        pools=pools,
        runner=settings,
        store=run.get("store"),
        source=source,
        effective=_masked(shown),
        unset=found.unset,
        artifacts=artifacts,
    )


def _overridden(data: Any, overrides: Mapping[str, Any]) -> Any:
    if not overrides or not isinstance(data, Mapping):
        return data
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in data.items()}
    for dotted, value in overrides.items():
        section, _, name = dotted.partition(".")
        holder = out.get(section)
        if not isinstance(holder, dict):  # absent (or wrong: checked later, by its path)
            if holder is not None:
                continue
            holder = out[section] = {}
        holder[name] = value
    return out


def _masked(value: Any) -> Any:
    """``mask`` (secret-looking keys, ``secrets`` wholesale) and secret URL parameters."""
    return _urls(mask(value))


def _urls(value: Any) -> Any:
    if isinstance(value, str):
        return mask_url(value)
    if isinstance(value, dict):
        return {k: _urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_urls(v) for v in value]
    return value


def render_effective(config: LoadedConfig) -> str:
    """The effective config as YAML (secrets masked), in section order."""
    return yaml.safe_dump(config.effective, sort_keys=False, allow_unicode=True)
