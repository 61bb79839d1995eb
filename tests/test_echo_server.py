"""The calibrated echo server's timing: delay specs and exact hold times.

Real I/O on loopback only (servers on 127.0.0.1, port 0, stopped by the test). No assertion
bounds how long anything took from above; hold times are checked against what must be
true on one machine's monotonic clock (a hold is at least its delay, a client's round trip
at least the server's hold).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo_helpers import (
    connect,
    exchange,
    on_asyncio,
    on_uvloop,
    read_reply,
    request,
    served,
    until_parsed,
)
from pyattacker.clock import LoopClock, PreciseTimer
from pyattacker.errors import ConfigError
from pyattacker.measure import exact_percentile
from pyattacker.servers import Delay, EchoServer

LOOPS = [pytest.param(on_asyncio, id="asyncio"), pytest.param(on_uvloop, id="uvloop")]
Runner = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]


# -- Delay ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "canonical", "median"),
    [
        ("0", "0", 0.0),
        ("none", "0", 0.0),
        ("fixed:0ms", "0", 0.0),
        ("fixed:20ms", "fixed:20ms", 0.02),
        ("20ms", "fixed:20ms", 0.02),
        ("uniform:min=10ms,max=30ms", "uniform:min=10ms,max=30ms", 0.02),
        ("lognormal:median=20ms,sigma=0.5", "lognormal:median=20ms,sigma=0.5", 0.02),
        (
            "bimodal:fast=5ms,slow=100ms,p_slow=0.1,sigma=0",
            "bimodal:fast=5ms,slow=100ms,p_slow=0.1,sigma=0.0",
            0.005,
        ),
        (
            " Bimodal: fast=5ms, slow=1.5s, p_slow=0.5 ",
            "bimodal:fast=5ms,slow=1.5s,p_slow=0.5,sigma=0.1",
            None,
        ),
    ],
)
def test_every_delay_form_parses_to_its_canonical_spec(
    spec: str, canonical: str, median: float | None
) -> None:
    delay = Delay.parse(spec)
    assert delay.describe() == canonical
    assert Delay.parse(canonical) == delay
    assert delay.is_zero == (canonical == "0")
    if median is not None:
        assert math.isclose(delay.quantile(0.5), median, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ("gaussian:mean=1ms", "--delay", "unknown delay kind 'gaussian'"),
        ("fixed:-1ms", "--delay", "must be a duration >= 0"),
        ("fixed:soon", "--delay", "must be a duration"),
        ("uniform:min=3ms", "--delay", "missing max"),
        ("uniform:min=3ms,max=1ms", "--delay.max", "below min"),
        ("uniform:min=1ms,max=2ms,mode=3", "--delay", "bad parameter 'mode=3'"),
        ("lognormal:median=0,sigma=1", "--delay.median", "must be a duration > 0"),
        ("lognormal:median=1ms,sigma=-1", "--delay.sigma", "from 0 to 5"),
        ("lognormal:median=1ms,sigma=1,median=2ms", "--delay", "bad parameter 'median=2ms'"),
        ("bimodal:fast=5ms,slow=1ms,p_slow=0.1", "--delay.slow", "below fast"),
        ("bimodal:fast=1ms,slow=5ms,p_slow=1.5", "--delay.p_slow", "from 0 to 1"),
        ("bimodal:fast=1ms,slow=5ms", "--delay", "missing p_slow"),
        ("fixed:1e300s", "--delay", "at most 3600 s"),
        ("2h", "--delay", "at most 3600 s"),
        ("uniform:min=1ms,max=2h", "--delay.max", "at most 3600 s"),
        ("lognormal:median=5h,sigma=0.5", "--delay.median", "at most 3600 s"),
        ("bimodal:fast=1ms,slow=1e9s,p_slow=0.1", "--delay.slow", "at most 3600 s"),
    ],
)
def test_a_bad_delay_spec_names_the_field_and_lists_the_forms(
    spec: str, field: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Delay.parse(spec, field="--delay")
    assert info.value.field == field
    assert "lognormal:median=20ms,sigma=0.5" in str(info.value.hint)


SPECS = st.one_of(
    st.floats(0, 10).map(lambda s: f"fixed:{s!r}s"),
    st.tuples(st.floats(0, 1), st.floats(0, 1)).map(
        lambda ab: f"uniform:min={min(ab)!r}s,max={max(ab)!r}s"
    ),
    st.tuples(st.floats(1e-6, 10), st.floats(0, 5)).map(
        lambda ms: f"lognormal:median={ms[0]!r}s,sigma={ms[1]!r}"
    ),
    st.tuples(st.floats(1e-6, 1), st.floats(1, 10), st.floats(0, 1), st.floats(0, 2)).map(
        lambda b: f"bimodal:fast={b[0]!r}s,slow={b[1]!r}s,p_slow={b[2]!r},sigma={b[3]!r}"
    ),
)


@given(SPECS, st.integers(0, 2**32))
def test_delay_samples_are_never_negative_and_a_seed_fixes_them(spec: str, seed: int) -> None:
    delay = Delay.parse(spec)

    def draws() -> list[float]:
        rng = random.Random(seed)
        return [delay.sample(rng) for _ in range(50)]

    first = draws()
    assert first == draws()
    assert all(x >= 0 for x in first)


@given(SPECS)
def test_describe_round_trips_every_delay(spec: str) -> None:
    delay = Delay.parse(spec)
    assert Delay.parse(delay.describe()) == delay


@given(
    st.floats(1e-4, 1),
    st.floats(1, 100),
    st.floats(0.01, 0.99),
    st.floats(0.01, 2),
    st.floats(0.001, 0.999),
)
def test_the_bimodal_quantile_inverts_its_cdf(
    fast: float, stretch: float, p_slow: float, sigma: float, q: float
) -> None:
    delay = Delay.parse(
        f"bimodal:fast={fast!r}s,slow={fast * stretch!r}s,p_slow={p_slow!r},sigma={sigma!r}"
    )
    assert math.isclose(delay.cdf(delay.quantile(q)), q, rel_tol=1e-6)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "spec",
    [
        "uniform:min=10ms,max=30ms",
        "lognormal:median=20ms,sigma=0.5",
        "bimodal:fast=5ms,slow=100ms,p_slow=0.1",
        "bimodal:fast=5ms,slow=100ms,p_slow=0.3,sigma=0.3",
    ],
)
def test_samples_follow_the_stated_distribution(spec: str) -> None:
    delay, rng = Delay.parse(spec), random.Random(42)
    values = [delay.sample(rng) for _ in range(40_000)]
    # The share of draws at or below the q-quantile is q, give or take sampling noise
    # (standard error <= 0.0025 for 40k draws; seeded, so the check is deterministic).
    for q in (0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99):
        x = delay.quantile(q)
        share = sum(v <= x for v in values) / len(values)
        assert abs(share - q) <= 0.01, (q, share)


# -- hold times over real loopback I/O -----------------------------------------------------


@pytest.mark.parametrize("run", LOOPS)
def test_every_hold_is_recorded_exactly_once_and_lasts_at_least_its_delay(run: Runner) -> None:
    delays_ms = [0, 1, 3, 0, 7, 2, 12, 0, 5, 1]

    async def check(server: EchoServer) -> None:
        reader, writer = await connect(server.url)
        clock, round_trips = LoopClock(), []
        for ms in delays_ms:
            sent = clock.now()
            writer.write(request(headers={"x-echo-delay": f"{ms}ms"}))
            reply = await read_reply(reader)
            round_trips.append(clock.now() - sent)
            assert (reply.status, reply.body) == (200, b"ok")
        writer.close()
        stats = server.stats(samples=True)
        assert stats["count"] == len(delays_ms)
        assert stats["statuses"] == {"200": len(delays_ms)}
        for hold, ms, trip in zip(stats["samples"], delays_ms, round_trips, strict=True):
            assert ms / 1000 <= hold <= trip  # the client's round trip encloses the hold

    run(lambda: served(EchoServer(), check))


def test_stats_are_the_exact_nearest_rank_percentiles_of_the_samples() -> None:
    async def check(server: EchoServer) -> None:
        await exchange(server.url, *[request(f"/item/{i}") for i in range(37)])
        stats = server.stats(samples=True)
        ordered = sorted(stats["samples"])
        assert stats["count"] == 37 == len(ordered)
        assert (stats["min"], stats["max"]) == (ordered[0], ordered[-1])
        assert stats["mean"] == math.fsum(ordered) / 37
        for key, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p99.9", 99.9)):
            assert stats[key] == exact_percentile(ordered, q)
        assert "samples" not in server.stats()

    on_asyncio(lambda: served(EchoServer(delay="uniform:min=0ms,max=2ms", seed=3), check))


def test_a_fixed_delay_holds_every_request_at_least_that_long_on_uvloop() -> None:
    # On Linux the hold ends on the kernel's timer, which never fires early (the loop's
    # timers do: the test below).
    async def check(server: EchoServer) -> None:
        await asyncio.gather(*(exchange(server.url, request(), request()) for _ in range(8)))
        stats = server.stats(samples=True)
        assert stats["count"] == 16
        assert min(stats["samples"]) >= 0.0034

    on_uvloop(lambda: served(EchoServer(delay="fixed:3.4ms"), check))


def test_without_a_kernel_timer_the_loops_early_timers_still_hold_at_least_the_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Elsewhere than Linux holds end on the loop's timers: uvloop rounds 3.4 ms to a 3 ms
    # timer on its truncated millisecond clock, and the server re-arms until it is over.
    monkeypatch.setattr(PreciseTimer, "open", staticmethod(lambda loop: None))

    async def check(server: EchoServer) -> None:
        assert server._core.timer.kernel is None
        await asyncio.gather(*(exchange(server.url, request(), request()) for _ in range(8)))
        stats = server.stats(samples=True)
        assert stats["count"] == 16
        assert min(stats["samples"]) >= 0.0034

    on_uvloop(lambda: served(EchoServer(delay="fixed:3.4ms"), check))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")
def test_on_linux_a_hold_ends_on_the_kernels_timer_which_stop_closes() -> None:
    async def main() -> None:
        server = EchoServer(delay="fixed:200ms")
        await server.start()
        timer = server._core.timer.kernel
        assert isinstance(timer, PreciseTimer)
        fd = timer._fd
        reader, writer = await connect(server.url)
        writer.write(request())
        await until_parsed(server.url, 1)
        assert len(timer._heap) == 1  # the held request, waiting on the kernel's timer
        reply = await read_reply(reader)
        assert reply.status == 200
        assert server.stats()["min"] >= 0.2
        writer.close()
        await server.stop()
        assert server._timer is None
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)  # closed: a server started and stopped many times leaks nothing

    on_uvloop(main)


def test_reset_forgets_every_hold_time() -> None:
    async def check(server: EchoServer) -> None:
        await exchange(server.url, request(), request())
        assert server.reset() == 2
        assert server.stats(samples=True) | {"delay": None} == {
            "count": 0,
            **dict.fromkeys(("min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max")),
            "statuses": {},
            "dropped": 0,
            "in_flight": 0,
            "delay": None,
            "seed": 0,
            "samples": [],
        }
        await exchange(server.url, request())
        assert server.stats()["count"] == 1

    on_asyncio(lambda: served(EchoServer(), check))


def test_a_stall_holds_every_response_until_it_ends_while_controls_still_answer() -> None:
    async def check(server: EchoServer) -> None:
        clock = LoopClock()
        stalled_at = clock.now()
        server.stall(0.3)
        pending = asyncio.create_task(exchange(server.url, request(), request("/b")))
        during = await until_parsed(server.url, 2)  # /stats answers during the stall
        assert (during["count"], during["in_flight"]) == (0, 2)
        replies = await pending
        assert clock.now() - stalled_at >= 0.3
        assert [r.status for r in replies] == [200, 200]
        assert server.stats()["count"] == 2

    on_asyncio(lambda: served(EchoServer(), check))


def test_a_stall_lengthens_the_hold_time_of_a_request_it_catches() -> None:
    async def check(server: EchoServer) -> None:
        reader, writer = await connect(server.url)
        writer.write(request(headers={"x-echo-delay": "200ms"}))
        await until_parsed(server.url, 1)
        server.stall(0.5)
        # Parsed before the stall and not answered yet (unless this machine froze for
        # 200 ms just now), so it is answered after the stall: its hold spans the stall.
        assert (server.stats()["in_flight"], server.stats()["count"]) == (1, 0)
        await read_reply(reader)
        writer.close()
        (hold,) = server.stats(samples=True)["samples"]
        assert hold >= 0.5

    on_uvloop(lambda: served(EchoServer(), check))


def test_pipelined_requests_are_answered_in_order_even_when_later_ones_are_due_first() -> None:
    async def check(server: EchoServer) -> None:
        replies = await exchange(
            server.url,
            request("/a", method="POST", body=b"first", headers={"x-echo-delay": "40ms"}),
            request("/b", method="POST", body=b"second", headers={"x-echo-delay": "0"}),
            request("/stats"),
            request("/c", method="POST", body=b"third", headers={"x-echo-delay": "5ms"}),
        )
        assert [r.body for r in replies[:2]] + [replies[3].body] == [b"first", b"second", b"third"]
        # Written after the two before it, but computed when it was parsed: both held.
        assert (replies[2].json()["count"], replies[2].json()["in_flight"]) == (0, 2)
        holds = server.stats(samples=True)["samples"]
        assert len(holds) == 3
        assert holds[0] >= 0.04
        assert holds[2] >= 0.005

    on_uvloop(lambda: served(EchoServer(), check))


def test_the_write_is_part_of_the_hold_until_the_client_drains_it() -> None:
    # An 8 MB reply cannot fit in the socket buffers (the client's receive buffer is 64 KB,
    # loopback's send buffer at most 4 MB here), so the server's write buffer drains only as
    # the client reads. The client reads one byte (the hold has begun), waits, then reads
    # the rest: the hold must include the wait.
    async def check(server: EchoServer) -> None:
        reader, writer = await connect(server.url, receive_buffer=64 * 1024)
        writer.write(request())
        await reader.readexactly(1)  # the reply is being written, so the hold has begun
        await asyncio.sleep(0.2)
        rest = await read_reply_after_first_byte(reader)
        writer.close()
        assert len(rest) == 8 * 2**20
        (hold,) = server.stats(samples=True)["samples"]
        assert hold > 0.2

    on_asyncio(lambda: served(EchoServer(body_size=8 * 2**20), check))


async def read_reply_after_first_byte(reader: asyncio.StreamReader) -> bytes:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    length = next(
        int(line.split(":")[1]) for line in head.split("\r\n") if line.startswith("Content-Length")
    )
    return await reader.readexactly(length)
