"""Helpers the run tests share (imported as ``run_helpers``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

from pyattacker.run import Runner, RunReport
from pyattacker.store import MemoryStore, RowKind, Store
from pyattacker.testing import run_virtual

T = TypeVar("T")


def virtual(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` on the virtual loop from t=0 with a 20 s real-time guard."""

    async def wrapper() -> T:
        return await main()

    return run_virtual(wrapper(), wall_budget_s=20.0)


def now() -> float:
    return asyncio.get_running_loop().time()


def run_virtually(runner: Runner, specs: Any, *, resume: bool = False) -> RunReport:
    return virtual(lambda: runner.run_async(specs, resume=resume))


def runner(store: Store | str | None = None, **kwargs: Any) -> Runner:
    kwargs.setdefault("handle_signals", False)
    return Runner(store if store is not None else MemoryStore(), **kwargs)


def rows(store: Store, kind: RowKind, /, **where: Any) -> list[dict[str, Any]]:
    return [
        row
        for row in store.rows(kind)
        if all(row.get(key) == value for key, value in where.items())
    ]


class Pulled:
    """An input generator that remembers how far it was pulled."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items
        self.count = 0

    def __iter__(self) -> Iterator[Any]:
        for item in self.items:
            self.count += 1
            yield item
