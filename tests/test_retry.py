"""The retry policy: which failures are retried, after how long, and why not."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker import retry
from pyattacker.errors import ConfigError, ErrorClass, FatalError, RetryableError
from pyattacker.retry import (
    RetryDecision,
    Retrying,
    RetryReason,
    backoff_ceiling,
    jittered,
    resolve_retry,
)


class Throttled(Exception):
    """A 429 the way a vendor SDK raises it."""

    status_code = 429

    def __init__(self, retry_after: object = None) -> None:
        super().__init__("too many requests")
        self.retry_after = retry_after


def _decide(policy: Retrying, exc: BaseException, attempts_used: int = 1, **kw: Any) -> Any:
    return policy.decide(exc, attempts_used=attempts_used, rng=random.Random(0), **kw)


def test_retry_exports_exactly_the_public_names() -> None:
    assert set(retry.__all__) == {
        "JITTERS",
        "Jitter",
        "RetryDecision",
        "RetryReason",
        "Retrying",
        "backoff_ceiling",
        "jittered",
        "resolve_retry",
    }


def test_jitter_draws_once_and_only_when_there_is_something_to_jitter() -> None:
    rng = random.Random(3)
    u = random.Random(3).random()
    assert jittered(4.0, "full", rng) == 4.0 * u
    assert jittered(4.0, "none", rng) == 4.0  # no draw
    assert jittered(0.0, "full", rng) == 0.0  # no draw
    v = random.Random(3)
    v.random()
    assert jittered(4.0, "equal", rng) == 2.0 + 2.0 * v.random()
    assert backoff_ceiling(4, base=0.5, factor=2.0, cap=3.0) == 3.0
    assert backoff_ceiling(10_000, base=0.5, factor=2.0, cap=3.0) == 3.0  # overflow is capped


# ---------------------------------------------------------------------- no hidden work


def test_the_default_policy_makes_exactly_one_attempt() -> None:
    decision = _decide(Retrying(), ConnectionResetError())
    assert decision.retry is False
    assert decision.reason == "attempts_exhausted"
    assert decision.delay_s == 0.0


def test_the_none_preset_never_retries_even_a_throttled_request() -> None:
    decision = _decide(resolve_retry("none"), Throttled(retry_after=1))
    assert (decision.retry, decision.reason) == (False, "attempts_exhausted")
    assert decision.error_class == "rate_limit"
    assert decision.retry_after == 1.0  # still recorded: the server did say it


# -------------------------------------------------------------------------- the decision


def test_a_decision_has_exactly_the_recorded_fields() -> None:
    names = [f.name for f in dataclasses.fields(RetryDecision)]
    assert names == [
        "retry",
        "reason",
        "delay_s",
        "error_class",
        "max_attempts",
        "attempt",
        "retry_after",
    ]


def test_a_decision_serialises_to_plain_json() -> None:
    policy = Retrying(max_attempts=3, jitter="none")
    decision = _decide(policy, Throttled(retry_after="2"), attempts_used=2)
    assert json.loads(json.dumps(decision.to_dict())) == {
        "retry": True,
        "reason": "retryable",
        "delay_s": 2.0,
        "error_class": "rate_limit",
        "max_attempts": 3,
        "attempt": 2,
        "retry_after": 2.0,
    }


def test_a_retryable_decision_says_how_long_to_wait() -> None:
    policy = Retrying(max_attempts=4, jitter="none")
    decision = _decide(policy, TimeoutError(), attempts_used=3)
    assert decision == RetryDecision(
        retry=True,
        reason=RetryReason.RETRYABLE,
        delay_s=2.0,
        error_class=ErrorClass.TIMEOUT,
        max_attempts=4,
        attempt=3,
        retry_after=None,
    )


@pytest.mark.parametrize("attempts_used", [0, -1, True, 1.0])
def test_attempts_used_must_be_a_positive_int(attempts_used: Any) -> None:
    with pytest.raises(ValueError, match="attempts_used"):
        _decide(Retrying(max_attempts=3), TimeoutError(), attempts_used=attempts_used)


# --------------------------------------------------------------------- the reason order


def test_attempts_exhausted_is_checked_before_the_policy() -> None:
    decision = _decide(Retrying(max_attempts=2), ValueError(), attempts_used=2)
    assert decision.reason == "attempts_exhausted"


def test_policy_declined_is_checked_before_the_budget() -> None:
    policy = Retrying(max_attempts=3, max_total_s=0.0)
    assert _decide(policy, ValueError()).reason == "policy_declined"


def test_the_budget_is_checked_before_retrying() -> None:
    policy = Retrying(max_attempts=3, jitter="none", max_total_s=1.0)
    assert _decide(policy, TimeoutError(), elapsed=0.5).reason == "retryable"  # 0.5 + 0.5
    decision = _decide(policy, TimeoutError(), elapsed=0.6)
    assert (decision.retry, decision.reason, decision.delay_s) == (False, "total_budget", 0.0)


def test_a_retry_is_scheduled_when_every_check_passes() -> None:
    decision = _decide(Retrying(max_attempts=3), ConnectionResetError())
    assert (decision.retry, decision.reason) == (True, "retryable")


# -------------------------------------------------------------------- what is retried


@pytest.mark.parametrize(
    "exc",
    [
        RetryableError("again"),
        Throttled(),
        TimeoutError(),
        ConnectionRefusedError(),
        type("ServerError", (Exception,), {"status": 503})(),
    ],
)
def test_the_default_classes_are_retried_when_retries_are_asked_for(exc: Exception) -> None:
    assert _decide(Retrying(max_attempts=2), exc).retry is True


@pytest.mark.parametrize("exc", [ValueError(), KeyError("k"), RuntimeError()])
def test_invalid_and_unknown_errors_are_declined_by_default(exc: Exception) -> None:
    assert _decide(Retrying(max_attempts=2), exc).reason == "policy_declined"


def test_on_names_extra_types_and_classes_to_retry() -> None:
    assert _decide(Retrying(max_attempts=2, on=(KeyError,)), KeyError("k")).retry is True
    assert _decide(Retrying(max_attempts=2, on=("invalid",)), ValueError()).retry is True
    assert _decide(Retrying(max_attempts=2, on=(KeyError,)), ValueError()).retry is False


def test_retry_unknown_retries_unclassified_errors_only() -> None:
    policy = Retrying(max_attempts=2, retry_unknown=True)
    assert _decide(policy, RuntimeError()).retry is True
    assert _decide(policy, ValueError()).retry is False


def test_without_retry_classified_only_on_is_retried() -> None:
    policy = Retrying(max_attempts=2, retry_classified=False, on=("rate_limit",))
    assert _decide(policy, Throttled()).retry is True
    assert _decide(policy, TimeoutError()).reason == "policy_declined"


@pytest.mark.parametrize(
    "exc",
    [
        asyncio.CancelledError(),
        KeyboardInterrupt(),
        SystemExit(0),
        GeneratorExit(),
        FatalError("stop"),
        type("Declared", (Exception,), {"error_class": "fatal"})(),
        type("Forbidden", (Exception,), {"status": 403})(),
    ],
)
def test_cancellation_and_fatal_errors_are_never_retried(exc: BaseException) -> None:
    policy = Retrying(max_attempts=9, on=(BaseException,), retry_unknown=True)
    decision = _decide(policy, exc)
    assert (decision.retry, decision.reason) == (False, "policy_declined")


# ----------------------------------------------------------------------------- delays


def test_delays_without_jitter_double_from_base() -> None:
    rng = random.Random(1)
    assert Retrying(jitter="none").delays(4, rng) == [0.5, 1.0, 2.0, 4.0]


def test_delays_stop_growing_at_the_cap() -> None:
    policy = Retrying(base=1.0, factor=3.0, cap=10.0, jitter="none")
    assert policy.delays(5, random.Random(1)) == [1.0, 3.0, 9.0, 10.0, 10.0]


def test_full_jitter_with_a_seeded_rng_gives_a_known_list() -> None:
    delays = Retrying().delays(5, random.Random(2024))
    assert delays == pytest.approx(
        [0.235045359, 0.728264291, 0.607502717, 3.549193076, 3.280708716]
    )


def test_equal_jitter_keeps_at_least_half_the_delay() -> None:
    delays = Retrying(jitter="equal").delays(5, random.Random(2024))
    assert delays == pytest.approx(
        [0.367522680, 0.864132146, 1.303751358, 3.774596538, 5.640354358]
    )
    assert all(d >= ceiling / 2 for d, ceiling in zip(delays, [0.5, 1, 2, 4, 8], strict=True))


def test_decide_uses_the_delay_for_the_attempt_that_failed() -> None:
    policy = Retrying(max_attempts=9, jitter="none")
    delays = [_decide(policy, TimeoutError(), attempts_used=k).delay_s for k in range(1, 5)]
    assert delays == [0.5, 1.0, 2.0, 4.0]


def test_a_huge_attempt_number_gives_the_cap_not_an_overflow() -> None:
    policy = Retrying(max_attempts=10_000, jitter="none")
    assert _decide(policy, TimeoutError(), attempts_used=5000).delay_s == 30.0


def test_a_zero_base_never_waits() -> None:
    assert Retrying(base=0.0, cap=0.0).delays(3, random.Random(1)) == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------ Retry-After


def test_the_servers_retry_after_replaces_the_backoff_even_above_cap() -> None:
    policy = Retrying(max_attempts=3, cap=1.0)
    decision = _decide(policy, Throttled(retry_after=10))
    assert (decision.retry, decision.delay_s, decision.retry_after) == (True, 10.0, 10.0)


def test_the_servers_retry_after_is_still_bound_by_the_budget() -> None:
    policy = Retrying(max_attempts=3, max_total_s=60.0)
    decision = _decide(policy, Throttled(retry_after=120), elapsed=1.0)
    assert (decision.retry, decision.reason) == (False, "total_budget")
    assert decision.retry_after == 120.0


def test_an_http_date_retry_after_uses_the_given_now() -> None:
    now = datetime.datetime(2015, 10, 21, 7, 27, 30, tzinfo=datetime.UTC).timestamp()
    exc = Throttled(retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    decision = _decide(Retrying(max_attempts=2), exc, now=now)
    assert decision.delay_s == 30.0


# --------------------------------------------------------------------------- randomness


def _after_one_draw(seed: int) -> object:
    rng = random.Random(seed)
    rng.random()
    return rng.getstate()


def test_the_rng_is_drawn_once_for_a_jittered_delay() -> None:
    rng = random.Random(5)
    _ = Retrying(max_attempts=2).decide(TimeoutError(), attempts_used=1, rng=rng)
    assert rng.getstate() == _after_one_draw(5)


@pytest.mark.parametrize(
    ("policy", "exc", "attempts_used"),
    [
        (Retrying(max_attempts=2, jitter="none"), TimeoutError(), 1),  # no jitter
        (Retrying(max_attempts=2), Throttled(retry_after=3), 1),  # the server decided
        (Retrying(max_attempts=2), ValueError(), 1),  # declined
        (Retrying(max_attempts=2), TimeoutError(), 2),  # exhausted
    ],
)
def test_the_rng_is_untouched_when_no_jittered_delay_is_computed(
    policy: Retrying, exc: BaseException, attempts_used: int
) -> None:
    rng = random.Random(5)
    before = rng.getstate()
    policy.decide(exc, attempts_used=attempts_used, rng=rng)
    assert rng.getstate() == before


_POLICIES = st.builds(
    Retrying,
    max_attempts=st.integers(1, 8),
    base=st.floats(0.0, 5.0),
    factor=st.floats(1.0, 4.0),
    cap=st.floats(5.0, 60.0),
    jitter=st.sampled_from(["full", "equal", "none"]),
    max_total_s=st.one_of(st.none(), st.floats(0.0, 100.0)),
)
_FAILURES = st.sampled_from(
    [TimeoutError(), ValueError(), RuntimeError(), Throttled(), Throttled(retry_after=2.0)]
)


@given(policy=_POLICIES, seed=st.integers(), failures=st.lists(_FAILURES, max_size=8))
def test_the_same_seed_gives_the_same_decisions(
    policy: Retrying, seed: int, failures: list[BaseException]
) -> None:
    def run() -> list[RetryDecision]:
        rng = random.Random(seed)
        return [
            policy.decide(exc, attempts_used=k, rng=rng, elapsed=k * 0.5)
            for k, exc in enumerate(failures, start=1)
        ]

    assert run() == run()


@given(policy=_POLICIES, seed=st.integers(), n=st.integers(0, 40))
def test_delays_are_never_negative_and_never_above_cap(policy: Retrying, seed: int, n: int) -> None:
    delays = policy.delays(n, random.Random(seed))
    assert len(delays) == n
    assert all(0.0 <= d <= policy.cap for d in delays)


@given(policy=_POLICIES, seed=st.integers(), attempts_used=st.integers(1, 10))
def test_a_decision_is_consistent_with_itself(
    policy: Retrying, seed: int, attempts_used: int
) -> None:
    decision = policy.decide(TimeoutError(), attempts_used=attempts_used, rng=random.Random(seed))
    assert decision.attempt == attempts_used
    assert decision.max_attempts == policy.max_attempts
    assert decision.retry == (decision.reason == "retryable")
    assert 0.0 <= decision.delay_s <= policy.cap
    if not decision.retry:
        assert decision.delay_s == 0.0
    if policy.max_total_s is not None and decision.retry:
        assert decision.delay_s <= policy.max_total_s


# ------------------------------------------------------------------- specs and config


def test_resolve_retry_accepts_every_kind_of_spec() -> None:
    policy = Retrying(max_attempts=3)
    assert resolve_retry(None) == Retrying()
    assert resolve_retry(policy) is policy
    assert resolve_retry("none") == Retrying(max_attempts=1)
    assert resolve_retry({"max_attempts": 3, "on": ["invalid"]}) == Retrying(
        max_attempts=3, on=("invalid",)
    )
    assert Retrying.from_spec("exponential") == Retrying(
        max_attempts=5, base=0.5, factor=2.0, cap=30.0, jitter="full"
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("forever", "retry"),
        (3, "retry"),
        ({"attempts": 3}, "retry.attempts"),
        ({"max_attempts": 0}, "retry.max_attempts"),
        ({"max_attempts": 2.0}, "retry.max_attempts"),
        ({"max_attempts": True}, "retry.max_attempts"),
        ({"base": -0.1}, "retry.base"),
        ({"base": float("nan")}, "retry.base"),
        ({"factor": 0.5}, "retry.factor"),
        ({"cap": 0.1}, "retry.cap"),
        ({"cap": float("inf")}, "retry.cap"),
        ({"jitter": "random"}, "retry.jitter"),
        ({"max_total_s": -1}, "retry.max_total_s"),
        ({"max_total_s": "60"}, "retry.max_total_s"),
        ({"retry_unknown": "yes"}, "retry.retry_unknown"),
        ({"on": ["timeouts"]}, "retry.on"),
        ({"on": [int]}, "retry.on"),
        ({"on": ["cancelled"]}, "retry.on"),
        ({"on": ["fatal"]}, "retry.on"),
        ({"on": 3}, "retry.on"),
    ],
)
def test_a_bad_spec_names_the_field(spec: Any, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_retry(spec)
    assert caught.value.field == field
    assert caught.value.hint


def test_a_bad_policy_built_in_code_raises_config_error_too() -> None:
    with pytest.raises(ConfigError, match=r"retry\.max_attempts"):
        Retrying(max_attempts=0)


def test_numbers_and_on_are_normalised() -> None:
    policy = Retrying(base=1, cap=10, on=["timeout", KeyError])  # type: ignore[arg-type]
    assert policy.on == (ErrorClass.TIMEOUT, KeyError)
    assert isinstance(policy.base, float)
    assert hash(policy) == hash(Retrying(base=1.0, cap=10.0, on=("timeout", KeyError)))


def test_the_repr_shows_only_what_differs_from_the_default() -> None:
    assert repr(Retrying()) == "Retrying()"
    policy = Retrying(max_attempts=5, on=(TimeoutError, "invalid"), cap=8)
    assert repr(policy) == "Retrying(max_attempts=5, on=(TimeoutError, 'invalid'), cap=8.0)"
    assert repr(Retrying(on=("timeout",))) == "Retrying(on=('timeout',))"
