"""``Settings``: the knobs of one run's execution, and the checks of the Runner's arguments.

:func:`checked_settings` refuses a bad argument with a ``ConfigError`` naming it, before
anything is opened, in the order the Runner lists its arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from pyattacker.errors import ConfigError
from pyattacker.pool import Pool

__all__ = ["Settings", "checked_settings", "pools_by_name"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    concurrency: int
    admission: int
    grace_s: float
    strict_leases: bool
    stop_after_failures: int | None
    report_failures: int


def checked_settings(
    *,
    concurrency: int,
    admission: int | None,
    stop_after_failures: int | None,
    stop_after_s: float | None,
    grace_s: float,
    history_batch: int,
    heartbeat_s: float,
    strict_leases: bool,
    report_failures: int,
) -> Settings:
    """The execution's settings (``admission`` defaults to ``4 * concurrency``), once every
    argument is checked; ``stop_after_s``, ``history_batch`` and ``heartbeat_s`` are the
    Runner's own and only checked here."""
    _positive_int("concurrency", concurrency)
    admission = 4 * concurrency if admission is None else admission
    _positive_int("admission", admission)
    if admission < concurrency:
        raise ConfigError(
            f"admission ({admission}) is below concurrency ({concurrency})",
            field="admission",
            hint="admit at least as many pipelines as can run at once",
        )
    if stop_after_failures is not None:
        _positive_int("stop_after_failures", stop_after_failures)
    for name, seconds in (("stop_after_s", stop_after_s), ("grace_s", grace_s)):
        if seconds is not None and not seconds >= 0:
            raise ConfigError(f"must be >= 0 seconds, got {seconds!r}", field=name)
    _positive_int("history_batch", history_batch)
    if not heartbeat_s > 0:
        raise ConfigError(f"must be > 0 seconds, got {heartbeat_s!r}", field="heartbeat_s")
    return Settings(
        concurrency=concurrency,
        admission=admission,
        grace_s=grace_s,
        strict_leases=strict_leases,
        stop_after_failures=stop_after_failures,
        report_failures=report_failures,
    )


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"must be an integer >= 1, got {value!r}", field=name)


def pools_by_name(pools: Iterable[Pool] | Mapping[str, Pool]) -> dict[str, Pool]:
    """The Runner's ``pools`` by name; ``ConfigError`` for a non-pool or a name twice."""
    if isinstance(pools, Mapping):
        return dict(pools)
    found: dict[str, Pool] = {}
    for pool in pools:
        if not isinstance(pool, Pool):
            raise ConfigError(f"not a Pool: {pool!r}", field="pools")
        if pool.name in found:
            raise ConfigError(f"two pools named {pool.name!r}", field="pools")
        found[pool.name] = pool
    return found
