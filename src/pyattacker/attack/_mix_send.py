"""``MixSender``: an :class:`HttpSender` whose every request is its arrival's line of a mix.

Per request it costs a draw (an index into a block of seeded draws) and a dict lookup for
the line prepared for the target the pool picked; a templated line also builds its URL,
headers and body from the request's row. Everything else (the URL of each line on each
target, merged headers, names) is built once, when the sender is made. It sends directly
from the scheduler's callback, as the plain sender does (``Mode.direct``).
"""

from __future__ import annotations

from collections.abc import Callable

from pyattacker.attack._mix import Prepared, prepare
from pyattacker.attack._plan import AttackPlan, Target
from pyattacker.attack._redirects import Hop
from pyattacker.attack._send import DirectRequest, HttpSender
from pyattacker.http import URL, HttpClient, Timing
from pyattacker.measure import Attempt

__all__ = ["MixSender"]

Request = tuple[str, URL, tuple[tuple[str, str], ...], bytes | None]


class MixSender(HttpSender):
    """Sends request ``n`` as line ``draw(n)`` of ``plan.mix`` (which must be set)."""

    def __init__(self, client: HttpClient, plan: AttackPlan) -> None:
        super().__init__(client, method=plan.method, body=plan.body)
        mix = plan.mix
        assert mix is not None
        self._draw = mix.draws(plan.seed)
        self._row = None if mix.data is None else mix.data.row
        templates = mix.data is not None
        self._prepared: dict[str, tuple[Prepared, ...]] = {
            target.id: tuple(prepare(plan, target, line, templates=templates) for line in mix.lines)
            for target in plan.resolved_targets()
        }

    def _request(self, target: Target, attempt: Attempt | DirectRequest) -> Request:
        """Request ``attempt.request``'s line on ``target``; names the attempt and counts
        its bytes."""
        n = attempt.request
        line = self._prepared[target.id][self._draw(n)]
        attempt.name = line.name
        if line.templated and self._row is not None:
            row = self._row(n)
            assert row is not None
            url, headers, body = line.fill(row)
        else:
            url, headers, body = line.url, line.headers, line.body
        attempt.bytes_sent = len(body) if body else 0
        return line.method, url, headers, body

    async def send(self, target: Target, attempt: Attempt, hop: Hop | None = None) -> None:
        """Send ``attempt`` as its line; a redirect's ``hop`` says where and what instead
        (the attempt keeps its line's name)."""
        if hop is not None:
            attempt.name = self._prepared[target.id][self._draw(attempt.request)].name
            await super().send(target, attempt, hop)
            return
        await self._exchange(attempt, *self._request(target, attempt))

    def start(self, target: Target, request: DirectRequest) -> Callable[[], None] | None:
        method, url, headers, body = self._request(target, request)
        timing = request.timing = Timing(0.0)
        return self.client.start(method, url, request, headers, body, timing)
