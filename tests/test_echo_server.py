"""The calibrated echo server: delays, exact hold times, controls, the process and the CLI.

Real I/O on loopback only (servers on 127.0.0.1, port 0, stopped by the test). No assertion
bounds how long anything took from above; hold times are checked against what must be
true on one machine's monotonic clock (a hold is at least its delay, a client's round trip
at least the server's hold).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
import uvloop
from hypothesis import given
from hypothesis import strategies as st

import pyattacker.servers
from pyattacker.cli import run_cli
from pyattacker.clock import LoopClock
from pyattacker.errors import ConfigError
from pyattacker.measure import exact_percentile
from pyattacker.servers import Delay, EchoServer, EchoServerProcess
from pyattacker.testing import run_virtual

T = TypeVar("T")

# -- a tiny raw HTTP/1.1 client: exact bytes on the wire, pipelining, half-read responses ----


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    path: str = "/",
    *,
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    version: str = "1.1",
) -> bytes:
    lines = [f"{method} {path} HTTP/{version}", "Host: test"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status_line, *header_lines = head.strip().split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    headers = {name.lower(): value for name, value in headers.items()}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Reply(int(status_line.split()[1]), headers, body)


async def connect(
    url: str, *, receive_buffer: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1"
    if receive_buffer is None:
        return await asyncio.open_connection(parts.hostname, parts.port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Set before connecting, so the kernel neither scales the window nor autotunes it.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    return await asyncio.open_connection(sock=sock)


async def exchange(url: str, *raw: bytes) -> list[Reply]:
    """Send every request in one write (pipelined) and read one reply per request."""
    reader, writer = await connect(url)
    try:
        writer.write(b"".join(raw))
        return [await read_reply(reader) for _ in raw]
    finally:
        writer.close()
        await writer.wait_closed()


def on_asyncio(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(main())


def on_uvloop(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())


LOOPS = [pytest.param(on_asyncio, id="asyncio"), pytest.param(on_uvloop, id="uvloop")]
Runner = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]


async def served(server: EchoServer, body: Callable[[EchoServer], Awaitable[None]]) -> None:
    async with server:
        await body(server)


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
    # uvloop rounds 3.4 ms to a 3 ms timer on its truncated millisecond clock, so timers
    # fire early: the server re-arms until the delay is really over.
    async def check(server: EchoServer) -> None:
        await asyncio.gather(*(exchange(server.url, request(), request()) for _ in range(8)))
        stats = server.stats(samples=True)
        assert stats["count"] == 16
        assert min(stats["samples"]) >= 0.0034

    on_uvloop(lambda: served(EchoServer(delay="fixed:3.4ms"), check))


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


async def until_parsed(url: str, count: int) -> dict[str, Any]:
    """Poll ``GET /stats`` until ``count`` echo requests were parsed (held or answered)."""
    while True:
        (reply,) = await exchange(url, request("/stats"))
        stats: dict[str, Any] = reply.json()
        if stats["in_flight"] + stats["count"] >= count:
            return stats
        await asyncio.sleep(0.005)


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


# -- bodies, statuses, overrides, protocol edges ---------------------------------------------


def test_a_request_body_is_echoed_and_an_empty_one_gets_the_payload() -> None:
    async def check(server: EchoServer) -> None:
        echoed, payload = await exchange(
            server.url, request("/x", method="PUT", body=b"hello"), request("/y")
        )
        assert (echoed.status, echoed.body) == (200, b"hello")
        assert echoed.headers["content-type"] == "application/octet-stream"
        assert payload.body == b"okoko"

    on_asyncio(lambda: served(EchoServer(body_size=5), check))


def test_failures_follow_the_seeded_dice_and_429_carries_retry_after() -> None:
    async def check(server: EchoServer) -> None:
        replies = await exchange(server.url, *[request() for _ in range(40)])
        dice = random.Random(11)
        expected = [429 if dice.random() < 0.5 else 200 for _ in range(40)]
        assert [r.status for r in replies] == expected
        assert all(r.headers["retry-after"] == "1" for r in replies if r.status == 429)
        assert server.stats()["statuses"] == {
            "200": expected.count(200),
            "429": expected.count(429),
        }

    on_asyncio(lambda: served(EchoServer(seed=11, fail={429: 0.5}), check))


def test_headers_override_status_and_retry_after_for_one_request() -> None:
    async def check(server: EchoServer) -> None:
        limited, broken, plain = await exchange(
            server.url,
            request(headers={"X-Echo-Status": "429", "x-echo-retry-after": "2"}),
            request(headers={"x-echo-status": "503"}),
            request(),
        )
        assert (limited.status, limited.headers["retry-after"]) == (429, "2")
        assert (broken.status, "retry-after" in broken.headers) == (503, False)
        assert plain.status == 200
        assert server.stats()["statuses"] == {"200": 1, "429": 1, "503": 1}

    on_asyncio(lambda: served(EchoServer(), check))


@pytest.mark.parametrize(
    ("header", "value"),
    [("x-echo-delay", "soon"), ("x-echo-status", "42"), ("x-echo-retry-after", "tomorrow")],
)
def test_a_bad_override_is_a_400_that_is_not_counted(header: str, value: str) -> None:
    async def check(server: EchoServer) -> None:
        (reply,) = await exchange(server.url, request(headers={header: value}))
        assert reply.status == 400
        assert header in reply.body.decode()
        assert server.stats()["count"] == 0

    on_asyncio(lambda: served(EchoServer(), check))


def test_connection_close_and_http_1_0_close_after_the_reply() -> None:
    async def check(server: EchoServer) -> None:
        for raw in (request(headers={"Connection": "close"}), request(version="1.0")):
            reader, writer = await connect(server.url)
            writer.write(raw)
            reply = await read_reply(reader)
            assert (reply.status, reply.headers["connection"]) == (200, "close")
            assert await reader.read() == b""  # the server closed
            writer.close()
        assert server.stats()["count"] == 2

    on_asyncio(lambda: served(EchoServer(), check))


def test_head_gets_the_headers_of_get_without_the_body() -> None:
    async def check(server: EchoServer) -> None:
        reader, writer = await connect(server.url)
        writer.write(
            request(method="HEAD") + request(method="HEAD", headers={"x-echo-status": "500"})
        )
        writer.write(request())
        for status in (200, 500):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 %d " % status)
        assert (await read_reply(reader)).body == b"okok"  # nothing was left in between
        writer.close()
        assert server.stats()["count"] == 3

    on_asyncio(lambda: served(EchoServer(body_size=4), check))


def test_garbage_gets_a_400_and_the_connection_closes() -> None:
    async def check(server: EchoServer) -> None:
        reader, writer = await connect(server.url)
        writer.write(b"HELLO THERE\r\n\r\n")
        reply = await read_reply(reader)
        assert reply.status == 400
        assert await reader.read() == b""
        writer.close()
        assert server.stats()["count"] == 0

    on_asyncio(lambda: served(EchoServer(), check))


def test_a_request_whose_client_leaves_is_dropped_not_recorded() -> None:
    async def check(server: EchoServer) -> None:
        _, writer = await connect(server.url)
        writer.write(request(headers={"x-echo-delay": "5s"}))
        await until_parsed(server.url, 1)
        writer.close()
        await writer.wait_closed()
        for _ in range(100):  # until the server has seen the close
            if server.stats()["dropped"]:
                break
            await asyncio.sleep(0.01)
        assert (server.stats()["count"], server.stats()["dropped"]) == (0, 1)

    on_asyncio(lambda: served(EchoServer(), check))


# -- the HTTP control surface ----------------------------------------------------------------


def test_the_control_paths_answer_json_and_are_never_counted() -> None:
    async def check(server: EchoServer) -> None:
        await exchange(server.url, request(), request())
        stats, with_samples, reset, after, stall, bad, missing = await exchange(
            server.url,
            request("/stats"),
            request("/stats?samples=1"),
            request("/reset", method="POST"),
            request("/reset"),
            request("/stall?seconds=1ms", method="POST"),
            request("/stall?seconds=-1", method="POST"),
            request("/stall", method="POST"),
        )
        assert stats.json()["count"] == 2
        assert "samples" not in stats.json()
        assert len(with_samples.json()["samples"]) == 2
        assert (reset.json(), after.json()) == ({"cleared": 2}, {"cleared": 0})
        assert stall.json() == {"stall_s": 0.001}
        assert (bad.status, bad.json()["error"][:8]) == (400, "seconds:")
        assert missing.status == 400
        assert server.stats()["count"] == 0

    on_asyncio(lambda: served(EchoServer(), check))


def test_other_methods_on_control_paths_are_echo_requests() -> None:
    async def check(server: EchoServer) -> None:
        (reply,) = await exchange(server.url, request("/stats", method="POST", body=b"x"))
        assert reply.body == b"x"
        assert server.stats()["count"] == 1

    on_asyncio(lambda: served(EchoServer(), check))


def test_stopping_the_server_drops_what_it_still_holds() -> None:
    async def main() -> None:
        server = EchoServer(delay="fixed:10s")
        await server.start()
        reader, writer = await connect(server.url)
        writer.write(request())
        await until_parsed(server.url, 1)
        await server.stop()
        assert await reader.read() == b""
        writer.close()
        assert (server.stats()["count"], server.stats()["dropped"]) == (0, 1)
        await server.stop()  # idempotent

    on_asyncio(main)


def test_arguments_are_checked_when_the_server_is_built() -> None:
    with pytest.raises(ConfigError, match="delay"):
        EchoServer(delay="sometimes")
    with pytest.raises(ConfigError) as info:
        EchoServer(fail={429: 0.7, 500: 0.5})
    assert info.value.field == "fail"
    with pytest.raises(ConfigError):
        EchoServer(fail={200: 0.1})
    with pytest.raises(ConfigError):
        EchoServer(port=70000)
    with pytest.raises(RuntimeError, match="not been started"):
        _ = EchoServer().url


def test_a_port_in_use_is_a_config_error_naming_the_port() -> None:
    async def main() -> None:
        async with EchoServer() as first:
            taken = urlsplit(first.url).port
            assert taken is not None
            with pytest.raises(ConfigError, match="cannot listen") as info:
                await EchoServer(port=taken).start()
            assert info.value.field == "port"

    on_asyncio(main)


def test_the_hot_path_clock_is_the_loop_clock_on_simulated_and_real_loops() -> None:
    async def simulated() -> tuple[float, float]:
        await asyncio.sleep(12.5)
        return LoopClock().reader()(), LoopClock().now()

    assert run_virtual(simulated()) == (12.5, 12.5)
    assert LoopClock().reader() is time.monotonic


def test_the_servers_package_exports_its_names_in_sorted_order() -> None:
    names = list(pyattacker.servers.__all__)
    assert names == sorted(names)
    assert all(hasattr(pyattacker.servers, name) for name in names)


# -- the process and the CLI -----------------------------------------------------------------


def test_the_process_prints_its_url_first_and_exits_0_on_sigterm() -> None:
    server = EchoServerProcess(delay="fixed:1ms", seed=5, fail="429:0.25")
    with server:
        assert urlsplit(server.url).hostname == "127.0.0.1"
        replies = on_asyncio(lambda: exchange(server.url, *[request() for _ in range(5)]))
        assert {r.status for r in replies} <= {200, 429}
        stats = server.stats(samples=True)
        assert stats["count"] == 5
        assert min(stats["samples"]) >= 0.001
        assert (stats["delay"], stats["seed"]) == ("fixed:1ms", 5)
        server.stall(0.001)
        server.reset()
        assert server.stats()["count"] == 0
    assert server.returncode == 0
    assert "delay fixed:1ms" in server.stderr()
    server.stop()  # idempotent


def test_the_command_exits_0_on_sigint_too() -> None:
    command = [sys.executable, "-m", "pyattacker", "echo-server", "--delay", "fixed:5ms"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        assert child.stdout is not None
        assert child.stdout.readline().startswith(b"http://127.0.0.1:")
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert child.returncode == 0
    assert b"delay fixed:5ms (p50 5.00ms, p99 5.00ms)" in err


def test_a_bad_delay_makes_the_process_exit_2_naming_the_field() -> None:
    server = EchoServerProcess(delay="lognormal:median=20ms")
    with pytest.raises(ConfigError, match="--delay: missing sigma"):
        server.start()
    assert server.returncode == 2


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--delay", "bogus:1"], "--delay"),
        (["--fail", "429"], "--fail"),
        (["--fail", "200:0.1"], "--fail"),
        (["--fail", "429:0.8,500:0.8"], "--fail"),
        (["--port", "99999"], "--port"),
        (["--body-size", "-1"], "--body-size"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    args: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["echo-server", *args]) == 2
    assert f"error: {field}" in capsys.readouterr().err


def test_the_help_shows_the_delay_forms_the_endpoints_and_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["echo-server", "--help"]) == 0
    out = capsys.readouterr().out
    for text in ("lognormal:median=20ms,sigma=0.5", "/stats", "/stall", "Examples", "--fail"):
        assert text in out


def test_an_address_that_is_not_this_machines_names_the_host_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["echo-server", "--host", "256.0.0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --host: cannot listen on 256.0.0.1"), err
    assert "Traceback" not in err
