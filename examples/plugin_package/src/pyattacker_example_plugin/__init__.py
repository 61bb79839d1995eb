"""An example pyattacker plugin: one task and one acquire algorithm, by entry point.

``use: example.shout`` in a config file runs :func:`shout` (a factory: its ``args`` are
its keywords); ``algorithm: example_first`` in a pool uses :class:`FirstFree`. Neither is
imported until a config names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pyattacker.pool import AcquireAlgorithm

__all__ = ["FirstFree", "shout"]


def shout(suffix: str = "!") -> Any:
    """A task that upper-cases its input (a string, or a row's ``text``) and adds ``suffix``."""

    def run(value: Any) -> Any:
        text = value.get("text", "") if isinstance(value, dict) else str(value)
        return text.upper() + suffix

    return run


@dataclass(frozen=True, slots=True)
class FirstFree(AcquireAlgorithm):
    """One try: the first resource free now, else the pool's usual wait (``wait``)."""

    name: ClassVar[str] = "example_first"

    async def acquire(self, request: Any) -> Any:
        lease = request.try_acquire()
        if lease is not None:
            return lease
        from pyattacker.pool import resolve_algorithm

        return await resolve_algorithm("wait").acquire(request)
