"""An example pyattacker plugin: a task, an acquire algorithm and an attack sender, by
entry point.

``use: example.shout`` in a config file runs :func:`shout` (a factory: its ``args`` are
its keywords); ``algorithm: example_first`` in a pool uses :class:`FirstFree`;
``pyattacker attack URL --sender example.tagged`` sends every attempt with
:func:`tagged`'s sender. None is imported until something names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pyattacker.pool import AcquireAlgorithm

__all__ = ["FirstFree", "shout", "tagged"]


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


def tagged(client: Any, plan: Any) -> Any:
    """An attack sender (a factory of ``(client, plan)``): plain HTTP through the attack's
    client, each request carrying ``x-plugin: example.tagged`` and asking pyattacker's
    echo server to answer with status 299 (so a test can tell it was this sender)."""
    from pyattacker.attack import HttpSender, Target

    class Tagged(HttpSender):
        async def send(self, target: Target, attempt: Any, hop: Any = None) -> None:
            extra = (("x-plugin", "example.tagged"), ("x-echo-status", "299"))
            tagged = Target(target.id, target.url, (*target.headers, *extra))
            await super().send(tagged, attempt, hop)

    return Tagged(client, method=plan.method, body=plan.body)
