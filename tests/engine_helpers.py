"""Running an attack ``Engine`` on virtual time for the engine's tests (imported as
``engine_helpers``)."""

from __future__ import annotations

import asyncio

from pyattacker.attack import AttackPlan, AttackResult, Engine, Sender
from pyattacker.measure import RequestRecord
from pyattacker.testing import run_virtual


def attack(
    plan: AttackPlan, sender: Sender, stop_at: float | None = None
) -> tuple[AttackResult, list[RequestRecord]]:
    """Run ``plan`` through ``sender`` on a virtual loop from t=0 (stopped at ``stop_at``
    if given): the result and every record, by request number."""
    records: list[RequestRecord] = []

    async def main() -> AttackResult:
        engine = Engine(plan, sender, on_record=records.append)
        if stop_at is not None:
            asyncio.get_running_loop().call_later(stop_at, engine.stop, "test stop")
        return await engine.run()

    result = run_virtual(main(), start=0.0)
    records.sort(key=lambda r: r.request)
    return result, records
