"""Load models: arrival times are the inverse of the planned cumulative rate."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import AttackPlan, ClosedModel, OpenModel, Stage
from pyattacker.attack._load import CLUSTER_S, _Segment, share_below
from pyattacker.attack._workers import arrival_run
from pyattacker.errors import ConfigError

A = "http://127.0.0.1:9/"


def test_a_constant_rate_spaces_arrivals_exactly_one_period_apart_from_zero() -> None:
    assert list(OpenModel(rate=4).arrivals(duration=1.0)) == [0.0, 0.25, 0.5, 0.75]


@given(
    rate=st.floats(min_value=0.5, max_value=5_000),
    duration=st.floats(min_value=0.01, max_value=5.0),
)
def test_a_constant_rate_plans_ceil_of_rate_times_duration_arrivals(
    rate: float, duration: float
) -> None:
    arrivals = list(OpenModel(rate=rate).arrivals(duration=duration))
    expected = [k / rate for k in range(math.ceil(rate * duration)) if k / rate < duration]
    assert arrivals == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_a_ramp_from_zero_places_arrival_k_where_the_cumulative_rate_reaches_k() -> None:
    # rate(t) = 2t over 2 s, so Λ(t) = t² and arrival k is at √k.
    arrivals = list(OpenModel(stages=(Stage(2.0, 4.0),)).arrivals())
    assert arrivals == pytest.approx([0.0, 1.0, math.sqrt(2), math.sqrt(3)])


stage_lists = st.lists(
    st.tuples(st.floats(0.05, 5.0), st.floats(0.0, 400.0)), min_size=1, max_size=4
).filter(lambda pairs: sum(d * r for d, r in pairs) > 1)


@given(pairs=stage_lists, start=st.floats(0.0, 400.0))
def test_stages_are_non_decreasing_inside_the_plan_and_count_the_planned_intensity(
    pairs: list[tuple[float, float]], start: float
) -> None:
    model = OpenModel(rate=start, stages=tuple(Stage(d, r) for d, r in pairs))
    arrivals = list(model.arrivals())
    assert arrivals == sorted(arrivals)
    assert model.duration is not None
    assert all(0 <= t < model.duration for t in arrivals)
    # Evenly spaced: arrival k at Λ⁻¹(k), so the count is ⌈Λ(end)⌉ up to float rounding.
    assert abs(len(arrivals) - model.planned()) <= 1.0 + 1e-6 * model.planned()


@given(pairs=stage_lists, t=st.floats(0.0, 25.0))
def test_rate_at_is_linear_between_stage_targets(
    pairs: list[tuple[float, float]], t: float
) -> None:
    model = OpenModel(rate=0.0, stages=tuple(Stage(d, r) for d, r in pairs))
    rates = [model.rate_at(t)] + [r for _, r in pairs]
    assert min(0.0, *rates[1:]) <= rates[0] <= max(0.0, *rates[1:])


def test_poisson_arrivals_are_reproducible_from_the_seed_and_average_the_rate() -> None:
    model = OpenModel(rate=200, arrival="poisson")
    first = list(model.arrivals(seed=3, duration=50))
    assert first == list(model.arrivals(seed=3, duration=50))
    assert first != list(model.arrivals(seed=4, duration=50))
    # 10,000 expected; a Poisson count's standard deviation is 100: 5 sigma either way.
    assert abs(len(first) - 10_000) < 500
    gaps = [b - a for a, b in itertools.pairwise(first)]
    assert sum(gaps) / len(gaps) == pytest.approx(1 / 200, rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": 0}, "rate"),
        ({"rate": -1}, "rate"),
        ({"rate": math.nan}, "rate"),
        ({"rate": 10, "arrival": "bursty"}, "arrival"),
        ({"rate": 10, "max_in_flight": 0}, "max_in_flight"),
        ({"stages": (Stage(1.0, 0.0),)}, "stages"),
    ],
)
def test_bad_open_models_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        OpenModel(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_a_stage_needs_a_positive_duration_and_a_rate_of_at_least_zero() -> None:
    with pytest.raises(ConfigError, match=r"stages\.duration"):
        Stage(0.0, 10.0)
    with pytest.raises(ConfigError, match=r"stages\.rate"):
        Stage(1.0, -5.0)


def test_a_closed_model_needs_at_least_one_client_and_no_negative_think_time() -> None:
    assert ClosedModel(clients=3).think_time == 0.0
    with pytest.raises(ConfigError, match="clients"):
        ClosedModel(clients=0)
    with pytest.raises(ConfigError, match="think_time"):
        ClosedModel(clients=1, think_time=-1.0)


@given(
    st.floats(1e-3, 1e7),
    st.floats(0.0, 1e9),
    st.floats(0.0, 1e6),
    st.one_of(st.just(math.inf), st.floats(1e-3, 1e6)),
)
def test_a_constant_segment_inverts_to_the_general_root_bit_for_bit(
    rate: float, u: float, start: float, duration: float
) -> None:
    segment = _Segment(start, duration, rate, rate, 0.0)
    general = 2 * u / (rate + math.sqrt(rate * rate))  # the ramp's root with no slope
    expected = start + min(general, duration) if u > 0 else start
    assert segment.invert(u) == expected


@given(
    rate=st.floats(min_value=0.5, max_value=1e6),
    duration=st.none() | st.floats(min_value=0.0, max_value=0.01),
    requests=st.none() | st.integers(min_value=0, max_value=300),
    workers=st.integers(min_value=1, max_value=9),
    poisson=st.booleans(),
    staged=st.booleans(),
    drawn_run=st.integers(min_value=1, max_value=4),
)
def test_each_workers_numbered_share_is_exactly_its_part_of_the_whole_schedule(
    rate: float,
    duration: float | None,
    requests: int | None,
    workers: int,
    poisson: bool,
    staged: bool,
    drawn_run: int,
) -> None:
    # A constant rate computes its share; every other plan draws all and skips: both must
    # give each worker exactly its arrivals of the one schedule, bit for bit: k mod N ==
    # index, or for Poisson arrivals runs of consecutive ones in turn.
    if duration is None and requests is None:
        requests = 200  # (an open-ended constant rate never ends)
    model = OpenModel(
        rate=rate,
        stages=(Stage(0.005, rate * 2), Stage(0.005, rate)) if staged else (),
        arrival="poisson" if poisson else "constant",
    )
    whole = list(model.numbered(seed=7, duration=duration, requests=requests))
    assert whole == list(
        itertools.islice(enumerate(model.arrivals(seed=7, duration=duration)), requests)
    )
    run = drawn_run if poisson or staged else 1  # evenly spaced at one rate: one by one
    shares = [
        list(
            model.numbered(seed=7, duration=duration, requests=requests, part=(i, workers), run=run)
        )
        for i in range(workers)
    ]
    assert sorted(itertools.chain.from_iterable(shares)) == whole
    for index, share in enumerate(shares):
        assert all((k // run) % workers == index for k, _ in share)
        assert len(share) == share_below(len(whole), (index, workers), run)


def test_poisson_arrivals_go_to_workers_in_runs_of_twenty_milliseconds_at_the_peak_rate() -> None:
    poisson = OpenModel(rate=2_000, arrival="poisson", stages=(Stage(1.0, 8_000),))
    plan = AttackPlan.build([A], poisson, duration=1.0)
    assert poisson.peak_rate == 8_000
    assert arrival_run(plan, 1) == 1
    # 160 arrive in CLUSTER_S at 8,000/s; a quarter of a worker's 128 connections is 32
    assert int(8_000 * CLUSTER_S) == 160
    assert arrival_run(plan, 2) == 32
    assert arrival_run(replace(plan, connections=1024), 2) == 128
    assert arrival_run(replace(plan, connections=4096), 2) == 160
    capped = replace(plan, connections=4096, load=replace(poisson, max_in_flight=200))
    assert arrival_run(capped, 2) == 25  # a quarter of a worker's 100 of max_in_flight
    assert arrival_run(plan, 16) == 256 // 16 // 4  # a quarter of a worker's 16 connections
    assert arrival_run(AttackPlan.build([A], OpenModel(rate=8_000), duration=1.0), 2) == 1
    slow = OpenModel(rate=50, arrival="poisson")
    assert arrival_run(AttackPlan.build([A], slow, duration=1.0), 2) == 1
    assert arrival_run(AttackPlan.build([A], ClosedModel(clients=4), requests=10), 2) == 1
    share = [k for k, _ in poisson.numbered(seed=1, requests=200, part=(1, 2), run=40)]
    assert share == [*range(40, 80), *range(120, 160)]
    with pytest.raises(ValueError, match="one by one"):
        OpenModel(rate=10).numbered(requests=5, part=(0, 2), run=2)


@given(
    first=st.integers(0, 500),
    span=st.integers(0, 500),
    n=st.integers(1, 7),
    run=st.integers(1, 50),
)
def test_each_workers_count_of_a_span_of_arrival_numbers_is_exact_and_they_add_up(
    first: int, span: int, n: int, run: int
) -> None:
    end = first + span
    counts = [share_below(end, (i, n), run) - share_below(first, (i, n), run) for i in range(n)]
    assert counts == [sum((k // run) % n == i for k in range(first, end)) for i in range(n)]
    assert sum(counts) == span
