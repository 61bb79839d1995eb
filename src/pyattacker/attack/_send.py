"""How one attempt reaches a target: the ``Sender`` seam, and its HTTP implementation.

The engine decides *when* and *where* (schedule, lease, retries); a sender only performs
one attempt and writes what happened into the :class:`~pyattacker.measure.Attempt`: the
``sent``/``first_byte``/``end`` timestamps, the status and the byte counts. It raises for
a failed attempt, a status of 400 or more included (as
:class:`~pyattacker.errors.HttpStatusError`) and a redirect (a 3xx with a ``Location``, as
:class:`~pyattacker.errors.RedirectError`), so that the engine classifies every failure
with the one classifier. It never retries.

Tests and simulations swap in their own sender (one that sleeps on a virtual clock), which
is how the engine's timelines are pinned exactly without sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from pyattacker.attack._plan import Target
from pyattacker.attack._redirects import Hop, redirect_error
from pyattacker.errors import HttpStatusError, RedirectError
from pyattacker.http import URL, HttpClient, Response, Timing
from pyattacker.measure import Attempt

__all__ = ["HttpSender", "OnEnd", "Sender"]

# Told how a started attempt ended: with None (ok), its error, or a CancelledError when
# it was abandoned.
OnEnd = Callable[[Attempt, BaseException | None], None]


class Sender(Protocol):
    async def send(self, target: Target, attempt: Attempt) -> None:
        """Perform ``attempt`` against ``target`` (its URL, with its headers); raise if it
        failed (status >= 400 too)."""
        ...


class HttpSender:
    """One HTTP request per attempt through a shared :class:`HttpClient` (no retries).

    The headers are the target's (the plan's, with its key filled in)."""

    def __init__(
        self, client: HttpClient, *, method: str = "GET", body: bytes | None = None
    ) -> None:
        self.client = client
        self.method = method
        self.body = body
        self._bytes_out = len(body) if body else 0

    async def send(self, target: Target, attempt: Attempt, hop: Hop | None = None) -> None:
        """Send ``attempt`` to ``target``; a redirect's ``hop`` says where and what instead."""
        if hop is None:
            method, body = self.method, self.body
        else:
            target, method, body = hop.target, hop.method, hop.body
        attempt.bytes_sent = len(body) if body else 0
        await self._exchange(attempt, method, target.url, target.headers, body)

    async def _exchange(
        self,
        attempt: Attempt,
        method: str,
        url: URL,
        headers: tuple[tuple[str, str], ...],
        body: bytes | None,
    ) -> None:
        """One request and its answer, recorded on ``attempt``; raises a status of 400
        or more and a redirect, as :meth:`send` promises."""
        timing = Timing(0.0)  # ours, so a cancelled request still tells when it was sent
        try:
            response = await self.client.request(
                method, url, headers=headers, body=body, timing=timing
            )
        finally:
            _copy(timing, attempt)
        attempt.status = response.status
        attempt.bytes_received = response.body_size
        if response.status >= 300:
            _raise_for(response)

    def start(self, target: Target, attempt: Attempt, on_end: OnEnd) -> Callable[[], None] | None:
        """Send ``attempt`` now, without a task, if an idle connection is at hand.

        ``on_end(attempt, error)`` is called when it ends, with the attempt filled in as
        :meth:`send` fills it and ``error`` what ``send`` would have raised (``None`` if
        ok; a ``CancelledError`` once the returned function abandoned it). It may be called
        before ``start`` returns (a connection found closed on writing). Returns that
        abandoning function, or ``None``, having sent nothing: then use :meth:`send`.
        """
        attempt.bytes_sent = self._bytes_out
        timing = Timing(0.0)
        waiter = _Waiter(attempt, timing, on_end)
        return self.client.start(self.method, target.url, waiter, target.headers, self.body, timing)


class _Waiter:
    """Ends a started attempt the moment its connection knows how it went (see
    :class:`~pyattacker.http.Waiter`): what ``send`` does after its ``await``, inline."""

    __slots__ = ("_attempt", "_done", "_on_end", "_timing")

    def __init__(self, attempt: Attempt, timing: Timing, on_end: OnEnd) -> None:
        self._attempt, self._timing, self._on_end = attempt, timing, on_end
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: Response, /) -> None:
        attempt = self._attempt
        attempt.status = result.status
        attempt.bytes_received = result.body_size
        error: BaseException | None = None
        if result.status >= 300:
            try:
                _raise_for(result)
            except (HttpStatusError, RedirectError) as exc:
                error = exc
        self._end(error)

    def set_exception(self, exception: BaseException, /) -> None:
        self._end(exception)

    def cancel(self) -> bool:
        if self._done:
            return False
        self._end(asyncio.CancelledError())
        return True

    def _end(self, error: BaseException | None) -> None:
        self._done = True
        timing, attempt = self._timing, self._attempt
        attempt.sent, attempt.first_byte, attempt.end = timing.sent, timing.first_byte, timing.end
        try:
            self._on_end(self._attempt, error)
        except Exception as exc:  # a bug of the caller's: say so, not inside the parser
            asyncio.get_running_loop().call_exception_handler(
                {"message": "an attempt's on_end callback failed", "exception": exc}
            )


def _raise_for(response: Response) -> None:
    """Raise a status of 400 or more, or a redirect; any other 3xx is an answer."""
    if response.status < 400:
        redirect = redirect_error(response)
        if redirect is not None:
            raise redirect
        return
    response.raise_for_status()


def _copy(timing: Timing, attempt: Attempt) -> None:
    attempt.sent = timing.sent
    attempt.first_byte = timing.first_byte
    attempt.end = timing.end
    if timing.connect_start is not None:  # it opened a connection: how long that took
        attempt.connect, attempt.tls = timing.connect, timing.tls
