"""How one attempt reaches a target: the ``Sender`` seam, and its HTTP implementation.

The engine decides *when* and *where* (schedule, lease, retries); a sender only performs
one attempt and writes what happened into the :class:`~pyattacker.measure.Attempt`: the
``sent``/``first_byte``/``end`` timestamps, the status and the byte counts. It raises for
a failed attempt, a status of 400 or more included (as
:class:`~pyattacker.errors.HttpStatusError`) and a redirect (a 3xx with a ``Location``, as
:class:`~pyattacker.errors.RedirectError`), so that the engine classifies every failure
with the one classifier. It never retries.

:meth:`HttpSender.start` sends without a task or an ``await`` (the engine's direct path):
it fills in a :class:`DirectRequest`, which its connection tells how the exchange ended.

Tests and simulations swap in their own sender (one that sleeps on a virtual clock), which
is how the engine's timelines are pinned exactly without sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from mypy_extensions import mypyc_attr

from pyattacker.attack._plan import Target
from pyattacker.attack._redirects import Hop, redirect_error
from pyattacker.errors import HttpStatusError, RedirectError
from pyattacker.http import URL, HttpClient, Response, Timing
from pyattacker.measure import Attempt
from pyattacker.pool import Lease

__all__ = ["DirectRequest", "HttpSender", "OnEnd", "Sender", "copy_timing"]

# Told that a request sent directly ended (its ``error`` says how: None when ok, a
# CancelledError when it was abandoned).
OnEnd = Callable[["DirectRequest"], None]


class Sender(Protocol):
    async def send(self, target: Target, attempt: Attempt) -> None:
        """Perform ``attempt`` against ``target`` (its URL, with its headers); raise if it
        failed (status >= 400 too)."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by plain Python
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
            copy_timing(timing, attempt)
        attempt.status = response.status
        attempt.bytes_received = response.body_size
        if response.status >= 300:
            _raise_for(response)

    def start(self, target: Target, request: DirectRequest) -> Callable[[], None] | None:
        """Send ``request`` now, without a task, if an idle connection is at hand.

        ``request`` is told how it ended (its ``on_end`` is called), filled in as
        :meth:`send` fills an attempt, with ``error`` what ``send`` would have raised
        (``None`` if ok; a ``CancelledError`` once the returned function abandoned it). That
        may happen before ``start`` returns (a connection found closed on writing). Returns
        that abandoning function, or ``None``, having sent nothing: then use :meth:`send`.
        """
        request.bytes_sent = self._bytes_out
        timing = request.timing = Timing(0.0)
        url, headers = target.url, target.headers
        return self.client.start(self.method, url, request, headers, self.body, timing)


class DirectRequest:
    """A one-attempt request sent without a task (the engine's ``DirectDispatcher``), from
    its start to its count, in one object: what the dispatcher knows of it (its number
    ``request``, ``scheduled`` time, when it took its ``lease`` or unit, the target's
    ``resource`` id), what the sender fills in (``timing``, ``bytes_sent``, a request mix's
    ``name``) and how it ended (``status``, ``bytes_received``, ``error``).

    It is the connection's :class:`~pyattacker.http.Waiter`: it ends the moment the
    connection knows how the exchange went (what :meth:`HttpSender.send` does after its
    ``await``, inline) and tells ``on_end``. No :class:`Attempt` is built unless one is
    needed (:meth:`attempt`): a plain OK answer is counted from these fields.
    """

    __slots__ = (
        "_done", "_on_end", "abandon", "acquired", "bytes_received", "bytes_sent", "error",
        "lease", "name", "request", "resource", "scheduled", "status", "timing",
    )  # fmt: skip

    def __init__(
        self,
        request: int,
        scheduled: float,
        acquired: float,
        lease: Lease | None,
        resource: str,
        on_end: OnEnd,
    ) -> None:
        self.request, self.scheduled, self.acquired = request, scheduled, acquired
        self.lease, self.resource, self._on_end = lease, resource, on_end
        self.timing: Timing | None = None
        self.status: int | None = None
        self.bytes_sent = self.bytes_received = 0
        self.name: str | None = None
        self.error: BaseException | None = None
        self.abandon: Callable[[], None] | None = None
        self._done = False

    def attempt(self) -> Attempt:
        """Its record: the attempt :meth:`HttpSender.send` would have filled in."""
        attempt = Attempt(self.request, 1, self.scheduled, self.acquired)
        attempt.resource, attempt.status, attempt.name = self.resource, self.status, self.name
        attempt.bytes_sent, attempt.bytes_received = self.bytes_sent, self.bytes_received
        if self.timing is not None:
            copy_timing(self.timing, attempt)
        return attempt

    def done(self) -> bool:
        return self._done

    def set_result(self, result: Response, /) -> None:
        self.status = result.status
        self.bytes_received = result.body_size
        error: BaseException | None = None
        if result.status >= 300:
            try:
                _raise_for(result)
            except (HttpStatusError, RedirectError) as exc:
                error = exc
        self.end(error)

    def set_exception(self, exception: BaseException, /) -> None:
        self.end(exception)

    def cancel(self) -> bool:
        if self._done:
            return False
        self.end(asyncio.CancelledError())
        return True

    def end(self, error: BaseException | None) -> None:
        """It ended, with ``error`` (``None``: ok): say so to ``on_end``."""
        self._done, self.error = True, error
        try:
            self._on_end(self)
        except Exception as exc:  # a bug of the caller's: say so, not inside the parser
            asyncio.get_running_loop().call_exception_handler(
                {"message": "a direct request's on_end callback failed", "exception": exc}
            )


def _raise_for(response: Response) -> None:
    """Raise a status of 400 or more, or a redirect; any other 3xx is an answer."""
    if response.status < 400:
        redirect = redirect_error(response)
        if redirect is not None:
            raise redirect
        return
    response.raise_for_status()


def copy_timing(timing: Timing, attempt: Attempt) -> None:
    """What ``timing`` saw of one exchange, onto ``attempt``: every sender of the attack
    (a scenario's steps too) records an attempt's times, a new connection's included, so."""
    attempt.sent = timing.sent
    attempt.first_byte = timing.first_byte
    attempt.end = timing.end
    if timing.connect_start is not None:  # it opened a connection: how long that took
        attempt.connect, attempt.tls = timing.connect, timing.tls
