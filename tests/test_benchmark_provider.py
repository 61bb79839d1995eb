"""The provider model (`pyattacker.world`): the weather is a function of time, the dice are
a function of the request's ordinal, and what the client sees is what a vendor SDK raises.

Every test builds a small world by hand and drives `ProviderModel` directly (no loop, no
harness) except the one that checks the harness counts error classes the way
`error_class_of` does.
"""

from __future__ import annotations

import math
import pickle
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmark_helpers import CALM, ONE_SECOND, _world
from pyattacker.benchmark import SCENARIOS, Harness
from pyattacker.benchmark import _harness as harness_module
from pyattacker.errors import error_class_of, retry_after_of
from pyattacker.world import (
    DRAWS_PER_REQUEST,
    EndpointProfile,
    FailureProfile,
    Outage,
    ProviderError,
    ProviderModel,
    RateLimitProfile,
    Verdict,
)


def _reference_draws(seed: int, endpoint: str, count: int) -> list[tuple[float, ...]]:
    """Ordinal n's dice as the model documents them: draws [5n, 5n+5) of one stream."""
    draw = random.Random(f"{seed}:{endpoint}").random
    return [tuple(draw() for _ in range(DRAWS_PER_REQUEST)) for _ in range(count)]


# ------------------------------------------------------------------- the weather: storms

STORMY = FailureProfile(error_rate=0.0, storm_rate=0.4, storm_duration_s=10.0)
STORM_WORLD = _world(
    EndpointProfile(id="a", capacity=1000, latency=ONE_SECOND, failures=STORMY),
    EndpointProfile(id="b", capacity=1000, latency=ONE_SECOND, failures=STORMY),
)
PROBES = [i * 2.5 for i in range(121)]  # 0 .. 300 s, four probes per storm window


def _drive(model: ProviderModel, schedule: list[tuple[str, float]]) -> None:
    for endpoint, t in schedule:
        model.admit(endpoint, t)
        model.finish(endpoint)


schedules = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.floats(0.0, 300.0, allow_nan=False)),
    max_size=60,
).map(lambda events: sorted(events, key=lambda e: e[1]))


@settings(max_examples=60)
@given(first=schedules, second=schedules, seed=st.integers(0, 2**31))
def test_storm_state_does_not_depend_on_request_cadence(
    first: list[tuple[str, float]], second: list[tuple[str, float]], seed: int
) -> None:
    """Two models of the same seed, driven by different traffic (and a third driven by
    none, asked in reverse time order), agree on the storm at every probed instant."""
    busy, other, idle = (ProviderModel(STORM_WORLD, seed) for _ in range(3))
    _drive(busy, first)
    _drive(other, second)
    for endpoint in ("a", "b"):
        expected = [idle.storm_until(endpoint, t) for t in reversed(PROBES)][::-1]
        assert [busy.storm_until(endpoint, t) for t in PROBES] == expected
        assert [other.storm_until(endpoint, t) for t in PROBES] == expected


def test_storm_probes_see_both_weathers_so_the_cadence_check_is_not_vacuous() -> None:
    model = ProviderModel(STORM_WORLD, 7)
    seen = {model.storm_until("a", t) is None for t in PROBES}
    assert seen == {True, False}


def test_a_storm_marks_the_failures_of_requests_admitted_inside_it() -> None:
    world = _world(
        EndpointProfile(
            id="a",
            capacity=1000,
            latency=ONE_SECOND,
            failures=FailureProfile(
                error_rate=1.0, storm_rate=0.4, storm_duration_s=10.0, storm_error_rate=1.0
            ),
        )
    )
    model = ProviderModel(world, 11)
    marked = set()
    for t in PROBES:
        verdict = model.admit("a", t)
        model.finish("a")
        assert verdict.failure is not None
        stormy = model.storm_until("a", t) is not None
        assert ("(storm)" in verdict.reason) == stormy
        marked.add(stormy)
    assert marked == {True, False}


