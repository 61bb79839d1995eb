"""The mock LLM server's ground truth over real HTTP: token times, /stats, /reset, capacity,
limits, failures.

No assertion bounds a duration from above: timing is checked against what must hold on one
machine's monotonic clock (a TTFT at least the pinned one, a client receiving a token no
earlier than the server wrote it, the truth's own arithmetic), and everything else against
counts the server must get exactly right.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import sys
import time
from itertools import pairwise
from typing import Any

import pytest

from llm_server_helpers import (
    CHAT,
    LOOPS,
    chat,
    connect,
    exchange,
    pinned,
    post,
    read_reply_body,
    request,
    serve,
    slow_reader,
    small_send_buffer,
    until,
)
from pyattacker.clock import PreciseTimer
from pyattacker.measure import exact_percentile
from pyattacker.servers import Delay, LlmServer

# -- the truth ----------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_each_token_is_recorded_when_written_and_no_gap_is_shorter_thanpinned(loop: str) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_tokens="4", **pinned("20ms", "5ms")
        )
        assert reply.complete
        (sample,) = server.stats(samples=True)["samples"]
        assert sample["id"] == reply.headers["x-request-id"]
        assert (sample["status"], sample["outcome"], sample["stream"]) == (200, "ok", True)
        times = sample["token_times"]
        assert len(times) == sample["completion_tokens"] == 4
        assert sample["received"] <= sample["started"]
        assert times[0] - sample["started"] >= 0.020
        assert all(b - a >= 0.005 for a, b in pairwise(times))
        assert sample["end"] == times[-1]
        assert sample["ttft"] == times[0] - sample["received"]
        assert sample["e2e"] == sample["end"] - sample["received"]

    serve(main, loop=loop)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")
def test_on_linux_tokens_are_due_on_the_kernels_timer_which_stop_closes() -> None:
    closed: list[int] = []

    async def main(server: LlmServer) -> None:
        assert server._timer is not None
        timer = server._timer.kernel
        assert isinstance(timer, PreciseTimer)
        # the ticker arms the server's timer, not uvloop's millisecond timers
        assert server._core.ticker._call_at == server._timer.call_at
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_tokens="3", **pinned("20ms", "5ms")
        )
        assert reply.complete
        closed.append(timer._fd)

    serve(main, loop="uvloop")
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(closed[0])  # stopped: a server started and stopped many times leaks nothing


def test_the_client_never_receives_a_token_before_the_server_recorded_writing_it() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(
            server.url, CHAT, chat("hi", stream=True), x_mock_tokens="5", **pinned("2ms", "2ms")
        )
        (sample,) = server.stats(samples=True)["samples"]
        content = [t for t, data in reply.chunks if b'"content":" ' in data]
        assert len(content) == 5
        # Both sides read time.monotonic(): one machine, one clock.
        assert all(
            arrived >= written
            for arrived, written in zip(content, sample["token_times"], strict=True)
        )

    serve(main)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_token_the_client_is_not_reading_is_written_when_the_buffer_drains(loop: str) -> None:
    # 4,000 events (about 900 KB) cannot fit in the socket buffers (the server's send
    # buffer and the client's receive buffer are held at 32 KB, which the kernel doubles,
    # whatever the machine's defaults): the server's writes wait in its transport's buffer
    # until the client reads. The client reads the head, pauses, then reads the rest: the
    # later tokens were written (flushed) only after the pause ended.
    async def main(server: LlmServer) -> None:
        small_send_buffer(server)
        reader, writer = await slow_reader(server.url)
        writer.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-tokens": "4000"}))
        await reader.readuntil(b"\r\n\r\n")
        await until(lambda: server.stats()["pending"] == 1)  # ended, not yet flushed
        resumed = time.monotonic()
        reply = await read_reply_body(reader)
        writer.close()
        assert reply.count(b'"content":" ') == 4000
        await until(lambda: server.stats()["requests"] == 1)
        (sample,) = server.stats(samples=True)["samples"]
        assert sample["outcome"] == "ok"
        times = sample["token_times"]
        assert times == sorted(times)
        assert times[-1] >= resumed
        # Tokens buffered together were flushed together: they share the drain's time.
        assert len(set(times)) < len(times) / 2
        assert sample["end"] == times[-1]

    serve(main, loop=loop, ttft="0", itl="0")


def test_stats_are_the_exact_nearest_rank_distributions_of_the_records() -> None:
    async def main(server: LlmServer) -> None:
        for tokens in (1, 3, 6):
            body = chat("hi", stream=True)
            await post(server.url, CHAT, body, x_mock_tokens=str(tokens), **pinned("1ms", "1ms"))
        await post(server.url, CHAT, chat("hi"), x_mock_tokens="2", **pinned())
        stats = server.stats(samples=True)
        samples = stats["samples"]
        streams = [s for s in samples if s["stream"]]
        ttft = sorted(s["ttft"] for s in streams)
        assert stats["ttft"]["count"] == 3
        assert stats["ttft"]["p50"] == exact_percentile(ttft, 50)
        assert stats["ttft"]["max"] == ttft[-1]
        assert stats["e2e"]["count"] == 4
        gaps = sorted(b - a for s in streams for a, b in pairwise(s["token_times"]))
        assert stats["itl"]["count"] == len(gaps) == 0 + 2 + 5
        assert stats["itl"]["p99"] == exact_percentile(gaps, 99)
        assert stats["tpot"]["count"] == 2  # streams of one token have no TPOT
        assert stats["completion_tokens"] == 1 + 3 + 6 + 2
        assert stats["prompt_tokens"] == 4
        assert (stats["in_flight"], stats["queued"]) == (0, 0)

    serve(main)


def test_control_paths_answer_json_are_never_recorded_and_reset_forgets() -> None:
    async def main(server: LlmServer) -> None:
        await post(server.url, CHAT, chat("hi"), **pinned())
        stats, samples, reset, after = await exchange(
            server.url,
            request("/stats", method="GET"),
            request("/stats?samples=1", method="GET"),
            request("/reset", b""),
            request("/stats", method="GET"),
        )
        assert stats.json()["requests"] == 1
        assert "samples" not in stats.json()
        assert len(samples.json()["samples"]) == 1
        assert reset.json() == {"cleared": 1}
        assert after.json()["requests"] == 0
        assert after.json()["ttft"] == {
            "count": 0,
            **dict.fromkeys(("min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max")),
        }

    serve(main, output_tokens=1)


# -- capacity, limits, failures --------------------------------------------------------------


def test_requests_beyond_capacity_wait_for_a_slot_and_their_ttft_includes_the_wait() -> None:
    async def main(server: LlmServer) -> None:
        body = chat("hi", stream=True)
        raw = request(CHAT, body, headers={"x-mock-tokens": "3", "x-mock-ttft": "10ms"})
        await asyncio.gather(exchange(server.url, raw), exchange(server.url, raw))
        first, second = sorted(server.stats(samples=True)["samples"], key=lambda s: s["started"])
        assert second["started"] >= first["token_times"][-1]
        assert second["ttft"] >= second["started"] - second["received"] + 0.010

    serve(main, capacity=1, itl="1ms")


def test_overflow_refuse_answers_429_at_capacity() -> None:
    async def main(server: LlmServer) -> None:
        slow = request(CHAT, chat("hi"), headers={"x-mock-tokens": "1", "x-mock-ttft": "200ms"})
        quick = request(CHAT, chat("hi"), headers={"x-mock-tokens": "1"})
        first = asyncio.create_task(exchange(server.url, slow))
        await until(lambda: server.stats()["in_flight"] > 0)
        (refused,) = await exchange(server.url, quick)
        assert refused.status == 429
        assert refused.headers["retry-after"] == "1"
        assert (await first)[0].status == 200
        assert server.stats()["throttled"] == 1

    serve(main, capacity=1, overflow="refuse", ttft="0", itl="0")


def test_the_utilization_header_is_in_flight_over_capacity() -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi"), **pinned())
        assert reply.headers["azure-openai-deployment-utilization"] == "25.0%"

    serve(main, capacity=4, utilization_header=True, output_tokens=1)


def test_rpm_refuses_with_retry_after_and_every_response_carries_rate_limit_headers() -> None:
    async def main(server: LlmServer) -> None:
        replies = [await post(server.url, CHAT, chat("hi"), **pinned()) for _ in range(3)]
        assert [r.status for r in replies] == [200, 200, 429]
        assert [r.headers["x-ratelimit-limit-requests"] for r in replies] == ["2"] * 3
        assert [r.headers["x-ratelimit-remaining-requests"] for r in replies] == ["1", "0", "0"]
        refused = replies[2]
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
        wait_ms = int(refused.headers["retry-after-ms"])
        assert 0 < wait_ms <= 30_000  # one request of 2/min refills in 30 s
        assert int(refused.headers["retry-after"]) == math.ceil(wait_ms / 1000)
        assert refused.headers["x-ratelimit-reset-requests"].endswith("s")
        assert "x-ratelimit-limit-tokens" not in refused.headers
        stats = server.stats()
        assert (stats["statuses"], stats["throttled"]) == ({"200": 2, "429": 1}, 1)
        server.reset()  # refills the bucket
        assert (await post(server.url, CHAT, chat("hi"), **pinned())).status == 200

    serve(main, rpm=2, output_tokens=1)


def test_tpm_charges_prompt_plus_max_tokens_or_the_generated_length() -> None:
    async def main(server: LlmServer) -> None:
        ten_words = "w " * 10
        capped = await post(server.url, CHAT, chat(ten_words, max_tokens=50), **pinned())
        assert capped.headers["x-ratelimit-remaining-tokens"] == str(100 - 60)
        free = await post(server.url, CHAT, chat(ten_words), **pinned())  # generates 5
        assert free.headers["x-ratelimit-remaining-tokens"] == str(40 - 15)
        refused = await post(server.url, CHAT, chat(ten_words, max_tokens=50), **pinned())
        assert refused.status == 429
        assert refused.json()["error"]["type"] == "tokens"
        huge = await post(server.url, CHAT, chat(ten_words, max_tokens=500), **pinned())
        assert huge.status == 429
        assert "Request too large" in huge.json()["error"]["message"]
        # It can never be admitted: nothing invites the client to wait and try again.
        assert "retry-after" not in huge.headers
        assert "retry-after-ms" not in huge.headers

    serve(main, tpm=100, output_tokens=5)


def test_failures_follow_the_seeded_dice_and_are_shaped_like_openai_errors() -> None:
    def statuses(seed: int) -> list[int]:
        async def main(server: LlmServer) -> list[int]:
            raw = [request(CHAT, chat("hi"), headers={"x-mock-ttft": "0"}) for _ in range(40)]
            return [r.status for r in await exchange(server.url, *raw)]

        return serve(main, seed=seed, fail={503: 0.3, 500: 0.2}, output_tokens=1, itl="0")

    first = statuses(11)
    assert first == statuses(11)
    assert set(first) == {200, 500, 503}

    async def shape(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi"))
        assert reply.status == 503
        assert reply.json()["error"]["type"] == "server_error"
        assert server.stats(samples=True)["samples"][0]["outcome"] == "error"

    serve(shape, fail={503: 1.0})


def test_in_a_storm_requests_fail_at_the_storm_rate_by_their_seeded_dice() -> None:
    # Every window is stormy (rate=1) and a request in a storm fails with probability 0.3:
    # out of 200 requests some fail and some do not, the same ones for the same seed.
    async def main(server: LlmServer) -> list[int]:
        replies = await exchange(server.url, *[request(CHAT, chat("hi")) for _ in range(200)])
        failed = [r for r in replies if r.status != 200]
        assert {r.status for r in failed} == {503}
        assert all("(storm)" in r.json()["error"]["message"] for r in failed)
        return [r.status for r in replies]

    options = {"storms": "rate=1,duration=1h,error_rate=0.3", "output_tokens": 1}
    statuses = serve(main, seed=5, ttft="0", itl="0", **options)
    assert statuses == serve(main, seed=5, ttft="0", itl="0", **options)
    assert 0.2 < statuses.count(503) / len(statuses) < 0.4


def test_a_capacity_refusal_spends_no_rate_limit() -> None:
    async def main(server: LlmServer) -> None:
        _, holder = await connect(server.url)
        holder.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-fault": "hang"}))
        await until(lambda: server.stats()["in_flight"] == 1)  # it paid one request of three
        refused = [await post(server.url, CHAT, chat("hi")) for _ in range(3)]
        assert [r.status for r in refused] == [429] * 3
        assert all("capacity" in r.json()["error"]["message"] for r in refused)
        assert [r.headers["x-ratelimit-remaining-requests"] for r in refused] == ["2"] * 3
        holder.close()

    serve(main, capacity=1, overflow="refuse", rpm=3, ttft="0", itl="0", output_tokens=1)


def test_a_failure_by_the_dice_has_paid_its_rate_limits() -> None:
    async def main(server: LlmServer) -> None:
        replies = [await post(server.url, CHAT, chat("hi")) for _ in range(3)]
        assert [r.status for r in replies] == [500, 500, 429]
        assert [r.headers["x-ratelimit-remaining-requests"] for r in replies] == ["1", "0", "0"]

    serve(main, fail={500: 1.0}, rpm=2, ttft="0", itl="0", output_tokens=1)


# -- /stats: every request counted, pages, steps -------------------------------------------------


def test_every_request_received_is_recorded_in_flight_queued_or_pending() -> None:
    async def main(server: LlmServer) -> None:
        small_send_buffer(server)
        hang = request(CHAT, chat("hi", stream=True), headers={"x-mock-fault": "hang"})
        behind = request(CHAT, chat("hi"))
        _, first = await connect(server.url)  # a hang holds slot 1; two wait behind it
        first.write(hang + behind + behind)
        _, unread = await slow_reader(server.url)  # ends, but cannot be flushed
        unread.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-tokens": "4000"}))
        await until(lambda: server.stats()["pending"] == 3)
        _, second = await connect(server.url)  # another hang takes slot 2
        second.write(hang)
        await until(lambda: server.stats()["in_flight"] == 2)
        _, third = await connect(server.url)  # no slot left: queued
        third.write(behind)
        await until(lambda: server.stats()["queued"] == 1)
        await post(server.url, CHAT, {**chat("hi"), "model": "nope"})  # answered 404
        stats = server.stats()
        counts = [stats[key] for key in ("requests", "in_flight", "queued", "pending")]
        assert counts == [1, 2, 1, 3]
        assert stats["received"] == sum(counts) == 7
        for writer in (first, unread, second, third):
            writer.close()
        await until(lambda: server.stats()["requests"] == 7)
        stats = server.stats()
        assert [stats[key] for key in ("in_flight", "queued", "pending")] == [0, 0, 0]
        assert stats["outcomes"] == {"dropped": 6, "error": 1}

    serve(main, capacity=2, ttft="0", itl="0", output_tokens=1)


def test_clients_that_leave_while_queued_leave_nothing_in_the_queue() -> None:
    async def main(server: LlmServer) -> None:
        _, holder = await connect(server.url)
        holder.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-fault": "hang"}))
        await until(lambda: server.stats()["in_flight"] == 1)
        for _ in range(2000):
            _, writer = await connect(server.url)
            writer.write(request(CHAT, chat("hi", stream=True)))
            writer.close()
            await writer.wait_closed()
        await until(lambda: server.stats()["requests"] == 2000)
        assert server.stats()["outcomes"] == {"dropped": 2000}
        queue = server._core.statistics()
        assert (queue["queue_entries"], queue["queue_departed"]) == (0, 0)
        holder.close()

    serve(main, capacity=1, ttft="0", itl="0", output_tokens=1)


def test_stats_samples_come_in_pages_and_the_http_reply_is_the_methods_dict() -> None:
    async def main(server: LlmServer) -> None:
        for tokens in range(1, 6):
            body = chat("hi", stream=True)
            await post(server.url, CHAT, body, x_mock_tokens=str(tokens), **pinned())
        every = server.stats(samples=True)
        whole, page, tail, bad = await exchange(
            server.url,
            request("/stats?samples=1", method="GET"),
            request("/stats?samples=1&offset=1&limit=2", method="GET"),
            request("/stats?samples=1&offset=4", method="GET"),
            request("/stats?samples=1&offset=-1", method="GET"),
        )
        assert whole.json() == every
        assert page.json()["samples"] == every["samples"][1:3]
        assert tail.json()["samples"] == every["samples"][4:]
        assert server.stats(samples=True, offset=1, limit=2)["samples"] == every["samples"][1:3]
        assert bad.status == 400
        assert bad.json()["error"]["param"] == "offset"

    serve(main)


def test_a_stats_reply_over_many_values_is_the_exact_truth() -> None:
    # 70,000 gaps: several slices to sort and runs to merge before the summary.
    async def main(server: LlmServer) -> None:
        body = chat("hi", stream=True)
        await post(server.url, CHAT, body, x_mock_tokens="70001", **pinned())
        (reply,) = await exchange(server.url, request("/stats?samples=1", method="GET"))
        stats = reply.json()
        times = stats["samples"][0]["token_times"]
        gaps = sorted(b - a for a, b in pairwise(times))
        assert stats["itl"]["count"] == len(gaps) == 70_000
        for key, q in (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)):
            assert stats["itl"][key] == exact_percentile(gaps, q)
        assert (stats["itl"]["min"], stats["itl"]["max"]) == (gaps[0], gaps[-1])
        assert stats["itl"]["mean"] == pytest.approx(math.fsum(gaps) / len(gaps), rel=1e-12)

    serve(main)


def test_stats_and_reset_need_a_key_when_keys_are_configured() -> None:
    async def main(server: LlmServer) -> None:
        await post(server.url, CHAT, chat("hi"), api_key="k", **pinned())
        key = {"api-key": "k"}
        no_stats, no_reset, stats, reset = await exchange(
            server.url,
            request("/stats", method="GET"),
            request("/reset", b""),
            request("/stats", method="GET", headers=key),
            request("/reset", b"", headers={"Authorization": "Bearer k"}),
        )
        assert (no_stats.status, no_reset.status) == (401, 401)
        assert no_stats.json()["error"]["code"] == "invalid_api_key"
        assert stats.json()["requests"] == 1  # the refused reset cleared nothing
        assert reset.json() == {"cleared": 1}

    serve(main, api_keys="k", output_tokens=1)


def test_reset_is_post_only_and_get_is_told_so() -> None:
    async def main(server: LlmServer) -> None:
        await post(server.url, CHAT, chat("hi"), **pinned())
        get_reset, post_stats = await exchange(
            server.url, request("/reset", method="GET"), request("/stats", b"")
        )
        assert (get_reset.status, get_reset.headers["allow"]) == (405, "POST")
        assert "use POST /reset" in get_reset.json()["error"]["message"]
        assert (post_stats.status, post_stats.headers["allow"]) == (405, "GET")
        assert server.stats()["requests"] == 1

    serve(main, output_tokens=1)


# -- /reset: one experiment from the next --------------------------------------------------------


def test_a_request_received_before_a_reset_is_answered_after_it_but_never_recorded() -> None:
    async def main(server: LlmServer) -> None:
        _, holder = await connect(server.url)  # holds the only slot
        holder.write(request(CHAT, chat("hi", stream=True), headers={"x-mock-fault": "hang"}))
        await until(lambda: server.stats()["in_flight"] == 1)
        waiting = asyncio.create_task(post(server.url, CHAT, chat("hi")))
        await until(lambda: server.stats()["queued"] == 1)
        assert server.reset() == 0
        stats = server.stats()
        assert [stats[key] for key in ("received", "in_flight", "queued", "pending")] == [0] * 4
        assert stats["before_reset"] == 2
        holder.close()  # the slot frees: the waiting request is answered...
        assert (await waiting).status == 200
        await until(lambda: server.stats()["before_reset"] == 0)
        stats = server.stats()  # ... and neither it nor the hang is recorded
        assert (stats["requests"], stats["discarded_after_reset"]) == (0, 2)
        await post(server.url, CHAT, chat("hi"))
        stats = server.stats()
        assert (stats["received"], stats["requests"], stats["statuses"]) == (1, 1, {"200": 1})

    serve(main, capacity=1, ttft="0", itl="0", output_tokens=1)


def test_a_reset_server_replays_the_dice_of_a_fresh_one() -> None:
    async def dice(server: LlmServer) -> list[tuple[int, int]]:
        replies = await exchange(server.url, *[request(CHAT, chat("hi")) for _ in range(12)])
        return [
            (r.status, r.json()["usage"]["completion_tokens"] if r.status == 200 else 0)
            for r in replies
        ]

    async def twice(server: LlmServer) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        first = await dice(server)
        server.reset()
        return first, await dice(server)

    options: dict[str, Any] = {
        "seed": 7,
        "output_tokens": "uniform:min=1,max=50",
        "fail": {503: 0.3},
        "ttft": "0",
        "itl": "0",
    }
    first, after_reset = serve(twice, **options)
    assert first == after_reset == serve(dice, **options)
    assert {status for status, _ in first} == {200, 503}
    assert len({tokens for _, tokens in first}) > 3


def test_a_reset_moves_the_origin_of_the_storm_windows_to_now() -> None:
    async def main(server: LlmServer) -> None:
        started = server._core.epoch.origin
        before = time.monotonic()
        server.reset()
        assert server._core.epoch.origin >= before > started

    serve(main, storms="rate=0.5,duration=1h,error_rate=1")


# -- bugs of ours --------------------------------------------------------------------------------


class Exploding(Delay):
    """A delay whose draws raise after ``after`` good ones: a bug in the server's dice."""

    def __init__(self, after: int = 0) -> None:
        self.left = after

    def sample(self, rng: random.Random) -> float:
        if self.left == 0:
            raise RuntimeError("a bug in a draw")
        self.left -= 1
        return 0.0

    def describe(self) -> str:
        return "exploding"


