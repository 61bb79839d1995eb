"""What a scenario's flow holds: :class:`FlowClient`, and how one step goes over HTTP.

Each call (``await client.get("/login", name="login")``) is one *step*: one request of the
attack, named, measured on both clocks and counted as it ends, whatever the flow does next.
A failed step raises :class:`StepFailed` from the call; left uncaught it ends the flow,
which is then counted as failed at that step. What fails: a transport error or timeout, or
a status the call did not accept: by default any status >= 400; ``expect=`` names the
statuses that count as success instead (``expect=404``, ``expect=range(200, 500)``).

When a step is *scheduled* (the start of its scheduled clock): the flow's first step at
its arrival (the open model's schedule, as a plain request); a step after
``await client.sleep(s)`` when that pause was due to end; any other step when the flow's
code asked for it. So a late start, a slow think-time wake-up or the wait for a connection
all show as dispatch delay, never hidden; the flow's own code between steps is its own
time, as a user's is.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urljoin

from pyattacker.attack._plan import Target
from pyattacker.attack._redirects import Hop, redirect_error
from pyattacker.attack._send import copy_timing
from pyattacker.errors import HttpStatusError, PyAttackerError, RedirectError
from pyattacker.http import URL, HttpClient, Response, Timing
from pyattacker.measure import Attempt

__all__ = ["FlowClient", "HttpSteps", "Step", "StepFailed", "StepSender", "hop_of", "step_to"]

_MOST_URLS = 4096


class StepFailed(PyAttackerError):
    """A step of a flow failed: ``step`` names it; ``status`` is the answer's status (None
    when there was no answer); ``response`` is the answer when there was one; the error
    that failed it is ``__cause__``. Uncaught, it ends the flow (counted as failed at
    ``step``); caught, the flow goes on (the step is counted as failed either way)."""

    def __init__(self, step: str, error: BaseException, response: Response | None) -> None:
        super().__init__(f"step {step!r} failed: {type(error).__name__}: {error}")
        self.step = step
        self.response = response
        self.status = None if response is None else response.status


@dataclass(frozen=True, slots=True)
class Step:
    """One request a flow asked for: ``path`` (relative to the target's URL), what it
    sends, its ``name`` in reports, and the statuses it accepts (``None``: below 400)."""

    method: str
    path: str
    name: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    expect: frozenset[int] | None = None

    def accepts(self, status: int) -> bool:
        return status < 400 if self.expect is None else status in self.expect


@runtime_checkable
class StepSender(Protocol):
    async def send_step(self, target: Target, step: Step, attempt: Attempt) -> Response:
        """Perform ``step`` against ``target`` as ``attempt`` (its ``sent``, ``end``,
        status and byte counts filled in) and return the answer, whatever its status; raise
        for a transport failure. Never retries."""
        ...


class HttpSteps:
    """Steps over HTTP through the attack's client (its connections, timeouts, limits)."""

    def __init__(self, client: HttpClient) -> None:
        self.client = client
        # Resolved URLs by (target URL, path): a flow's paths repeat, mostly. Bounded, as
        # paths may hold ids (/users/17): past the bound, the rest resolve each time.
        self._urls: dict[tuple[URL, str], URL] = {}

    async def send_step(self, target: Target, step: Step, attempt: Attempt) -> Response:
        key = (target.url, step.path)
        url = self._urls.get(key)
        if url is None:
            url = resolve(target.url, step.path)
            if len(self._urls) < _MOST_URLS:
                self._urls[key] = url
        attempt.bytes_sent = len(step.body) if step.body else 0
        timing = Timing(0.0)  # ours: a cancelled step still tells when it was sent
        try:
            response = await self.client.request(
                step.method, url, headers=target.headers + step.headers, body=step.body,
                timing=timing,
            )  # fmt: skip
        finally:  # as the plain path records it: a new connection's connect and TLS too
            copy_timing(timing, attempt)
        attempt.status = response.status
        attempt.bytes_received = response.body_size
        return response


def resolve(base: URL, path: str) -> URL:
    """``path`` against the target ``base``: ``/x`` replaces its path, ``x`` is relative
    to it (as a browser resolves a link); a full URL is refused (a flow talks to the
    attack's targets, whose connections and keys it uses: :meth:`FlowClient.request`
    refuses one before it is counted)."""
    if path.startswith("/"):
        return base.join(path)
    joined = urljoin("http://h" + base.target, path)
    return base.join(joined[len("http://h") :])


StepRunner = Callable[["FlowClient", Step], Awaitable[Response]]


class FlowClient:
    """What a flow's function is given: a client for the attack's targets.

    ``await client.get(path, name=...)`` (also ``post``, ``put``, ``patch``, ``delete``,
    ``head``, or ``request(method, ...)``) sends one step and returns its
    :class:`~pyattacker.http.Response` (``status``, ``headers``, ``body``, ``text()``,
    ``json()``; the body is kept up to ``--keep-body`` bytes). ``headers`` are sent with
    every later step of this flow (set a session token there). ``row`` is this flow's
    row of data (``None`` without rows); ``flow`` its number (0, 1, ...).
    """

    __slots__ = ("_due", "_now", "_run", "_wait_until", "cancelled", "flow", "headers", "row")

    def __init__(
        self,
        run: StepRunner,
        time: tuple[Callable[[], float], Callable[[float], Awaitable[None]]],
        flow: int,
        scheduled: float,
        row: Mapping[str, Any] | None,
    ) -> None:
        self._run = run
        self._now, self._wait_until = time
        self.flow, self.row = flow, row
        self._due: float | None = scheduled
        self.headers: dict[str, str] = {}
        self.cancelled = False  # a step was cut off by the attack's end or a stop

    def scheduled(self) -> float:
        """When the step asked for now is scheduled (see the module docstring): taken once."""
        due, self._due = self._due, None
        return self._now() if due is None else due

    async def sleep(self, seconds: float) -> None:
        """Think time: pause ``seconds``; the next step is scheduled when the pause was due
        to end (a late wake-up is then that step's dispatch delay, not hidden)."""
        due = self._now() + max(0.0, seconds)
        await self._wait_until(due)
        self._due = due

    async def request(
        self,
        method: str,
        path: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes | str | None = None,
        json: Any = None,
        expect: int | Collection[int] | None = None,
    ) -> Response:
        """Send one step; raises :class:`StepFailed` if it failed (see the module
        docstring); ``ValueError`` before anything is sent or counted for a call that
        cannot be made (a full URL: a flow talks to the attack's targets; both ``body``
        and ``json``). ``name`` defaults to ``"METHOD path"`` (without the query)."""
        if "://" in path.split("?", 1)[0]:
            raise ValueError(f"a step takes a path on the attack's target, not a URL: {path!r}")
        all_headers = {**self.headers, **(headers or {})}
        if json is not None:
            if body is not None:
                raise ValueError("give body or json, not both")
            body = jsonlib.dumps(json).encode()
            all_headers.setdefault("content-type", "application/json")
        step = Step(
            method.upper(),
            path,
            name if name is not None else f"{method.upper()} {path.split('?', 1)[0]}",
            tuple(all_headers.items()),
            body.encode() if isinstance(body, str) else body,
            _statuses(expect),
        )
        return await self._run(self, step)

    async def get(self, path: str, **options: Any) -> Response:
        return await self.request("GET", path, **options)

    async def post(self, path: str, **options: Any) -> Response:
        return await self.request("POST", path, **options)

    async def put(self, path: str, **options: Any) -> Response:
        return await self.request("PUT", path, **options)

    async def patch(self, path: str, **options: Any) -> Response:
        return await self.request("PATCH", path, **options)

    async def delete(self, path: str, **options: Any) -> Response:
        return await self.request("DELETE", path, **options)

    async def head(self, path: str, **options: Any) -> Response:
        return await self.request("HEAD", path, **options)

    def __repr__(self) -> str:
        return f"FlowClient(flow={self.flow}, row={self.row!r})"


def _statuses(expect: int | Collection[int] | None) -> frozenset[int] | None:
    if expect is None:
        return None
    return frozenset((expect,) if isinstance(expect, int) else expect)


def status_error(
    step: Step, response: Response, *, follow: bool = False
) -> HttpStatusError | RedirectError | None:
    """Why ``response`` ends ``step`` other than OK, or None.

    A redirect (a 3xx with a ``Location``) is a :class:`RedirectError`, as on the plain
    path: to be followed when ``follow`` (the plan's ``follow_redirects`` has hops left),
    else the step's answer, failed as ``redirect`` unless ``expect=`` names its status
    (then the flow asked for the redirect itself). Any other status fails when the step
    does not accept it."""
    redirect = redirect_error(response) if 300 <= response.status < 400 else None
    if redirect is not None and (follow or response.status not in (step.expect or ())):
        return redirect
    if step.accepts(response.status):
        return None
    if step.expect is None:  # as the plain path says it: one kind of message for both
        try:
            response.raise_for_status()
        except HttpStatusError as exc:
            return exc
    status = f"HTTP {response.status} {response.reason}".rstrip()
    return HttpStatusError(
        f"{status}, expected {sorted(step.expect or ())}",
        status=response.status,
        headers=response.headers,
        retry_after=response.retry_after,
        url=response.url,
    )


def hop_of(target: Target, step: Step) -> Hop:
    """What ``step`` sent to ``target``, as the hop a redirect of it starts from (its URL,
    its headers with the flow's, its method and body)."""
    url = resolve(target.url, step.path)
    return Hop(Target(target.id, url, target.headers + step.headers), step.method, step.body)


def step_to(hop: Hop, step: Step) -> Step:
    """``step`` as the redirect's ``hop`` sends it: the hop's method, body and URL (its
    headers are the hop target's, which already hold the flow's), the step's name and
    accepted statuses."""
    return Step(hop.method, hop.target.url.target, step.name, (), hop.body, step.expect)