def test_the_storm_interval_is_anchored_to_its_window() -> None:
    """A storm covers its whole window [w·D, (w+1)·D) and ends at the window's end, however
    late in the window it is first asked about; the window is a storm exactly when
    ``Random(f"{seed}:{endpoint}:storm:{w}")`` rolls below ``storm_rate``."""
    duration = STORMY.storm_duration_s
    seed = 20260917
    for asked_first in ("start", "middle", "end"):
        model = ProviderModel(STORM_WORLD, seed)
        stormy_windows = 0
        for w in range(60):
            start, end = w * duration, (w + 1) * duration
            inside = {"start": start, "middle": start + duration / 2, "end": end - 1e-6}
            order = [asked_first, *(k for k in inside if k != asked_first)]
            roll = random.Random(f"{seed}:a:storm:{w}").random()
            expected = end if roll < STORMY.storm_rate else None
            for key in order:
                assert model.storm_until("a", inside[key]) == expected, (w, key)
            stormy_windows += expected is not None
        assert 0 < stormy_windows < 60


def test_storm_rates_of_zero_and_one_mean_never_and_always() -> None:
    never = FailureProfile(storm_rate=0.0, storm_duration_s=30.0)
    always = FailureProfile(storm_rate=1.0, storm_duration_s=30.0)
    model = ProviderModel(
        _world(
            EndpointProfile(id="calm", failures=never), EndpointProfile(id="dead", failures=always)
        ),
        3,
    )
    for t in PROBES:
        assert model.storm_until("calm", t) is None
        assert model.storm_until("dead", t) == (math.floor(t / 30.0) + 1) * 30.0


# ------------------------------------------------------------- common random numbers

CRN_WORLD = _world(
    EndpointProfile(
        id="x",
        capacity=3,
        failures=FailureProfile(error_rate=0.2, storm_rate=0.3, storm_duration_s=5.0),
        rate_limit=RateLimitProfile(per_window=60.0, window_s=60.0, burst=4.0),
    ),
    EndpointProfile(id="y", capacity=2, failures=FailureProfile(error_rate=0.1)),
)

traffic = st.lists(
    st.tuples(st.sampled_from(["x", "y"]), st.floats(0.0, 5.0), st.booleans()), max_size=50
)


def _play(model: ProviderModel, events: list[tuple[str, float, bool]]) -> dict:
    """Send ``events`` (endpoint, gap, finish?) at increasing times; a request that is not
    finished keeps its unit of capacity, so later ones are refused (429) instead."""
    seen: dict[tuple[str, int], tuple[float, ...]] = {}
    now = 0.0
    for endpoint, gap, finish in events:
        now += gap
        verdict = model.admit(endpoint, now, key=now)
        assert (endpoint, verdict.ordinal) not in seen
        seen[(endpoint, verdict.ordinal)] = verdict.draws
        if finish and not verdict.refused:
            model.finish(endpoint)
    return seen


@settings(max_examples=80)
@given(first=traffic, second=traffic, seed=st.integers(0, 2**31))
def test_each_request_sees_the_world_by_its_ordinal_whatever_the_timing(
    first: list[tuple[str, float, bool]], second: list[tuple[str, float, bool]], seed: int
) -> None:
    """Whatever the timing, order and outcome (admitted, refused, failed), request ordinal
    n at an endpoint rolls draws [5n, 5n+5) of that endpoint's stream: the same dice in
    any two runs that reach it."""
    a = _play(ProviderModel(CRN_WORLD, seed), first)
    b = _play(ProviderModel(CRN_WORLD, seed), second)
    for endpoint in ("x", "y"):
        count = max([n + 1 for (e, n) in (*a, *b) if e == endpoint], default=0)
        reference = _reference_draws(seed, endpoint, count)
        for run in (a, b):
            ordinals = sorted(n for (e, n) in run if e == endpoint)
            assert ordinals == list(range(len(ordinals)))  # refusals count too
            for n in ordinals:
                assert run[(endpoint, n)] == reference[n]


def test_ordinals_are_counted_per_endpoint_and_refusals_consume_their_dice() -> None:
    model = ProviderModel(CRN_WORLD, 5)
    verdicts = [model.admit("y", 0.0) for _ in range(4)]  # capacity 2, nothing finishes
    assert [v.refused for v in verdicts] == [False, False, True, True]
    assert [v.ordinal for v in verdicts] == [0, 1, 2, 3]
    assert [v.draws for v in verdicts] == _reference_draws(5, "y", 4)
    assert model.admit("x", 0.0).ordinal == 0
    assert model.requests_at("y") == 4
    assert model.requests_at("x") == 1


# -------------------------------------------------------- what the client is shown


def _refused(seconds: float) -> Verdict:
    return Verdict("e", 0, True, seconds, None, "over capacity", 0.0, False, (0.0,) * 5)


