"""Entry points: ``await attack(plan)`` inside a loop, ``run_attack(plan)`` from sync code."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import signal
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pyattacker import _plugins
from pyattacker._gc import quiet_gc
from pyattacker.attack._engine import Engine, Progress
from pyattacker.attack._mix_send import MixSender
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._result import AttackResult
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.clock import Clock
from pyattacker.errors import ConfigError
from pyattacker.http import HttpClient, Limits, connect_map
from pyattacker.http._limits import KEEP_BODY, MAX_LINE
from pyattacker.measure import RequestRecord

__all__ = ["attack", "run_attack"]

T = TypeVar("T")


async def attack(
    plan: AttackPlan,
    *,
    sender: Sender | None = None,
    clock: Clock | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_progress: Callable[[Progress], str | None] | None = None,
    progress_every: float = 0.5,
    stop_on_signals: bool = False,
    limits: Limits | None = None,
    on_start: Callable[[Callable[[], AttackResult]], None] | None = None,
) -> AttackResult:
    """Run ``plan`` on the running loop and return what it measured.

    Without a ``sender`` the requests go over HTTP through one :class:`HttpClient` (at most
    ``plan.connections`` connections per target, never retrying by itself). ``on_record``
    sees every finished request; ``on_progress`` a :class:`Progress` every
    ``progress_every`` seconds; if it returns a string, the attack stops gracefully with that
    string as its ``stop_reason`` (how ``--abort-on-fail`` ends an attack). With
    ``stop_on_signals``, SIGINT/SIGTERM stop the attack gracefully: the result then says
    ``stop_reason="interrupted"``.

    ``limits`` bound what the client reads and keeps of each response (default: heads up
    to 64 KiB, the first 4 KiB of each body kept, every byte counted); an LLM attack
    keeps at least 8 MiB of each whole answer, the most it parses.

    ``on_start`` is handed, as the engine starts (after the first connections), a function
    returning what has been measured so far as an :class:`AttackResult` (see
    :meth:`Engine.snapshot`, read at once): how ``attack --serve`` shows the whole report
    while it runs.
    It costs nothing unless called.
    """
    client: HttpClient | None = None
    if sender is None:
        client = _client_for(plan, clock, limits)
        sender = _llm_sender(plan, client) if plan.llm else _http_sender(plan, client)
    engine = Engine(plan, sender, clock=clock, on_record=on_record)
    session = _Session(plan, engine, client)
    if stop_on_signals:
        session.handle_signals()
    try:
        await session.opened()
        if on_progress is not None:  # its elapsed time counts from the engine's start
            session.tick(on_progress, progress_every)
        if on_start is not None:  # run() starts its clock before any other task can call it
            on_start(engine.snapshot)
        return await engine.run()
    finally:
        await session.close()


class _Session:
    """What :func:`attack` sets up around its engine, and takes down however it ends: the
    client's first connections, the signal handlers, the progress ticker."""

    def __init__(self, plan: AttackPlan, engine: Engine, client: HttpClient | None) -> None:
        self._engine, self._client = engine, client
        self._loop = asyncio.get_running_loop()
        # Before the engine's clock starts: connecting is then in no request's time. A
        # stop meanwhile (Ctrl-C) cancels it, and the run then ends at once with nothing sent.
        self._opening = (
            self._loop.create_task(_preconnect(plan, client))
            if client is not None and plan.preconnect
            else None
        )
        self._stopped = False
        self._signals: list[signal.Signals] = []
        self._ticker: asyncio.Task[None] | None = None

    def stop(self, reason: str) -> None:
        self._stopped = True
        self._engine.stop(reason)
        if self._opening is not None:
            self._opening.cancel()

    def handle_signals(self) -> None:
        """SIGINT and SIGTERM stop the attack (where the loop can handle signals)."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self._loop.add_signal_handler(signum, self.stop, "interrupted")
                self._signals.append(signum)

    async def opened(self) -> None:
        """Wait for the first connections; a stop's cancellation ends the wait, quietly."""
        if self._opening is None:
            return
        try:
            await self._opening
        except asyncio.CancelledError:
            if not self._stopped:  # cancelled from outside, not by stop()
                raise

    def tick(self, on_progress: Callable[[Progress], str | None], every: float) -> None:
        self._ticker = self._loop.create_task(_tick(self._engine, on_progress, every))

    async def close(self) -> None:
        """Cancel what still runs, remove the handlers, close the client. A ticker whose
        ``on_progress`` raised raises it here."""
        opening, ticker = self._opening, self._ticker
        if opening is not None and not opening.done():
            opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await opening
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        for signum in self._signals:
            self._loop.remove_signal_handler(signum)
        if self._client is not None:
            await self._client.aclose()


