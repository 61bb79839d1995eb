"""Entry points: ``await attack(plan)`` inside a loop, ``run_attack(plan)`` from sync code."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pyattacker._gc import quiet_gc
from pyattacker.attack._engine import Engine, Progress
from pyattacker.attack._plan import AttackPlan
from pyattacker.attack._result import AttackResult
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.clock import Clock
from pyattacker.errors import ConfigError
from pyattacker.http import HttpClient, Limits
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
    on_progress: Callable[[Progress], None] | None = None,
    progress_every: float = 0.5,
    stop_on_signals: bool = False,
    limits: Limits | None = None,
) -> AttackResult:
    """Run ``plan`` on the running loop and return what it measured.

    Without a ``sender`` the requests go over HTTP through one :class:`HttpClient` (at most
    ``plan.connections`` connections per target, never retrying by itself). ``on_record``
    sees every finished request; ``on_progress`` a :class:`Progress` every
    ``progress_every`` seconds. With ``stop_on_signals``, SIGINT/SIGTERM stop the attack
    gracefully: the result then says ``stop_reason="interrupted"``.

    ``limits`` bound what the client reads and keeps of each response (default: heads up
    to 64 KiB, the first 4 KiB of each body kept, every byte counted); an LLM attack
    keeps at least 8 MiB of each whole answer, the most it parses.
    """
    client: HttpClient | None = None
    # Targets that share an origin (keys, paths on one host) share the client's pool for
    # that origin: size it for all of them, or a lease would wait again inside.
    per_origin = Counter(target.url.origin for target in plan.resolved_targets())
    if sender is None:
        client = HttpClient(
            timeouts=plan.timeouts,
            max_connections=plan.connections * max(per_origin.values()),
            clock=clock,
            limits=_limits_for(plan, limits),
        )
        sender = (
            _llm_sender(plan, client)
            if plan.llm
            else HttpSender(client, method=plan.method, body=plan.body)
        )
    engine = Engine(plan, sender, clock=clock, on_record=on_record)
    loop = asyncio.get_running_loop()
    # Before the engine's clock starts: connecting is then in no request's time. A stop
    # meanwhile (Ctrl-C) cancels it, and the run then ends at once with nothing sent.
    opening = (
        loop.create_task(_preconnect(plan, client, per_origin))
        if client is not None and plan.preconnect
        else None
    )

    stopped: list[str] = []

    def stop(reason: str) -> None:
        stopped.append(reason)
        engine.stop(reason)
        if opening is not None:
            opening.cancel()

    handled: list[signal.Signals] = []
    if stop_on_signals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stop, "interrupted")
                handled.append(signum)
    ticker = None
    try:
        if opening is not None:
            try:
                await opening
            except asyncio.CancelledError:
                if not stopped:  # cancelled from outside, not by stop()
                    raise
        if on_progress is not None:  # its elapsed time counts from the engine's start
            ticker = loop.create_task(_tick(engine, on_progress, progress_every))
        return await engine.run()
    finally:
        if opening is not None and not opening.done():
            opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await opening
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        for signum in handled:
            loop.remove_signal_handler(signum)
        if client is not None:
            await client.aclose()


async def _preconnect(
    plan: AttackPlan, client: HttpClient, per_origin: Counter[tuple[str, str, int]]
) -> None:
    """Open ``plan.preconnect`` connections per target (``per_origin`` counts the targets
    sharing each origin's pool: as many for each of them)."""
    urls = {target.url.origin: target.url for target in plan.resolved_targets()}
    await asyncio.gather(
        *(client.preconnect(urls[origin], plan.preconnect * n) for origin, n in per_origin.items())
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


async def _tick(engine: Engine, on_progress: Callable[[Progress], None], every: float) -> None:
    while True:
        await engine.clock.sleep(every)
        on_progress(engine.progress())


def run_attack(
    plan: AttackPlan,
    *,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    progress_every: float = 0.5,
    stop_on_signals: bool = True,
    limits: Limits | None = None,
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
