"""Small helpers the pool, algorithm and clock tests share (imported as ``helpers``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pyattacker.pool import Lease, Pool, Resource
from pyattacker.testing import run_virtual

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` on the virtual loop from t=0 with a 10 s real-time guard."""

    async def wrapper() -> T:
        return await main()

    return run_virtual(wrapper(), wall_budget_s=10.0)


def now() -> float:
    """The running loop's (virtual) time."""
    return asyncio.get_running_loop().time()


async def settle() -> None:
    """Let every runnable task run; no time passes on the virtual loop."""
    for _ in range(10):
        await asyncio.sleep(0)


def res(rid: str, capacity: int = 1, **kwargs: Any) -> Resource:
    """A resource of kind ``llm`` (or ``kind=...``) with this id and capacity."""
    kind = kwargs.pop("kind", "llm")
    return Resource.create(kind, id=rid, capacity=capacity, **kwargs)


def fill(pool: Pool) -> list[Lease]:
    held = []
    while (lease := pool.try_acquire()) is not None:
        held.append(lease)
    return held


def release_at(t: float, lease: Lease) -> None:
    asyncio.get_running_loop().call_at(t, lease.release_now)