def _per_origin(plan: AttackPlan) -> Counter[tuple[str, str, int]]:
    """How many of the plan's targets share each origin (keys, paths on one host): they
    share the client's pool for it, so it is sized for all of them, or a lease would wait
    again inside."""
    return Counter(target.url.origin for target in plan.resolved_targets())


def _client_for(plan: AttackPlan, clock: Clock | None, limits: Limits | None) -> HttpClient:
    return HttpClient(
        timeouts=plan.timeouts,
        max_connections=plan.connections * max(_per_origin(plan).values()),
        clock=clock,
        limits=_limits_for(plan, limits),
        ssl=None if plan.tls is None else plan.tls.context,
        connect_to=connect_map(plan.resolve),
    )


def _http_sender(plan: AttackPlan, client: HttpClient) -> Sender:
    if plan.mix is not None:
        return MixSender(client, plan)
    if plan.sender is not None:
        return plugin_sender(plan.sender)(client, plan)
    return HttpSender(client, method=plan.method, body=plan.body)


def plugin_sender(name: str) -> Callable[[HttpClient, AttackPlan], Sender]:
    """The factory of the plugin sender ``name`` (entry point group ``pyattacker.senders``);
    a ``ConfigError`` naming ``--sender`` when none is installed or it fails to load."""
    factory = _plugins.load("pyattacker.senders", name, field="--sender")
    if factory is None:
        known = _plugins.names("pyattacker.senders")
        close = difflib.get_close_matches(name, known, n=1)
        raise ConfigError(
            f"no plugin sender named {name!r}"
            + (f" — did you mean {close[0]!r}?" if close else ""),
            field="--sender",
            hint="installed: " + (", ".join(known) or "none") + " (`pyattacker plugins`)",
        )
    if not callable(factory):
        raise ConfigError(
            f"the plugin sender {name!r} is a {type(factory).__name__}, not a factory",
            field="--sender",
            hint="its entry point must name a callable (client, plan) -> Sender",
        )
    return factory  # type: ignore[no-any-return]


async def _preconnect(plan: AttackPlan, client: HttpClient) -> None:
    """Open ``plan.preconnect`` connections per target (as many for each of the targets
    sharing an origin's pool)."""
    urls = {target.url.origin: target.url for target in plan.resolved_targets()}
    await asyncio.gather(
        *(
            client.preconnect(urls[origin], plan.preconnect * n)
            for origin, n in _per_origin(plan).items()
        )
    )


def _llm_sender(plan: AttackPlan, client: HttpClient) -> Sender:
    from pyattacker.llm import LlmClient, LlmSender  # only LLM attacks need it

    spec = plan.llm
    assert spec is not None
    return LlmSender(
        LlmClient(client),
        spec.prompts,
        model=spec.model,
        max_tokens=spec.max_tokens,
        api=spec.api,
        stream=spec.stream,
        extra=spec.extra,
    )


def _limits_for(plan: AttackPlan, limits: Limits | None) -> Limits:
    """The attack's client limits: keep a prefix of each body, unless told; an LLM attack
    keeps what its parser reads whole (a longer answer fails as ``ResponseTooLarge``)."""
    limits = limits if limits is not None else Limits(keep_body=KEEP_BODY)
    if plan.llm is None:
        return limits
    keep = MAX_LINE if limits.keep_body is None else max(limits.keep_body, MAX_LINE)
    return Limits(max_head=limits.max_head, keep_body=keep)


async def _tick(
    engine: Engine, on_progress: Callable[[Progress], str | None], every: float
) -> None:
    while True:
        await engine.clock.sleep(every)
        reason = on_progress(engine.progress())
        if reason is not None:
            engine.stop(reason)
            return


def run_attack(
    plan: AttackPlan,
    *,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_progress: Callable[[Progress], str | None] | None = None,
    progress_every: float = 0.5,
    stop_on_signals: bool = True,
    limits: Limits | None = None,
    on_start: Callable[[Callable[[], AttackResult]], None] | None = None,
) -> AttackResult:
    """Run ``plan`` on a fresh uvloop event loop (asyncio's where uvloop is missing).

    While it runs, the cyclic garbage collector is made quieter (see :func:`quiet_gc`),
    since every collection stops the loop that keeps the schedule. Raises
    :class:`ConfigError` when called inside a running loop (a notebook, say): ``await
    attack(plan)`` there instead.
    """
    with quiet_gc():
        return run_on_fast_loop(
            attack(
                plan,
                on_record=on_record,
                on_progress=on_progress,
                progress_every=progress_every,
                stop_on_signals=stop_on_signals,
                limits=limits,
                on_start=on_start,
            )
        )


def run_on_fast_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on uvloop when it is installed, else on asyncio's loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        main.close()
        raise ConfigError(
            "run_attack() cannot run inside a running event loop",
            field="loop",
            hint="use `await pyattacker.attack.attack(plan)` there",
        )
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        return asyncio.run(main)
    return uvloop.run(main)
