"""Shards: one run's pipelines split between N processes (or machines), each with its own
store, merged again by the readers (``pyattacker report A.db B.db``).

A pipeline belongs to shard ``i`` of ``N`` (1-based) when ``shard_of(pipeline_id, N) ==
i``: a SHA-256 of the pipeline id (itself a digest of the template's name and the row's key,
or its content, and the repeat), so every process on every machine puts every pipeline in
the same shard, whatever the order or the number of rows. Python's ``hash()`` would not do:
it is salted per process.

Keys are shared between shards, their limits are not: :func:`divide_pools` gives each shard
``capacity // N`` of each resource (at least 1, with a warning when that rounds down from
less than N) and ``rpm / N``, ``tpm / N`` (``rpd // N``, at least 1), so N shards together
stay within a key's limits. See ``docs/run.md`` ("Shards").
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass

from pyattacker.errors import ConfigError
from pyattacker.pool import Pool, Resource

__all__ = ["Shard", "divide_pools", "shard_of", "shard_store_name"]

_SHARD = re.compile(r"^\s*(\d{1,6})\s*/\s*(\d{1,6})\s*$")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` (1..``count``) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str, *, field: str = "--shard") -> Shard:
        """``"2/4"`` -> ``Shard(2, 4)``; ``ConfigError`` naming ``field`` otherwise."""
        found = _SHARD.match(text) if isinstance(text, str) else None
        if found is None:
            raise ConfigError(
                f"{text!r} is not a shard", field=field, hint="write i/N, e.g. 1/4 (1 <= i <= N)"
            )
        index, count = int(found[1]), int(found[2])
        if count < 1 or not 1 <= index <= count:
            raise ConfigError(
                f"{text!r}: the shard must be from 1 to N, with N at least 1",
                field=field,
                hint=f"one of 1/{max(count, 1)} .. {max(count, 1)}/{max(count, 1)}",
            )
        return cls(index, count)

    def holds(self, pipeline_id: str) -> bool:
        return shard_of(pipeline_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(pipeline_id: str, count: int) -> int:
    """The shard (1..``count``) of ``pipeline_id``: the same in every process and machine."""
    value = int.from_bytes(hashlib.sha256(pipeline_id.encode()).digest()[:8], "big")
    return value % count + 1


def shard_store_name(store: str, shard: Shard) -> str:
    """``eval.db`` -> ``eval.shard-2-of-4.db``: the store of one shard, named predictably."""
    stem, dot, suffix = store.rpartition(".")
    if not dot or "/" in suffix:
        return f"{store}.shard-{shard.index}-of-{shard.count}"
    return f"{stem}.shard-{shard.index}-of-{shard.count}.{suffix}"


def divide_pools(pools: list[Pool], count: int) -> tuple[list[Pool], list[str]]:
    """New pools whose resources have a ``count``-th of the limits (see the module's
    docstring), and a warning for each resource whose capacity was raised to 1."""
    if count <= 1:
        return pools, []
    warnings: list[str] = []
    divided = []
    for pool in pools:
        resources = [_divided(pool.name, r, count, warnings) for r in pool.resources]
        divided.append(
            Pool(
                pool.name,
                resources,
                algorithm=pool.algorithm,
                clock=pool.clock,
                deadlock_warn_s=pool.deadlock_warn_s,
            )
        )
    return divided, warnings


def _divided(pool: str, resource: Resource, count: int, warnings: list[str]) -> Resource:
    capacity = resource.capacity // count
    if capacity < 1:
        warnings.append(
            f"pool {pool!r}, resource {resource.id!r}: capacity {resource.capacity} / "
            f"{count} shards rounds to 0; each shard gets 1, so together they may hold "
            f"{count} leases at once"
        )
    return dataclasses.replace(
        resource,
        capacity=max(1, capacity),
        rpm=None if resource.rpm is None else resource.rpm / count,
        tpm=None if resource.tpm is None else resource.tpm / count,
        rpd=None if resource.rpd is None else max(1, resource.rpd // count),
    )
