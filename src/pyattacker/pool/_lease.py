"""``Lease``: a resource held for a while, always returned.

A lease is handed out by ``Pool.try_acquire`` (through an acquire algorithm) and given back
by ``release_now()`` — synchronous and idempotent, so it is safe in ``finally`` blocks,
``__aexit__``, cancellation handlers and ``reclaim_now()``. ``async with lease`` releases on
every way out. While held, the holder tells the pool how things went with ``report()``;
that is the only input the health model takes.

``AcquireCall`` is what ``acquire(...)`` returns: await it for a ``Lease`` you release
yourself, or use it as ``async with`` to have the lease returned for you.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyattacker.pool._pool import Pool
    from pyattacker.pool._resource import Resource
    from pyattacker.pool._slot import Slot

__all__ = ["AcquireCall", "Lease", "LeaseOwner"]


class LeaseOwner(Protocol):
    """Who holds a lease (a ``TaskContext``); told when it is granted and when returned."""

    def _adopt(self, lease: Lease) -> None: ...

    def _forget(self, lease: Lease) -> None: ...

    def _used(self, usage: Mapping[str, float]) -> None: ...


class Lease:
    """One resource, held. ``client`` is what the resource's factory built (or the resource)."""

    __slots__ = (
        "_released",
        "_slot",
        "_tokens",
        "acquired_at",
        "algorithm",
        "client",
        "owner",
        "pool",
    )

    def __init__(
        self,
        pool: Pool,
        slot: Slot,
        client: object,
        acquired_at: float,
        owner: LeaseOwner | None,
        algorithm: str | None,
    ) -> None:
        self.pool = pool
        self._slot = slot
        self.client = client
        self.acquired_at = acquired_at
        self.owner = owner
        self.algorithm = algorithm
        self._released = False
        self._tokens = 0.0  # the token estimate a paced resource charged, until settled

    @property
    def resource(self) -> Resource:
        return self._slot.resource

    @property
    def released(self) -> bool:
        return self._released

    def report(
        self,
        *,
        ok: bool,
        latency_ms: float | None = None,
        usage: Mapping[str, float] | None = None,
        error: BaseException | None = None,
        retry_after: float | None = None,
        headers: object = None,
    ) -> None:
        """Tell the pool how a call on this resource went.

        ``ok=False`` is a failure for the health model, unless it is a refusal (an error that
        classifies as ``rate_limit``, or an explicit ``retry_after``): a refusal with a
        ``retry_after`` blocks the resource (and its quota group) for everyone until then and
        leaves health alone. ``usage`` adds to the resource's running totals (``quota_aware``
        reads them) and, inside a run, to the attempt's record (``AttemptRow.usage``).
        Reporting after release is allowed: the outcome is still a fact.

        On a paced resource (``rpm``/``tpm``/``rpd``), the tokens ``usage`` reports
        (``total_tokens``, else ``prompt_tokens + completion_tokens``, else ``input_tokens +
        output_tokens``, else ``tokens``) replace the estimate the lease was charged, and
        ``headers`` (the response's: a mapping or ``(name, value)`` pairs) are read for
        ``x-ratelimit-remaining-*``/``x-ratelimit-reset-*``, which the pacing then follows.
        """
        self.pool._feedback.report(
            self._slot,
            ok=ok,
            latency_ms=latency_ms,
            usage=usage,
            error=error,
            retry_after=retry_after,
            headers=headers,
            lease=self,
        )
        if usage and self.owner is not None:  # checked numbers by now (Feedback.report)
            self.owner._used(usage)

    def degrade(self, reason: str) -> None:
        """Take the resource out of rotation for its cooldown; the failure counter is kept."""
        self.pool._feedback.degrade(self._slot, reason)

    def release_now(self) -> bool:
        """Give the resource back. Returns False (and does nothing) if already released."""
        if self._released:
            return False
        self._released = True
        self.pool._give_back(self._slot, self.acquired_at)
        if self.owner is not None:
            self.owner._forget(self)
        return True

    async def __aenter__(self) -> Lease:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release_now()

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"<Lease {self.pool.name}/{self.resource.id} {state} since {self.acquired_at:.3f}>"


class AcquireCall:
    """``await`` it for a ``Lease``, or ``async with`` it to have the lease returned for you."""

    __slots__ = ("_lease", "_start")

    def __init__(self, start: Callable[[], Awaitable[Lease]]) -> None:
        self._start = start
        self._lease: Lease | None = None

    def __await__(self) -> Generator[Any, None, Lease]:
        return self._start().__await__()

    async def __aenter__(self) -> Lease:
        self._lease = await self._start()
        return self._lease

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._lease is not None:
            self._lease.release_now()
