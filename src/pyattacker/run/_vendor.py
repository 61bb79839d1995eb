"""Vendor SDK clients that retry on their own, caught where the retry policy is known.

A resource's factory may hand tasks the official ``openai`` SDK's client, which retries
429s, 5xx answers and broken connections twice by default, inside one call. Behind a
task's retry policy that is hidden work: the retries are not
recorded as attempts, their waits land in the measured latency, and ``retry=None`` stops
meaning one attempt. The pool builds clients without knowing any policy; the Runner knows
each task's. So after each attempt, the first time a task has leased a resource, its
client is checked against that task's policy: a retrying ``openai`` client is recorded as
a ``resource.hidden_retries`` event and reported with a
:class:`~pyattacker.llm.HiddenRetriesWarning`, bluntest when the policy says no retries.

The pool now hands out a vendor client only with its retries turned off
(``pyattacker.pool._clients``, a ``resource.retries_off`` event), so for a client a lease
built this check stays quiet; it remains the backstop for a client that retries anyway
(one a factory cached and a task re-configured, say).

Only a client whose class (or a base class) comes from the ``openai`` package is looked
at, and ``pyattacker.llm`` is imported only then, so a run without the SDK pays one set
lookup per lease.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pyattacker.pool import Pool, TaskContext
from pyattacker.run._task import Task

__all__ = ["HiddenRetryCheck"]

_VENDORS = frozenset({"openai"})  # packages whose clients retry unless told not to


#: Records an event of the run: ``emit(kind, pipeline_id, seq, data)``.
Emit = Callable[[str, str | None, int | None, Mapping[str, Any]], None]


class HiddenRetryCheck:
    """Checks each (task, leased resource) pair once; see the module docstring."""

    __slots__ = ("_emit", "_pools", "_seen")

    def __init__(self, pools: Mapping[str, Pool], emit: Emit) -> None:
        self._pools = pools
        self._emit = emit
        self._seen: set[tuple[str, str]] = set()

    def after_attempt(self, task: Task, ctx: TaskContext) -> None:
        """Check the clients of the resources an attempt of ``task`` leased (``ctx.leased``,
        ``"pool/resource"``) that this task had not leased before."""
        seen = self._seen
        for where in ctx.leased:
            key = (task.fingerprint, where)  # the fingerprint covers the retry policy
            if key not in seen:
                seen.add(key)
                for pool, resource_id in self._resources(where):
                    self._check(task, ctx, pool, resource_id)

    def _resources(self, where: str) -> list[tuple[Pool, str]]:
        """The (pool, resource id) pairs ``where`` names (pool names may hold a ``/``)."""
        found = []
        for name, pool in self._pools.items():
            if where.startswith(f"{name}/") and where[len(name) + 1 :] in pool:
                found.append((pool, where[len(name) + 1 :]))
        return found

    def _check(self, task: Task, ctx: TaskContext, pool: Pool, resource_id: str) -> None:
        client = pool.client_of(resource_id)
        if client is None or not _from_vendor(client):
            return
        retries = getattr(client, "max_retries", 0)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries <= 0:
            return
        from pyattacker.llm import check_no_hidden_retries  # only with a vendor's client

        self._emit(
            "resource.hidden_retries",
            ctx.pipeline_id,
            ctx.seq,
            {
                "pool": pool.name,
                "resource": resource_id,
                "task": task.name,
                "client": type(client).__name__,
                "max_retries": retries,
                "max_attempts": task.retry.max_attempts,
            },
        )
        where = f"resource {pool.name}/{resource_id} leased by task {task.name!r}"
        check_no_hidden_retries(client, task.retry, where=where)


def _from_vendor(client: object) -> bool:
    return any(cls.__module__.partition(".")[0] in _VENDORS for cls in type(client).__mro__)