def test_a_bug_while_deciding_a_request_is_a_recorded_500_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi"))
        assert reply.status == 500
        assert reply.json()["error"]["type"] == "server_error"
        (sample,) = server.stats(samples=True)["samples"]
        assert (sample["status"], sample["outcome"]) == (500, "error")
        assert "a bug in a draw" in sample["error"]

    with caplog.at_level(logging.ERROR, logger="pyattacker.servers.llm"):
        serve(main, ttft=Exploding(), output_tokens=1)
    assert "internal error" in caplog.text
    assert "a bug in a draw" in caplog.text


def test_a_bug_mid_stream_is_a_recorded_500_and_the_stream_is_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main(server: LlmServer) -> None:
        reply = await post(server.url, CHAT, chat("hi", stream=True))
        assert (reply.status, reply.complete) == (200, False)
        assert len(reply.chunks_of_events()) == 1 + 3  # the role, three tokens
        await until(lambda: server.stats()["requests"] == 1)
        (sample,) = server.stats(samples=True)["samples"]
        assert (sample["status"], sample["outcome"]) == (500, "error")
        assert (server.stats()["in_flight"], server._core.in_flight) == (0, 0)

    with caplog.at_level(logging.ERROR, logger="pyattacker.servers.llm"):
        serve(main, ttft="0", itl=Exploding(after=2), output_tokens=10)
    assert "a bug in a draw" in caplog.text
