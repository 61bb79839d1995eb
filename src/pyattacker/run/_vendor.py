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

import inspect
from collections.abc import Callable, Iterator, Mapping
from types import CodeType
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.pool import Pool, TaskContext
from pyattacker.run._task import Task

__all__ = ["HiddenRetryCheck", "captured_client", "check_captured_clients"]

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


def check_captured_clients(tasks: Iterator[Task] | list[Task] | tuple[Task, ...]) -> None:
    """Refuse (``ConfigError``, field ``task``) a task whose code reaches a vendor client
    that retries on its own through a module global or a closure rather than a lease: the
    pool never hands it out, so it cannot turn its retries off, and the server would see
    requests the store never records. Checked before a run writes anything."""
    for task in tasks:
        found = captured_client(task.fn)
        if found is None:
            continue
        name, client = found
        kind = type(client).__name__
        raise ConfigError(
            f"task {task.name!r} calls {name}, an {kind} that retries "
            f"{client.max_retries} times on its own, outside its lease: those retries "  # type: ignore[attr-defined]
            "would be requests the server sees and the store never records",
            field="task",
            hint=f"build it with max_retries=0 (the task's retry policy retries), or hand "
            f"it out by the pool: Resource.create(..., factory=lambda r: {kind}(...)) and "
            "use lease.client",
        )


def captured_client(fn: Any, depth: int = 3) -> tuple[str, object] | None:
    """``(name, client)``: a retrying vendor client ``fn`` reaches by a global or closure
    name, looking into the plain functions of its module it calls, ``depth`` deep."""
    return _search(inspect.unwrap(fn), depth, set())


def _search(fn: Any, depth: int, seen: set[int]) -> tuple[str, object] | None:
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType) or id(fn) in seen:
        return None
    seen.add(id(fn))
    scope = getattr(fn, "__globals__", {})
    named = [(n, scope[n]) for n in _names(code) if n in scope]
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            named.append((name, cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    for name, value in named:
        if _from_vendor(value) and _retries(value) > 0:
            return name, value
    for _name, value in named:
        if depth > 0 and inspect.isfunction(value) and value.__module__ == fn.__module__:
            found = _search(value, depth - 1, seen)
            if found is not None:
                return found
    return None


def _names(code: CodeType) -> Iterator[str]:
    """The global names ``code`` and the code nested in it (inner functions) load."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _names(const)


def _retries(client: object) -> int:
    retries = getattr(client, "max_retries", 0)
    return retries if isinstance(retries, int) and not isinstance(retries, bool) else 0