def test_failures_look_like_provider_errors_the_framework_can_classify() -> None:
    world = _world(
        EndpointProfile(
            id="broken",
            capacity=1000,
            latency=ONE_SECOND,
            failures=FailureProfile(error_rate=1.0, storm_rate=0.0),
        ),
        EndpointProfile(
            id="limited",
            capacity=1000,
            failures=CALM,
            rate_limit=RateLimitProfile(burst=1.0, retry_after_s=None),
        ),
        EndpointProfile(id="tiny", capacity=1, failures=CALM),
        EndpointProfile(id="down", capacity=5, failures=CALM),
        outages=(Outage(start_s=0.0, duration_s=10.0, endpoints=("down",)),),
        busy_retry_after_s=0.75,
    )
    model = ProviderModel(world, 1)
    kinds: Counter[str] = Counter()
    for i in range(300):
        verdict = model.admit("broken", float(i))
        model.finish("broken")
        error = verdict.error()
        assert verdict.failure is not None
        assert error is not None
        assert error_class_of(error) == verdict.failure
        kinds[verdict.failure] += 1
        if verdict.failure == "upstream":
            assert isinstance(error, ProviderError)
            assert error.status_code == 503
        elif verdict.failure == "connection":
            assert isinstance(error, ConnectionError)
        else:
            assert isinstance(error, TimeoutError)
    assert set(kinds) == {"upstream", "connection", "timeout"}

    # 429s: over capacity (busy_retry_after_s) and an empty bucket (when the next token is due)
    assert model.admit("tiny", 0.0).error() is None
    busy = model.admit("tiny", 0.0)
    assert model.admit("limited", 0.0).error() is None
    empty = model.admit("limited", 0.0)
    for verdict, seconds in ((busy, 0.75), (empty, None)):
        assert verdict.refused
        error = verdict.error()
        assert isinstance(error, ProviderError)
        assert error.status_code == 429
        assert error_class_of(error) == "rate_limit"
        assert retry_after_of(error) == verdict.seconds
        if seconds is not None:
            assert verdict.seconds == seconds
        assert float(error.headers["retry-after"]) == pytest.approx(verdict.seconds, abs=1e-3)
    assert empty.seconds > 0

    # an outage fails fast with a connection error; a success is no error at all
    outage = model.admit("down", 1.0)
    assert not outage.refused
    assert outage.failure == "connection"
    assert error_class_of(outage.error()) == "connection"
    assert outage.seconds == Outage(start_s=0.0, duration_s=1.0).fail_after_s
    fine = model.admit("down", 10.0)
    assert fine.failure is None
    assert fine.error() is None


def test_a_verdict_shaped_by_hand_classifies_by_its_retry_after() -> None:
    error = _refused(2.5).error()
    assert error_class_of(error) == "rate_limit"
    assert retry_after_of(error) == 2.5


def test_the_harness_counts_the_classes_error_class_of_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every verdict the harness's provider hands out is recorded; the error classes the
    run reports are exactly ``error_class_of`` of the exceptions those verdicts raise."""
    verdicts: list[Verdict] = []

    class Recording(ProviderModel):
        def admit(self, endpoint_id: str, now: float, key: object = None) -> Verdict:
            verdict = super().admit(endpoint_id, now, key)
            verdicts.append(verdict)
            return verdict

    monkeypatch.setattr(harness_module, "ProviderModel", Recording)
    scenario = SCENARIOS["bursty_provider"].with_overrides(jobs=150, horizon_s=30.0)
    result = Harness(scenario, "wait", seed=4).run()
    expected = Counter(
        str(error_class_of(error)) for v in verdicts if (error := v.error()) is not None
    )
    assert dict(result.error_classes) == dict(expected)
    assert {"rate_limit", "upstream"} <= set(expected)  # both paths exercised
    assert sum(expected.values()) < len(verdicts) == result.metrics["requests"]


def test_provider_error_pickles() -> None:
    for original in (
        ProviderError(429, "rate limit exceeded", retry_after=1.5),
        ProviderError(503, "fast-flaky: service unavailable (storm)"),
    ):
        copy = pickle.loads(pickle.dumps(original))
        assert type(copy) is ProviderError
        assert str(copy) == str(original)
        assert copy.status_code == original.status_code
        assert copy.retry_after == original.retry_after
        assert copy.headers == original.headers
        assert error_class_of(copy) == error_class_of(original)
