"""The pool's pacing glue: charging a lease, and the dead-end check.

A mixin of ``Pool`` (kept apart so that each module stays readable): it charges the pure
``Pacer`` (``_pacing``) for a grant, with its event; settling the charge is ``_feedback``'s.
``check_usable`` raises ``NoUsableResource`` for a selector nothing can serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyattacker.errors import NoUsableResource
from pyattacker.pool._lease import Lease
from pyattacker.pool._selector import ANY, Selector
from pyattacker.pool._slot import Slot, hopeless_reasons
from pyattacker.pool._waiting import WaitQueue

__all__ = ["PoolPacing"]


class PoolPacing:
    """What ``Pool`` does about pacing; needs its ``name``, ``_slots``, ``_queue``, ``_emit``."""

    name: str
    _slots: Sequence[Slot]
    _queue: WaitQueue

    def _emit(self, kind: str, resource: str | None = None, **data: Any) -> None:
        raise NotImplementedError  # Pool's

    def _pace(self, slot: Slot, lease: Lease, now: float, tokens: float | None) -> None:
        """Charge the lease to its resource's pacer (after ``_grant``: the same instant)."""
        pacer = slot.pacer
        assert pacer is not None
        if tokens is None:
            tokens = slot.resource.tokens_per_call or 0.0
        lease._tokens = tokens
        pacer.charge(now, tokens)
        if pacer.ready_at > now:
            self._emit(
                "resource.paced",
                slot.resource.id,
                until=pacer.ready_at,
                group=slot.resource.quota_group,
            )

    def dead_ends(self, selector: Selector = ANY) -> dict[str, str] | None:
        """Why no resource ``selector`` accepts can ever serve again (``id: "dead (...)"``,
        ``"revoked"``), when none can and there is one at least; else None."""
        return hopeless_reasons(self._slots, selector)

    def check_usable(self, selector: Selector = ANY) -> None:
        """Raise ``NoUsableResource`` when no resource ``selector`` accepts can serve again."""
        reasons = self.dead_ends(selector)
        if reasons is not None:
            listed = ", ".join(f"{rid} {why}" for rid, why in reasons.items())
            raise NoUsableResource(
                f"no usable resource in pool {self.name}: {listed}",
                pool=self.name,
                selector=None if selector is ANY else selector.describe(),
                reasons=reasons,
            )
