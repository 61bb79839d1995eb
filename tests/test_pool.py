"""The pool: allocation, selectors, factories, health inputs, throttles, events, statistics."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from helpers import now, res, run, settle
from pyattacker.errors import ConfigError, ResourceError
from pyattacker.pool import Pool, PoolEvent, Resource, Selector, TaskContext

# -- choosing -------------------------------------------------------------------------


def test_the_least_loaded_resource_is_chosen() -> None:
    pool = Pool("p", [res("a", 4), res("b", 2)])
    first = pool.try_acquire()
    assert first is not None
    assert first.resource.id == "a"
    second = pool.try_acquire()
    assert second is not None
    assert second.resource.id == "b"
    third = pool.try_acquire()
    assert third is not None
    assert third.resource.id == "a"


def test_ties_are_broken_round_robin() -> None:
    pool = Pool("p", [res("a", 10), res("b", 10), res("c", 10)])
    order = []
    for _ in range(6):
        lease = pool.try_acquire()
        assert lease is not None
        order.append(lease.resource.id)
        lease.release_now()
    assert order == ["a", "b", "c", "a", "b", "c"]


def test_a_score_outranks_load_and_none_ranks_last() -> None:
    pool = Pool("p", [res("a", 4), res("b", 4), res("c", 4)])
    ranks = {"a": None, "b": 1.0, "c": 5.0}
    busy = pool.try_acquire(Selector.build(id="c"))
    assert busy is not None
    chosen = pool.select(score=lambda r: ranks[r.id])
    assert chosen is not None
    assert chosen.id == "c"
    only_unknown = pool.select(score=lambda r: ranks[r.id], exclude={"b", "c"})
    assert only_unknown is not None
    assert only_unknown.id == "a"


def test_a_full_pool_has_nothing_to_select_and_says_why() -> None:
    pool = Pool("p", [res("a", 1)])
    assert pool.try_acquire() is not None
    assert pool.try_acquire() is None
    assert pool.reasons() == {"a": "full (1/1)"}


def test_selectors_filter_by_id_kind_tags_fields_dotted_paths_and_predicate() -> None:
    pool = Pool(
        "p",
        [
            res(
                "a",
                kind="llm",
                tags=["eu", "fast"],
                options={"model": "m1", "limits": {"rpm": 600}},
            ),
            res("b", kind="llm", tags=["us"], options={"model": "m2", "limits": {"rpm": 60}}),
            res("c", kind="embed", tags=["eu"], region="eu-west"),
        ],
    )

    def ids(**selector: Any) -> set[str]:
        wanted = Selector.build(**selector)
        return {r.id for r in pool.resources if wanted.matches(r)}

    assert ids(id="b") == {"b"}
    assert ids(kind="llm") == {"a", "b"}
    assert ids(tags="eu") == {"a", "c"}
    assert ids(tags=["eu", "fast"]) == {"a"}
    assert ids(model="m2") == {"b"}
    assert ids(limits__rpm=600) == {"a"}
    assert ids(**{"options.limits.rpm": 60}) == {"b"}
    assert ids(region="eu-west") == {"c"}  # meta, given as an extra keyword to create()
    assert ids(where=lambda r: r.id != "a", kind="llm") == {"b"}


def test_a_selector_path_that_no_resource_has_is_a_config_error_naming_it() -> None:
    pool = Pool("p", [res("a", options={"model": "m1"})])
    ctx = TaskContext([pool])
    with pytest.raises(ConfigError) as info:
        ctx.acquire(modle="m1")
    assert info.value.field == "selector.modle"
    assert pool.statistics().active == 0


# -- factories ------------------------------------------------------------------------


def test_the_factory_is_called_lazily_once_per_resource_and_its_result_is_the_client() -> None:
    calls: list[str] = []

    def factory(resource: Resource) -> object:
        calls.append(resource.id)
        return {"client-for": resource.id}

    pool = Pool("p", [res("a", 2, factory=factory), res("b", 2, factory=factory)])
    assert calls == []
    leases = [pool.try_acquire() for _ in range(4)]
    assert calls == ["a", "b"]
    assert [lease.client for lease in leases if lease] == [
        {"client-for": "a"},
        {"client-for": "b"},
        {"client-for": "a"},
        {"client-for": "b"},
    ]


def test_without_a_factory_the_client_is_the_resource() -> None:
    pool = Pool("p", [res("a")])
    lease = pool.try_acquire()
    assert lease is not None
    assert lease.client is lease.resource


def test_a_failing_factory_drops_that_candidate_and_counts_toward_health() -> None:
    def broken(resource: Resource) -> object:
        raise RuntimeError("no credentials")

    pool = Pool("p", [res("a", factory=broken, degrade_after=1), res("b")])
    lease = pool.try_acquire()
    assert lease is not None
    assert lease.resource.id == "b"
    snap = {s.id: s for s in pool.snapshot()}
    assert snap["a"].state == "degraded"
    assert snap["a"].failures == 1
    assert pool.statistics().failures == 1


def test_a_factory_that_returns_none_never_hands_out_a_lease() -> None:
    pool = Pool("p", [res("a", factory=lambda r: None)])
    assert pool.try_acquire() is None
    assert pool.statistics().active == 0


# -- what reports do ------------------------------------------------------------------


def test_only_an_explicit_failure_report_counts_toward_health() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", degrade_after=1)])
        with pytest.raises(ValueError, match="boom"):
            async with pool.acquire():
                raise ValueError("boom")
        assert pool.snapshot()[0].state == "ready"
        async with pool.acquire() as lease:
            lease.report(ok=False, error=ConnectionError("reset"))
        assert pool.snapshot()[0].state == "degraded"

    run(main)


def test_a_refusal_with_retry_after_blocks_that_resource_for_everyone_until_then() -> None:
    async def main() -> list[tuple[str, float]]:
        pool = Pool("p", [res("a", 2)])
        got: list[tuple[str, float]] = []

        async def other_caller() -> None:
            async with pool.acquire() as lease:
                got.append((lease.resource.id, now()))

        async with pool.acquire() as lease:
            lease.report(ok=False, retry_after=7.5)
        assert pool.snapshot()[0].state == "ready"  # health untouched
        await other_caller()
        return got

    assert run(main) == [("a", 7.5)]


def test_a_caller_whose_try_missed_a_rest_that_ended_before_it_parked_is_still_woken() -> None:
    """A retry timed to a Retry-After tries a hair before the rest ends and parks a hair
    after: no release, no health change and no future instant is left to wake it."""

    async def main() -> tuple[bool, float]:
        pool = Pool("p", [res("a")])
        async with pool.acquire() as lease:
            lease.report(ok=False, retry_after=2.0)
        assert pool.try_acquire() is None  # at t=0: resting until t=2
        await asyncio.sleep(2.0)  # the caller's loop runs others meanwhile: the rest ends
        woken = await pool.wait_slot(timeout=60.0)
        return woken, now()

    assert run(main) == (True, 2.0)  # at once, not after the 60 s timeout (or never)


def test_a_refusal_blocks_every_key_of_its_quota_group() -> None:
    async def main() -> None:
        pool = Pool(
            "p",
            [
                res("k1", quota_group="org-1"),
                res("k2", quota_group="org-1"),
                res("k3", quota_group="org-2"),
            ],
        )
        lease = await pool.acquire(id="k1")
        lease.report(ok=False, error=_http_error(429, retry_after="3"))
        lease.release_now()
        reasons = pool.reasons()
        assert reasons["k1"].startswith("throttled until t=3")
        assert reasons["k2"].startswith("throttled until t=3")
        assert reasons["k3"] == "free"
        assert pool.statistics().throttles == 1
        assert pool.statistics().failures == 0

    run(main)


def test_usage_reports_accumulate_per_resource() -> None:
    pool = Pool("p", [res("a")])
    for tokens in (10, 32):
        lease = pool.try_acquire()
        assert lease is not None
        lease.report(ok=True, usage={"tokens": tokens})
        lease.release_now()
    assert pool.usage_of("a") == {"tokens": 42}


def test_lease_degrade_takes_the_resource_out_for_its_cooldown() -> None:
    async def main() -> float:
        pool = Pool("p", [res("a", cooldown_s=12.0)])
        async with pool.acquire() as lease:
            lease.degrade("slow answers")
        async with pool.acquire():
            return now()

    assert run(main) == 12.0


# -- waking ---------------------------------------------------------------------------


def test_a_release_wakes_only_the_waiters_whose_selector_matches() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a"), res("b")])
        held_a = pool.try_acquire(Selector.build(id="a"))
        held_b = pool.try_acquire(Selector.build(id="b"))
        assert held_a
        assert held_b
        wait_a = asyncio.create_task(pool.wait_slot(Selector.build(id="a")))
        wait_b = asyncio.create_task(pool.wait_slot(Selector.build(id="b")))
        await asyncio.sleep(0)
        assert pool.waiting == 2
        held_a.release_now()
        await settle()
        assert wait_a.done()
        assert not wait_b.done()
        assert pool.waiting == 1
        wait_b.cancel()
        await asyncio.gather(wait_b, return_exceptions=True)
        assert pool.waiting == 0

    run(main)


def test_a_health_change_wakes_every_waiter() -> None:
    async def main() -> None:
        pool = Pool("p", [res("a", degrade_after=1), res("b")])
        lease = pool.try_acquire(Selector.build(id="a"))
        other = pool.try_acquire(Selector.build(id="b"))
        assert lease
        assert other
        waiters = [
            asyncio.create_task(pool.wait_slot(Selector.build(id=rid))) for rid in ("a", "b")
        ]
        await asyncio.sleep(0)
        lease.report(ok=False)
        await settle()
        assert all(w.done() for w in waiters)

    run(main)


def test_a_waiter_with_a_timeout_gives_up_at_exactly_that_simulated_instant() -> None:
    async def main() -> tuple[bool, float]:
        pool = Pool("p", [res("a")])
        assert pool.try_acquire() is not None
        woken = await pool.wait_slot(timeout=2.5)
        return woken, now()

    assert run(main) == (False, 2.5)


def test_a_caller_stuck_with_no_lease_in_flight_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[PoolEvent] = []

    async def main() -> None:
        pool = Pool("p", [res("a")], deadlock_warn_s=5.0, on_event=events.append)
        # Nothing matches: a publish could still help (all dead raises NoUsableResource).
        assert await pool.wait_slot(Selector.build(kind="other"), timeout=8.0) is False

    with caplog.at_level(logging.WARNING, logger="pyattacker.pool"):
        run(main)
    stuck = [e for e in events if e.kind == "pool.stuck"]
    assert [(e.at, e.data["waited_s"]) for e in stuck] == [(5.0, 5.0)]
    assert "no lease in flight" in caplog.text


# -- membership -----------------------------------------------------------------------


def test_publish_adds_a_resource_and_wakes_the_waiters() -> None:
    async def main() -> tuple[str, float]:
        pool = Pool("p", [res("a")])
        assert pool.try_acquire() is not None

        async def later() -> None:
            await asyncio.sleep(4.0)
            pool.publish(res("b"))

        task = asyncio.create_task(later())
        lease = await pool.acquire()
        await task
        return lease.resource.id, now()

    assert run(main) == ("b", 4.0)


def test_publishing_a_duplicate_id_is_a_config_error_and_changes_nothing() -> None:
    pool = Pool("p", [res("a")])
    with pytest.raises(ConfigError) as info:
        pool.publish(res("a", 5))
    assert info.value.field == "resource.id"
    assert [r.capacity for r in pool.resources] == [1]


def test_revoke_retires_a_resource_but_leases_already_out_stay_valid() -> None:
    pool = Pool("p", [res("a", 2), res("b")])
    lease = pool.try_acquire(Selector.build(id="a"))
    assert lease is not None
    pool.revoke("a", "key rotated")
    assert pool.select(Selector.build(id="a")) is None
    lease.report(ok=False)  # ignored: a revoked resource has no health left to lose
    assert lease.release_now() is True
    stats = pool.statistics()
    assert (stats.revoked, stats.ready, stats.active, stats.capacity) == (1, 1, 0, 1)
    with pytest.raises(ResourceError):
        pool.revoke("zzz")


def test_a_revoked_id_can_be_published_again_with_a_fresh_state() -> None:
    pool = Pool("p", [res("a")])
    pool.revoke("a")
    pool.publish(res("a", 3))
    assert [(s.id, s.state, s.capacity) for s in pool.snapshot()] == [("a", "ready", 3)]


# -- looking at it --------------------------------------------------------------------


def test_statistics_tell_the_story_step_by_step() -> None:
    pool = Pool("p", [res("a", 2, degrade_after=1), res("b", 1, dead_after=1, degrade_after=1)])
    stats = pool.statistics()
    assert (stats.ready, stats.active, stats.capacity, stats.leases) == (2, 0, 3, 0)
    a = pool.try_acquire(Selector.build(id="a"))
    b = pool.try_acquire(Selector.build(id="b"))
    assert a
    assert b
    assert pool.statistics().active == 2
    b.report(ok=False)
    stats = pool.statistics()
    assert (stats.dead, stats.capacity, stats.failures) == (1, 2, 1)
    a.report(ok=False)
    stats = pool.statistics()
    assert (stats.degraded, stats.ready, stats.failures) == (1, 0, 2)
    a.release_now()
    b.release_now()
    stats = pool.statistics()
    assert (stats.active, stats.leases, stats.leaked) == (0, 2, 0)


def test_the_repr_says_what_the_pool_is_doing() -> None:
    pool = Pool("apis", [res("a", 2), res("b", 2)])
    assert pool.try_acquire() is not None
    assert repr(pool) == (
        "<Pool 'apis' resources=2 ready=2 degraded=0 dead=0 revoked=0 active=1/4 "
        "waiting=0 leases=1 failures=0 leaked=0>"
    )


def test_every_change_is_an_event_in_order() -> None:
    events: list[PoolEvent] = []

    async def main() -> None:
        pool = Pool("p", [res("a", degrade_after=1, cooldown_s=1.0)], on_event=events.append)
        async with pool.acquire() as lease:
            lease.report(ok=False, latency_ms=12.0)
        pool.publish(res("b"))
        pool.set_limit("b", 1)  # already 1: no event
        pool.revoke("b")

    run(main)
    assert [(e.kind, e.resource) for e in events] == [
        ("lease.acquired", "a"),
        ("lease.reported", "a"),
        ("resource.health", "a"),
        ("lease.released", "a"),
        ("pool.published", "b"),
        ("resource.health", "b"),
        ("pool.revoked", "b"),
    ]
    health = events[2].data
    assert (health["from"], health["to"], health["until"]) == ("ready", "degraded", 1.0)


def test_unsubscribing_stops_events_and_a_broken_subscriber_does_not_break_leasing() -> None:
    seen: list[str] = []

    def broken(event: PoolEvent) -> None:
        raise RuntimeError("subscriber bug")

    pool = Pool("p", [res("a")], on_event=broken)
    stop = pool.subscribe(lambda e: seen.append(e.kind))
    lease = pool.try_acquire()
    assert lease is not None
    stop()
    lease.release_now()
    assert seen == ["lease.acquired"]


def test_set_limit_is_clamped_to_one_through_capacity() -> None:
    pool = Pool("p", [res("a", 4)])
    assert pool.set_limit("a", 0) == 1
    assert pool.set_limit("a", 99) == 4
    assert pool.set_limit("a", 2) == 2
    assert [pool.try_acquire() is not None for _ in range(3)] == [True, True, False]


# -- secrets and bad input ------------------------------------------------------------


def test_secrets_in_options_are_masked_in_spec_repr_events_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-live-0123456789"
    events: list[PoolEvent] = []
    pool = Pool("p", [], on_event=events.append)
    resource = res(
        "a",
        options={"api_key": secret, "headers": {"Authorization": f"Bearer {secret}"}, "m": 1},
        factory=lambda r: (_ for _ in ()).throw(RuntimeError(f"key {secret} was rejected")),
    )
    with caplog.at_level(logging.DEBUG, logger="pyattacker"):
        pool.publish(resource)
        pool.try_acquire()
    texts = [repr(resource), str(resource.spec()), repr(pool), caplog.text]
    texts += [str(e.to_dict()) for e in events]
    assert all(secret not in text for text in texts)
    assert "key *** was rejected" in caplog.text  # the message survives, the key does not
    assert resource.spec()["options"] == {
        "api_key": "***",
        "headers": {"Authorization": "***"},
        "m": 1,
    }
    assert resource.options["api_key"] == secret  # the real value is still usable


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"capacity": 0}, "resources.a.capacity"),
        ({"capacity": 1.5}, "resources.a.capacity"),
        ({"cooldown_s": -1}, "resources.a.cooldown_s"),
        ({"dead_after": 1, "degrade_after": 2}, "resources.a.dead_after"),
        ({"options": ["x"]}, "options"),
        ({"quota_group": ""}, "resources.a.quota_group"),
    ],
)
def test_bad_resource_input_is_a_config_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        Resource.create("llm", id="a", **kwargs)
    assert info.value.field == field


def test_bad_pool_input_is_a_config_error_and_builds_nothing() -> None:
    with pytest.raises(ConfigError, match="duplicate"):
        Pool("p", [res("a"), res("a")])
    with pytest.raises(ConfigError) as info:
        Pool("p", ["a"])  # type: ignore[list-item]
    assert info.value.field == "p.resources[0]"
    with pytest.raises(ConfigError):
        Pool("")
    with pytest.raises(ConfigError, match="unknown algorithm"):
        Pool("p", [res("a")], algorithm="fastest")


class _HttpError(Exception):
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.headers = headers


def _http_error(status: int, *, retry_after: str) -> _HttpError:
    return _HttpError(status, {"Retry-After": retry_after})


def test_a_lease_from_the_one_resource_fast_path_carries_when_what_and_for_whom() -> None:
    async def main() -> None:
        pool = Pool("p", [res("only", 2)])
        await asyncio.sleep(1.5)
        owner = TaskContext([pool])
        for _ in range(2):  # the first builds the client (general path), the second not
            lease = pool.try_acquire(owner=owner, algorithm="wait")
            assert lease is not None
            assert (lease.acquired_at, lease.algorithm, lease.owner) == (now(), "wait", owner)
            assert lease.client is lease.resource
        assert pool.try_acquire() is None  # full: both units held
        assert pool.statistics().active == 2

    run(main)
