"""Pacing a key to its rpm/tpm/rpd: the pure buckets, header reading, and the pool on
virtual time (a paced-out resource is unusable until its instant, and waiters wake then)."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import now, res, run
from pyattacker.errors import ConfigError
from pyattacker.pool import Pool, PoolEvent, Resource
from pyattacker.pool._pacing import (
    Limits,
    Pacer,
    decide,
    parse_duration,
    rate_limit_headers,
    rest_for,
    tokens_of,
)

# -- the pure decider ---------------------------------------------------------------------


def test_the_decider_says_lease_now_or_not_before_an_instant() -> None:
    assert decide(-math.inf, 0.0) is None
    assert decide(5.0, 5.0) is None
    assert decide(5.0, 4.5) == 5.0


def test_a_120_rpm_bucket_spaces_leases_half_a_second_apart() -> None:
    pacer = Pacer(Limits(rpm=120))
    granted = []
    t = 0.0
    for _ in range(5):
        t = max(t, pacer.ready_at)
        assert pacer.decide(t) is None
        pacer.charge(t, 0.0)
        granted.append(t)
    assert granted == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert pacer.decide(2.2) == 2.5


def test_a_burst_lets_that_many_go_back_to_back_after_a_quiet_spell() -> None:
    pacer = Pacer(Limits(rpm=60, burst=3))
    for _ in range(3):
        assert pacer.decide(10.0) is None
        pacer.charge(10.0, 0.0)
    assert pacer.decide(10.0) == 11.0


def grants(limits: Limits, arrivals: list[float]) -> list[float]:
    """Each arrival takes the first instant the pacer allows, in order of arrival."""
    pacer = Pacer(limits)
    granted = []
    for t in sorted(arrivals):
        at = max(t, pacer.ready_at, granted[-1] if granted else t)
        pacer.charge(at, 0.0)
        granted.append(at)
    return granted


@given(
    rpm=st.integers(1, 600),
    burst=st.integers(1, 5),
    arrivals=st.lists(st.floats(0, 300, allow_nan=False), min_size=1, max_size=80),
    window=st.floats(0.0, 120.0, allow_nan=False),
)
def test_no_window_ever_holds_more_leases_than_the_limit_plus_the_burst(
    rpm: int, burst: int, arrivals: list[float], window: float
) -> None:
    granted = grants(Limits(rpm=rpm, burst=burst), arrivals)
    interval = 60.0 / rpm
    for i, start in enumerate(granted):
        inside = sum(1 for t in granted[i:] if t <= start + window)
        assert inside <= burst + window / interval + 1e-9
    # and a minute never holds more than rpm + burst
    for i, start in enumerate(granted):
        assert sum(1 for t in granted[i:] if t < start + 60.0) <= rpm + burst


def test_the_tokens_a_call_reports_replace_its_estimate() -> None:
    pacer = Pacer(Limits(tpm=6000))  # 100 tokens a second
    pacer.charge(0.0, 500.0)
    assert pacer.decide(0.0) == 5.0
    pacer.correct(0.0, 1000.0 - 500.0)  # it spent 1000
    assert pacer.decide(0.0) == 10.0
    pacer.correct(0.0, -900.0)  # a refund: it spent 100 after all
    assert pacer.decide(0.0) == 1.0
    assert pacer.tokens_charged == 100.0


def test_a_day_cap_is_a_rolling_day() -> None:
    pacer = Pacer(Limits(rpd=2))
    pacer.charge(0.0, 0.0)
    pacer.charge(10.0, 0.0)
    assert pacer.decide(10.0) == 86_400.0
    pacer.charge(86_400.0, 0.0)
    assert pacer.decide(86_400.0) == 86_410.0


def test_a_server_saying_none_remain_rests_the_key_until_its_reset() -> None:
    pacer = Pacer(Limits(rpm=600))
    pacer.charge(0.0, 0.0)
    pacer.observe(0.0, {"remaining_requests": 0.0, "reset_requests": 6.0})
    assert pacer.decide(0.1) == 6.0


@pytest.mark.parametrize(
    ("seen", "rest"),
    [
        ({"remaining_requests": 0.0, "reset_requests": 6.0}, 6.0),  # no limit: the whole reset
        ({"limit_requests": 60.0, "remaining_requests": 0.0, "reset_requests": 60.0}, 1.0),
        ({"limit_requests": 60.0, "remaining_requests": 0.5, "reset_requests": 59.5}, 0.5),
        ({"remaining_requests": 1.0, "reset_requests": 6.0}, None),  # one may still go
        ({"remaining_requests": 0.0}, None),  # no reset: nothing to rest for
    ],
)
def test_a_server_with_none_left_rests_the_key_until_one_is_back(
    seen: dict[str, float], rest: float | None
) -> None:
    assert rest_for(seen, "requests", 1.0) == rest


def test_a_token_budget_below_the_next_call_rests_until_the_call_fits() -> None:
    pacer = Pacer(Limits(tpm=60_000, tokens_per_call=1000))
    seen = {"limit_tokens": 60_000.0, "remaining_tokens": 400.0, "reset_tokens": 59.6}
    pacer.observe(0.0, seen)
    assert pacer.decide(0.0) == pytest.approx(0.6)  # 600 more tokens, at 1000 a second


def test_a_server_counting_fewer_remaining_than_the_bucket_is_believed() -> None:
    pacer = Pacer(Limits(rpm=60, burst=10))  # ten could go now by our count
    pacer.observe(0.0, {"remaining_requests": 2.0, "reset_requests": 30.0})
    times = []
    for _ in range(3):
        t = max(0.0, pacer.ready_at)
        pacer.charge(t, 0.0)
        times.append(t)
    assert times == [0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0.5", 0.5),
        ("7", 7.0),
        ("", None),
        ("soon", None),
        ("-1s", None),
        ("5x", None),
        ("nan", None),
    ],
)
def test_reset_durations_read_like_openai_and_azure_write_them(
    text: str, seconds: float | None
) -> None:
    assert parse_duration(text) == (None if seconds is None else pytest.approx(seconds))


def test_rate_limit_headers_are_read_from_a_mapping_or_pairs_in_any_case() -> None:
    headers = {
        "X-RateLimit-Remaining-Requests": "3",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-tokens": "149000",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-used-requests": "57",  # not one of OpenAI's: left out
        "content-type": "application/json",
    }
    expected = {
        "limit_requests": 60.0,
        "remaining_requests": 3.0,
        "reset_requests": 1.0,
        "remaining_tokens": 149000.0,
        "reset_tokens": 360.0,
    }
    assert rate_limit_headers(headers) == expected
    assert rate_limit_headers(list(headers.items())) == expected
    assert rate_limit_headers({"x-ratelimit-remaining-requests": "many"}) == {}
    assert rate_limit_headers(None) == {}


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        ({"total_tokens": 30, "prompt_tokens": 10}, 30.0),
        ({"prompt_tokens": 10, "completion_tokens": 5}, 15.0),
        ({"input_tokens": 7, "output_tokens": 3}, 10.0),
        ({"completion_tokens": 4}, 4.0),  # as the results export reads it
        ({"tokens": 100}, 100.0),
        ({"calls": 1}, None),
        ({"total_tokens": True}, None),
        (None, None),
    ],
)
def test_the_tokens_of_a_usage_use_the_names_providers_give(
    usage: dict[str, float] | None, tokens: float | None
) -> None:
    assert tokens_of(usage) == tokens


@pytest.mark.parametrize(
    ("field", "value"),
    [("rpm", 0), ("tpm", -5), ("rpd", 1.5), ("burst", 0), ("tokens_per_call", -1)],
)
def test_a_limit_out_of_range_is_a_config_error_naming_it(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        Resource.create("llm", id="key-1", **{field: value})
    assert caught.value.field == f"resources.key-1.{field}"


def test_members_of_one_quota_group_declaring_different_limits_are_refused() -> None:
    with pytest.raises(ConfigError, match="quota group 'org-1'"):
        Pool("p", [res("a", rpm=60, quota_group="org-1"), res("b", rpm=120, quota_group="org-1")])


# -- the pool, on virtual time ------------------------------------------------------------


def lease_times(pool: Pool, n: int, hold_s: float = 0.2, **acquire: object) -> list[float]:
    async def main() -> list[float]:
        times: list[float] = []

        async def one() -> None:
            async with pool.acquire(**acquire):  # type: ignore[arg-type]
                times.append(now())
                await asyncio.sleep(hold_s)

        await asyncio.gather(*(one() for _ in range(n)))
        return times

    return run(main)


def test_waiters_on_a_paced_key_are_woken_at_each_instant_it_allows() -> None:
    pool = Pool("p", [res("key-1", capacity=8, rpm=120)])
    assert lease_times(pool, 6) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    stats = pool.statistics()
    assert (stats.leases, stats.paced, stats.paced_s) == (6, 6, 3.0)
    assert "leases=6 failures=0 leaked=0 paced=6 (3.0s, " in repr(pool)


def test_a_paced_out_resource_reads_paced_and_is_not_selected() -> None:
    async def main() -> tuple[object, ...]:
        pool = Pool("p", [res("a", rpm=60), res("b", capacity=1)])
        first = pool.try_acquire()
        assert first is not None
        assert first.resource.id == "a"
        first.release_now()
        reasons = pool.reasons()
        picked = pool.select()
        (snap,) = [s for s in pool.snapshot() if s.id == "a"]
        return reasons["a"], picked, snap.pacing

    reason, picked, pacing = run(main)
    assert reason == "paced until t=1.000"
    assert picked is not None
    assert picked.id == "b"
    assert pacing is not None
    assert (pacing["rpm"], pacing["paced_until"]) == (60.0, 1.0)


def test_a_call_estimated_at_500_tokens_spaces_a_6000_tpm_key_five_seconds_apart() -> None:
    pool = Pool("p", [res("key-1", capacity=8, tpm=6000, tokens_per_call=500)])
    assert lease_times(pool, 3) == [0.0, 5.0, 10.0]
    pool = Pool("p", [res("key-1", capacity=8, tpm=6000)])
    assert lease_times(pool, 3, tokens=1000) == [0.0, 10.0, 20.0]


def test_the_usage_a_lease_reports_corrects_its_estimate() -> None:
    pool = Pool("p", [res("key-1", capacity=8, tpm=6000, tokens_per_call=500)])

    async def main() -> list[float]:
        times = []
        for spent in (2000, 100, 500):
            async with pool.acquire() as lease:
                times.append(now())
                lease.report(ok=True, usage={"prompt_tokens": spent - 50, "completion_tokens": 50})
        return times

    # 2000 spent: 20 s; then 100: 1 s.
    assert run(main) == [0.0, 20.0, 21.0]


def test_a_quota_group_shares_one_bucket_across_its_resources() -> None:
    pool = Pool(
        "p",
        [
            res("east", capacity=4, rpm=60, quota_group="org-1"),
            res("west", capacity=4, quota_group="org-1"),  # paced by the group's limits
            res("other", capacity=4, rpm=60),
        ],
    )

    async def main() -> list[tuple[float, str]]:
        got = []

        async def one() -> None:
            async with pool.acquire(where=lambda r: r.quota_group == "org-1") as lease:
                got.append((now(), lease.resource.id))
                await asyncio.sleep(0.1)

        await asyncio.gather(*(one() for _ in range(4)))
        return got

    got = run(main)
    assert [t for t, _ in got] == [0.0, 1.0, 2.0, 3.0]
    assert {rid for _, rid in got} == {"east", "west"}


def test_a_waiter_on_a_full_member_of_a_paced_group_is_woken_when_the_group_allows() -> None:
    pool = Pool(
        "p",
        [res("east", rpm=60, quota_group="org-1"), res("west", quota_group="org-1")],
    )

    async def main() -> float:
        first = await pool.acquire(where=lambda r: r.id == "east")  # t=0; next at t=1
        await asyncio.sleep(2)
        waiter = asyncio.ensure_future(pool.acquire(where=lambda r: r.id == "east", timeout=60))
        await asyncio.sleep(1)  # t=3: east is full, the group's pace is ready
        other = await pool.acquire(where=lambda r: r.id == "west")  # the group: next at t=4
        await asyncio.sleep(0.5)
        first.release_now()  # t=3.5: east is free but resting until t=4
        other.release_now()
        lease = await waiter
        lease.release_now()
        return now()

    assert run(main) == 4.0


def test_headers_that_say_none_remain_rest_the_key_until_the_reset() -> None:
    pool = Pool("p", [res("key-1", capacity=4, rpm=600)])

    async def main() -> list[float]:
        times = []
        for n in range(3):
            async with pool.acquire() as lease:
                times.append(now())
                headers = {"x-ratelimit-remaining-requests": "0" if n == 0 else "50"}
                headers["x-ratelimit-reset-requests"] = "2s"
                lease.report(ok=True, headers=headers)
        return times

    assert run(main) == [0.0, 2.0, 2.1]


def test_a_key_that_declares_no_limits_still_rests_when_its_server_says_none_remain() -> None:
    pool = Pool("p", [res("key-1", capacity=4)])

    async def main() -> list[float]:
        times = []
        for _ in range(2):
            async with pool.acquire() as lease:
                times.append(now())
                headers = [
                    ("x-ratelimit-remaining-tokens", "0"),
                    ("x-ratelimit-reset-tokens", "1.5s"),
                ]
                lease.report(ok=True, headers=headers)
        return times

    assert run(main) == [0.0, 1.5]


def test_retry_after_still_sets_not_before_on_a_paced_key() -> None:
    pool = Pool("p", [res("key-1", capacity=4, rpm=600)])

    async def main() -> list[float]:
        times = []
        for n in range(3):
            async with pool.acquire() as lease:
                times.append(now())
                if n == 0:
                    lease.report(ok=False, retry_after=3.0)
        return times

    assert run(main) == [0.0, 3.0, 3.1]  # then paced again: 600 rpm


def test_pacing_is_told_as_events() -> None:
    events: list[PoolEvent] = []
    pool = Pool("p", [res("key-1", capacity=4, rpm=120)], on_event=events.append)
    lease_times(pool, 2)
    paced = [(e.at, e.resource, e.data["until"]) for e in events if e.kind == "resource.paced"]
    assert paced == [(0.0, "key-1", 0.5), (0.5, "key-1", 1.0)]


def test_a_negative_token_estimate_is_a_config_error_before_any_wait() -> None:
    pool = Pool("p", [res("key-1", tpm=100)])
    with pytest.raises(ConfigError, match="tokens"):
        pool.acquire(tokens=-1)


@settings(max_examples=40, deadline=None)
@given(
    rpm=st.sampled_from([30, 60, 120, 600]),
    burst=st.integers(1, 4),
    arrivals=st.lists(st.integers(0, 400), min_size=1, max_size=40),  # tenths of a second
    hold=st.sampled_from([0.0, 0.05, 0.3, 2.0]),
)
def test_a_paced_pool_never_grants_more_than_the_limit_plus_the_burst_in_any_window(
    rpm: int, burst: int, arrivals: list[int], hold: float
) -> None:
    pool = Pool("p", [res("key-1", capacity=64, rpm=rpm, burst=burst)])

    async def main() -> list[float]:
        granted: list[float] = []

        async def one(at: float) -> None:
            await asyncio.sleep(at)
            async with pool.acquire():
                granted.append(now())
                await asyncio.sleep(hold)

        await asyncio.gather(*(one(a / 10) for a in arrivals))
        return granted

    granted = sorted(run(main))
    interval = 60.0 / rpm
    for i, start in enumerate(granted):
        for end in granted[i:]:
            inside = sum(1 for t in granted[i:] if t <= end)
            assert inside <= burst + (end - start) / interval + 1e-9


def test_publishing_a_member_that_contradicts_its_groups_limits_changes_nothing() -> None:
    pool = Pool("p", [res("a", rpm=60, quota_group="org-1")])
    with pytest.raises(ConfigError, match="quota group 'org-1'"):
        pool.publish(res("b", rpm=120, quota_group="org-1"))
    assert [r.id for r in pool.resources] == ["a"]
    pool.publish(res("c", quota_group="org-1"))  # no limits of its own: the group's
    (snap,) = [s for s in pool.snapshot() if s.id == "c"]
    assert snap.pacing is not None
    assert snap.pacing["rpm"] == 60.0
