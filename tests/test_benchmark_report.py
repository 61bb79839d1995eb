"""The benchmark report: the completion gate, the winner rule, and what the renderings say.

Runs are built by hand: every metric defaults to a neutral 1.0 (``jobs_done`` to 1000 and
``leases_active_at_end`` to 0), and a test overrides only the numbers its story is about.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.benchmark._metrics import METRICS
from pyattacker.benchmark._report import (
    COMPLETION_FLOOR,
    SIGNIFICANCE_K,
    TIE_TOLERANCE,
    BenchmarkReport,
    default_algorithms,
)
from pyattacker.benchmark._result import RunResult
from pyattacker.pool import ALGORITHMS
from pyattacker.world import EndpointProfile, Scenario

SCENARIO = Scenario(
    name="t",
    endpoints=(EndpointProfile(id="fast"), EndpointProfile(id="steady")),
    summary="Two endpoints, one of them flaky.",
    problem="Which algorithm copes with refusals?",
)
SEEDS = (101, 102, 103)
GATED = [name for name, m in METRICS.items() if m.requires_comparable_completion]
DIRECTIONAL = [name for name, m in METRICS.items() if m.directional]
FAILOVER_REASON = "one pool gives failover nothing to fail over to"
UNSUITED = dataclasses.replace(SCENARIO, unsuited={"failover": FAILOVER_REASON})

Values = float | Sequence[float]


def metrics(**overrides: float) -> dict[str, float]:
    """Every METRICS key, neutral values, then ``overrides``."""
    values = dict.fromkeys(METRICS, 1.0)
    values.update(jobs_done=1000.0, leases_active_at_end=0.0)
    values.update(overrides)
    return values


def runs_of(
    table: Mapping[str, Mapping[str, Values]], *, scenario: Scenario = SCENARIO, seeds: int = 3
) -> list[RunResult]:
    """One run per (algorithm, seed); a metric given as a list varies by seed."""
    return [
        RunResult(
            scenario.name,
            algorithm,
            seed,
            metrics(**{m: v if isinstance(v, float | int) else v[i] for m, v in given.items()}),
            endpoint_admitted={"fast": 10 * (i + 1), "steady": 5},
        )
        for algorithm, given in table.items()
        for i, seed in enumerate(SEEDS[:seeds])
    ]


def report_of(
    table: Mapping[str, Mapping[str, Values]], *, scenario: Scenario = SCENARIO, seeds: int = 3
) -> BenchmarkReport:
    runs = runs_of(table, scenario=scenario, seeds=seeds)
    return BenchmarkReport(scenario, list(table), SEEDS[:seeds], runs)


def best_value(metric: str) -> float:
    return 1e6 if METRICS[metric].better == "higher" else 0.001


def table_rows(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.split(" ", 1)[0] == name]


def markdown_rows(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"| {name} |")]


# -- the metric table's contract ------------------------------------------------------------


def test_every_quality_row_requires_comparable_completion() -> None:
    ungated = {"jobs_done", "leases_active_at_end"}
    for name, metric in METRICS.items():
        expected = metric.directional and name not in ungated
        assert metric.requires_comparable_completion is expected, name
    assert {"jobs_done", "leases_active_at_end"} <= set(DIRECTIONAL)


def test_the_default_algorithms_are_the_registry_minus_the_unsuited() -> None:
    assert default_algorithms(SCENARIO) == list(ALGORITHMS)
    assert default_algorithms(UNSUITED) == [a for a in ALGORITHMS if a != "failover"]


# -- the completion gate --------------------------------------------------------------------


@pytest.mark.parametrize("metric", GATED)
def test_an_algorithm_that_does_almost_nothing_cannot_win_any_quality_row(metric: str) -> None:
    worse = 0.5 if METRICS[metric].better == "higher" else 2.0
    report = report_of(
        {
            "wait": {"jobs_done": [1000.0, 1010.0, 990.0], metric: [1.0, 1.1, 0.9]},
            "backoff": {"jobs_done": [1005.0, 995.0, 1000.0], metric: [worse, 1.1 * worse, worse]},
            "immediate": {"jobs_done": 2.0, metric: best_value(metric)},
        }
    )
    means = {alg: a.mean for alg, a in report.aggregates()[metric].items()}
    best = (max if METRICS[metric].better == "higher" else min)(means, key=means.__getitem__)
    assert best == "immediate"  # the raw leader, on every seed
    assert report.winners(metric) == ("wait",)
    assert report.excluded_by_completion() == {"immediate": pytest.approx(0.002)}


def test_a_quality_metric_cannot_crown_an_algorithm_that_completed_almost_nothing() -> None:
    # Failing fast is quick: the 7 jobs immediate finished were its fastest ones.
    report = report_of(
        {
            "immediate": {"jobs_done": 7.0, "successful_job_latency_p95_ms": 7755.55},
            "wait": {"jobs_done": 1348.67, "successful_job_latency_p95_ms": [9600.0, 9610, 9600]},
            "sticky": {"jobs_done": 1404.0, "successful_job_latency_p95_ms": [9290.0, 9280, 9295]},
        }
    )
    assert report.winners("successful_job_latency_p95_ms") == ("sticky",)
    assert report.winners("jobs_done") == ("sticky",)  # ungated: immediate competes, and loses
    assert report.completion_ratio("immediate") == pytest.approx(7.0 / 1404.0)
    assert "immediate (0.5%)" in report.render_table()
    assert "immediate: 0.5% of the baseline" in report.render_markdown()
    assert report.to_dict()["excluded_by_completion"] == {"immediate": pytest.approx(0.005, 0.01)}


def test_the_completion_baseline_ignores_an_algorithm_the_scenario_cannot_exercise() -> None:
    table = {
        "wait": {"jobs_done": 1000.0, "refusal_rate": 0.30},
        "backoff": {"jobs_done": 950.0, "refusal_rate": 0.20},
        "failover": {"jobs_done": 5000.0, "refusal_rate": 0.01},
    }
    report = report_of(table, scenario=UNSUITED)
    assert report.completion_baseline() == pytest.approx(1000.0)
    assert report.excluded_by_completion() == {}
    assert report.winners("refusal_rate") == ("backoff",)
    # Had failover set the bar, both algorithms that can be ranked would have been gated out.
    naive = report_of(table)
    assert set(naive.excluded_by_completion()) == {"wait", "backoff"}


def test_exactly_the_floor_is_still_comparable() -> None:
    report = report_of({"wait": {"jobs_done": 1000.0}, "backoff": {"jobs_done": 900.0}})
    assert report.completion_ratio("backoff") == pytest.approx(COMPLETION_FLOOR)
    assert report.excluded_by_completion() == {}


def test_a_run_where_nobody_completed_anything_gates_nobody() -> None:
    report = report_of({"wait": {"jobs_done": 0.0}, "backoff": {"jobs_done": 0.0}})
    assert report.completion_ratio("wait") is None
    assert report.excluded_by_completion() == {}


# -- when a row crowns nobody ---------------------------------------------------------------


def test_one_eligible_contestant_is_not_crowned() -> None:
    metric = "successful_job_latency_p95_ms"
    report = report_of(
        {
            "wait": {"jobs_done": 1000.0, metric: 9000.0},
            "immediate": {"jobs_done": 2.0, metric: 100.0},
        }
    )
    assert report.winners(metric) == ()
    assert report.paired_differences(metric) == {}
    assert report.not_compared()[metric] == "wait"
    assert report.to_dict()["not_compared"][metric] == "wait"
    assert "only wait was eligible" in report.render_markdown()
    assert report.winners("jobs_done") == ("wait",)  # ungated: two contestants, one winner


def test_a_single_algorithm_is_never_crowned() -> None:
    report = report_of({"wait": {}})
    assert all(report.winners(name) == () for name in METRICS)
    assert report.not_compared() == dict.fromkeys(DIRECTIONAL, "wait")


def test_a_metric_that_is_zero_for_everyone_crowns_nobody() -> None:
    report = report_of({"wait": {"cache_hit_rate": 0.0}, "backoff": {"cache_hit_rate": 0.0}})
    for name in ("leases_active_at_end", "cache_hit_rate"):
        assert report.winners(name) == ()
        assert report.paired_differences(name) == {}
        assert name not in report.not_compared()
    assert "every eligible algorithm scored 0" in report.render_markdown()


def test_a_neutral_row_crowns_nobody_however_different_the_numbers() -> None:
    report = report_of({"wait": {"makespan_s": 600.0}, "backoff": {"makespan_s": 8.0}})
    assert all(report.winners(n) == () for n, m in METRICS.items() if not m.directional)
    assert "makespan_s" not in report.to_dict()["paired_differences"]


def test_an_algorithm_the_scenario_cannot_exercise_is_marked_not_ranked() -> None:
    best = {name: best_value(name) for name in DIRECTIONAL}
    report = report_of(
        {
            "wait": {"jobs_done": 1000.0},
            "failover": {**best, "jobs_done": 5000.0},
            "backoff": {"jobs_done": 990.0},
        },
        scenario=UNSUITED,
    )
    table, markdown, document = report.render_table(), report.render_markdown(), report.to_dict()
    for name in METRICS:
        assert "failover" not in report.winners(name)
        assert "failover" not in report.paired_differences(name)
        assert table_rows(table, name)[0].split()[2] == "N/A"
        assert markdown_rows(markdown, name)[0].split(" | ")[3] == "N/A"
        assert document["aggregates"][name]["failover"] is None
    assert "failover" not in report.excluded_by_completion()
    assert FAILOVER_REASON in table
    assert f"**failover** (N/A): {FAILOVER_REASON}" in markdown
    assert document["unsuited"] == {"failover": FAILOVER_REASON}
    assert "| N/A |" in markdown.split("## Admitted requests per endpoint")[1]


# -- ties and the paired guard --------------------------------------------------------------


def test_a_gap_within_the_tie_tolerance_shares_the_mark() -> None:
    # Constant per-seed differences: the paired guard alone would separate all three.
    metric = "successful_job_latency_p50_ms"
    report = report_of(
        {"wait": {metric: 1000.0}, "backoff": {metric: 1009.0}, "sticky": {metric: 1011.0}}
    )
    assert 9.0 <= TIE_TOLERANCE * 1000.0 < 11.0
    assert report.winners(metric) == ("wait", "backoff")


def test_the_leader_comes_first_and_the_sharers_follow_by_mean() -> None:
    metric = "throughput_rps"  # higher is better
    report = report_of(
        {"wait": {metric: 2.000}, "backoff": {metric: 2.015}, "sticky": {metric: 2.020}}
    )
    assert report.winners(metric) == ("sticky", "backoff", "wait")


def test_a_consistent_small_gap_is_separated_and_a_noisy_one_is_not() -> None:
    # The metric moves 4% between seeds; both challengers are 1.3% behind on average.
    metric = "successful_job_latency_p95_ms"
    leader = [1000.0, 1040.0, 960.0]
    consistent = [v + d for v, d in zip(leader, [12.0, 13.0, 14.0], strict=True)]
    noisy = [v + d for v, d in zip(leader, [53.0, -67.0, 53.0], strict=True)]
    report = report_of(
        {"wait": {metric: leader}, "backoff": {metric: consistent}, "sticky": {metric: noisy}}
    )
    paired = report.paired_differences(metric)
    assert paired["backoff"].mean == pytest.approx(13.0)
    assert paired["sticky"].mean == pytest.approx(13.0)
    assert TIE_TOLERANCE * 1000.0 < 13.0  # the tolerance alone would separate both
    consistent_se, noisy_se = paired["backoff"].se, paired["sticky"].se
    assert consistent_se is not None
    assert noisy_se is not None
    assert SIGNIFICANCE_K * consistent_se < 13.0 <= SIGNIFICANCE_K * noisy_se
    assert report.winners(metric) == ("wait", "sticky")


def test_with_one_seed_the_best_mean_wins_alone_unless_within_tolerance() -> None:
    metric = "refusal_rate"
    report = report_of(
        {"wait": {metric: 0.2600}, "backoff": {metric: 0.2610}, "sticky": {metric: 0.2640}},
        seeds=1,
    )
    assert report.winners(metric) == ("wait", "backoff")
    paired = report.paired_differences(metric)["sticky"]
    assert (paired.n, paired.se, paired.ci_low) == (1, None, None)
    assert "n/a (one seed)" in report.render_markdown()
    assert report.aggregates()[metric]["wait"].stdev is None


def test_the_paired_interval_in_the_report_matches_the_hand_computation() -> None:
    metric = "error_rate"
    report = report_of({"wait": {metric: 10.0}, "backoff": {metric: [11.0, 12.0, 14.0]}})
    found = report.paired_differences(metric)
    assert list(found) == ["backoff"]  # the leader is not compared with itself
    half = 4.30265273 * math.sqrt(7.0 / 9.0)  # d = (1, 2, 4), se = sqrt(7/3) / sqrt(3)
    assert found["backoff"].mean == pytest.approx(7.0 / 3.0)
    assert found["backoff"].ci_low == pytest.approx(7.0 / 3.0 - half, abs=1e-7)
    assert found["backoff"].ci_high == pytest.approx(7.0 / 3.0 + half, abs=1e-7)
    entry = report.to_dict()["paired_differences"][metric]["challengers"]["backoff"]
    assert entry["df"] == 2
    assert entry["n"] == 3
    assert entry["se"] == pytest.approx(math.sqrt(7.0 / 9.0))


def test_the_json_paired_row_names_the_leader_the_confidence_and_who_shares_the_mark() -> None:
    metric = "error_rate"  # lower is better
    report = report_of(
        {
            "wait": {metric: 10.0},
            "backoff": {metric: [9.0, 12.0, 15.0]},  # noisy: shares
            "sticky": {metric: [20.0, 20.5, 21.0]},  # consistently worse: does not
        }
    )
    row = json.loads(json.dumps(report.to_dict(), allow_nan=False))["paired_differences"][metric]
    assert row["leader"] == "wait"
    assert row["confidence"] == 0.95
    assert row["seeds"] == list(SEEDS)
    assert {alg: d["shares"] for alg, d in row["challengers"].items()} == {
        "backoff": True,
        "sticky": False,
    }
    assert report.winners(metric) == ("wait", "backoff")


def test_a_json_row_without_a_leader_says_so_with_no_challengers() -> None:
    report = report_of({"wait": {}})
    row = report.to_dict()["paired_differences"]["refusal_rate"]
    assert row == {"leader": None, "confidence": 0.95, "seeds": [], "challengers": {}}


# -- undefined values: a row is ranked on the seeds every candidate shares --------------------


def test_the_leader_is_picked_on_the_seeds_every_candidate_has_a_value_for() -> None:
    # Lower is better; backoff is better on both seeds the two share, and wait's mean over
    # all three only looks better because of the seed backoff has no value on.
    metric = "successful_job_latency_p50_ms"
    report = report_of(
        {"wait": {metric: [10.0, 10.0, 1.0]}, "backoff": {metric: [9.0, 9.0, math.nan]}}
    )
    assert report.aggregates()[metric]["wait"].mean == pytest.approx(7.0)  # the cell: a fact
    assert report.winners(metric) == ("backoff",)
    assert report.ranked_seeds(metric) == SEEDS[:2]
    paired = report.paired_differences(metric)["wait"]
    assert (paired.n, paired.mean) == (2, pytest.approx(1.0))
    assert report.ranked_seeds("refusal_rate") == SEEDS  # other rows keep every seed


def test_a_row_ranked_on_fewer_seeds_than_run_says_so_and_each_cell_gives_its_n() -> None:
    metric = "successful_job_latency_p50_ms"
    report = report_of(
        {"wait": {metric: [10.0, 10.0, 1.0]}, "backoff": {metric: [9.0, 9.0, math.nan]}}
    )
    table, markdown = report.render_table(), report.render_markdown()
    assert table_rows(table, metric)[0].split()[-3:] == ["backoff", "†", "*"]
    assert "† best decided only on the seeds where every candidate has a value (of 3): " in table
    assert f"{metric} (2)" in table
    cells = markdown_rows(markdown, metric)[0].split(" | ")
    assert cells[3].endswith(" n=2")  # backoff's cell
    assert not cells[2].endswith("n=3")  # wait has every seed: no n shown
    assert "Leader: **backoff** (9.00, over 2 of 3 seeds)." in markdown
    assert report.to_dict()["paired_differences"][metric]["seeds"] == list(SEEDS[:2])


def test_candidates_with_no_seed_in_common_crown_nobody() -> None:
    metric = "cache_hit_rate"
    report = report_of(
        {"wait": {metric: [0.9, math.nan, math.nan]}, "backoff": {metric: [math.nan, 0.5, 0.5]}}
    )
    assert report.winners(metric) == ()
    assert report.ranked_seeds(metric) == ()
    assert metric not in report.not_compared()
    assert "no seed with a value in common" in report.render_markdown()


def test_an_algorithm_with_no_value_on_a_row_is_not_a_candidate_there() -> None:
    metric = "cache_hit_rate"
    report = report_of(
        {
            "wait": {metric: math.nan},
            "backoff": {metric: [0.5, 0.6, 0.7]},
            "sticky": {metric: [0.8, 0.9, 0.95]},
        }
    )
    assert report.winners(metric) == ("sticky",)
    assert report.ranked_seeds(metric) == SEEDS  # wait's missing values do not shrink it
    assert "wait" not in report.paired_differences(metric)


@given(
    st.dictionaries(
        st.sampled_from(["immediate", "wait", "backoff", "failover", "sticky"]),
        st.tuples(st.floats(0.0, 2000.0), st.lists(st.floats(0.0, 100.0), min_size=3, max_size=3)),
        min_size=1,
    ),
    st.sampled_from(DIRECTIONAL),
)
def test_the_leader_is_the_best_mean_among_the_comparable_suited_algorithms(
    table: dict[str, tuple[float, list[float]]], metric: str
) -> None:
    report = report_of(
        {alg: {"jobs_done": jobs, metric: vs} for alg, (jobs, vs) in table.items()},
        scenario=UNSUITED,
    )
    winners = report.winners(metric)
    excluded = report.excluded_by_completion() if metric in GATED else {}
    eligible = [a for a in table if a != "failover" and a not in excluded]
    assert not set(winners) - set(eligible)
    if winners:
        means = {a: report.aggregates()[metric][a].mean for a in eligible}
        pick = max if METRICS[metric].better == "higher" else min
        assert means[winners[0]] == pick(means.values())


# -- the report's input contract ------------------------------------------------------------


def test_a_run_missing_a_metric_is_refused_by_name() -> None:
    runs = runs_of({"wait": {}})
    broken = dataclasses.replace(
        runs[0], metrics={k: v for k, v in runs[0].metrics.items() if k != "refusal_rate"}
    )
    with pytest.raises(ValueError, match=r"missing: refusal_rate"):
        BenchmarkReport(SCENARIO, ["wait"], SEEDS, [broken, *runs[1:]])


def test_a_run_with_an_unknown_metric_is_refused_by_name() -> None:
    runs = runs_of({"wait": {}})
    odd = dataclasses.replace(runs[0], metrics={**runs[0].metrics, "vibes": 1.0})
    with pytest.raises(ValueError, match=r"unknown: vibes"):
        BenchmarkReport(SCENARIO, ["wait"], SEEDS, [odd, *runs[1:]])


def test_runs_that_do_not_belong_to_the_report_are_refused() -> None:
    runs = runs_of({"wait": {}})
    with pytest.raises(ValueError, match="appears twice"):
        BenchmarkReport(SCENARIO, ["wait"], SEEDS, [*runs, runs[0]])
    with pytest.raises(ValueError, match="not among"):
        BenchmarkReport(SCENARIO, ["wait"], SEEDS[:2], runs)
    with pytest.raises(ValueError, match="of scenario"):
        BenchmarkReport(dataclasses.replace(SCENARIO, name="other"), ["wait"], SEEDS, runs)
    with pytest.raises(ValueError, match="no run of algorithm"):
        BenchmarkReport(SCENARIO, ["wait", "backoff"], SEEDS, runs)


def test_an_unsuited_algorithm_that_was_not_run_is_still_listed_as_not_ranked() -> None:
    runs = runs_of({"wait": {}}, scenario=UNSUITED)
    report = BenchmarkReport(UNSUITED, ["wait", "failover"], SEEDS, runs)
    assert table_rows(report.render_table(), "jobs_done")[0].split()[2] == "N/A"


def test_an_undefined_value_is_left_out_of_the_aggregate_and_out_of_the_json() -> None:
    metric = "successful_job_latency_p50_ms"
    report = report_of({"wait": {metric: [math.nan, 900.0, 1100.0]}, "backoff": {metric: 950.0}})
    assert report.aggregates()[metric]["wait"].n == 2
    assert report.aggregates()[metric]["wait"].mean == pytest.approx(1000.0)
    document = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert document["runs"][0]["metrics"][metric] is None


# -- the renderings -------------------------------------------------------------------------


def test_the_json_form_is_strict_json_and_carries_the_verdicts() -> None:
    report = report_of(
        {"wait": {"jobs_done": 1000.0}, "immediate": {"jobs_done": 2.0}}, scenario=UNSUITED
    )
    document = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert document["scenario"]["name"] == "t"
    assert document["scenario"]["seeds"] == list(SEEDS)
    assert document["algorithms"] == ["wait", "immediate"]
    assert document["unsuited"] == {}  # failover was not asked for
    assert set(document["metrics"]) == set(METRICS)
    assert document["metrics"]["refusal_rate"]["gated"] is True
    assert document["winners"]["jobs_done"] == ["wait"]
    assert document["excluded_by_completion"] == {"immediate": pytest.approx(0.002)}
    assert document["aggregates"]["jobs_done"]["wait"]["values"] == [1000.0] * 3
    assert len(document["runs"]) == 6


def test_each_metric_is_one_row_of_the_table_and_of_the_markdown() -> None:
    report = report_of({"wait": {"jobs_done": 1000.0}, "immediate": {"jobs_done": 2.0}})
    table, markdown = report.render_table(), report.render_markdown()
    for name in METRICS:
        assert len(table_rows(table, name)) == 1, name
        assert len(markdown_rows(markdown, name)) == 1, name


def test_the_table_says_where_it_ran_and_marks_the_gated_rows() -> None:
    report = report_of(
        {"wait": {"jobs_done": 1348.666, "refusal_rate": 0.26}, "sticky": {"jobs_done": 1404.0}}
    )
    table = report.render_table()
    headline = table.splitlines()[0]
    assert headline.startswith("t ")
    assert "101, 102, 103" in headline
    assert "3,000 jobs x 3 steps x 2 calls" in headline
    expected = ["jobs_done", "1,348.67", "1,404.00", "sticky"]
    assert table_rows(table, "jobs_done")[0].split() == expected
    assert table_rows(table, "refusal_rate")[0].split()[1:] == ["0.2600", "1.0000", "wait", "*"]
    assert table_rows(table, "makespan_s")[0].split()[-1] == "—"


def test_the_markdown_has_the_story_the_spreads_and_the_admissions() -> None:
    report = report_of({"wait": {"jobs_done": [990.0, 1000.0, 1010.0]}, "backoff": {}})
    markdown = report.render_markdown()
    assert markdown.startswith("# Benchmark: t\n")
    assert SCENARIO.summary in markdown
    assert SCENARIO.problem in markdown
    assert "1,000.00 ±10.00 (990.00 .. 1,010.00)" in markdown
    title = "Paired differences against the leader (95% CI, Student t at n-1 degrees of freedom)"
    assert f"## {title}" in markdown
    assert "| fast | 20.00 | 20.00 |" in markdown
    assert "| steady | 5.00 | 5.00 |" in markdown


def test_the_headline_calls_the_summed_run_time_what_it_is() -> None:
    runs = runs_of({"wait": {"wall_s": 2.0}, "backoff": {"wall_s": 0.5}})
    headline = BenchmarkReport(SCENARIO, ["wait", "backoff"], SEEDS, runs).render_table()
    assert headline.splitlines()[0].endswith("· run time 7.50s summed over 6 runs")
    assert "wall" not in headline.splitlines()[0]


def test_markdown_cells_escape_pipes_and_turn_line_breaks_into_spaces() -> None:
    scenario = dataclasses.replace(
        SCENARIO,
        name="odd|name",
        endpoints=(EndpointProfile(id="a|b"), EndpointProfile(id="steady")),
        summary="two lines\nand a | pipe",
        unsuited={"failover": "why\n| not"},
    )
    runs = [
        dataclasses.replace(r, scenario=scenario.name, endpoint_admitted={"a|b": 3, "steady": 1})
        for r in runs_of({"wait": {}, "backoff": {}}, scenario=scenario)
    ]
    report = BenchmarkReport(scenario, ["wait", "backoff", "failover"], SEEDS, runs)
    text = report.render_markdown()
    assert text.startswith("# Benchmark: odd\\|name\n")
    assert "two lines and a \\| pipe" in text
    assert "- **failover** (N/A): why \\| not" in text
    section = text.split("## Admitted requests per endpoint (mean per run)")[1]
    header, _, *rows = section.strip().splitlines()
    assert rows[0] == "| a\\|b | 3.00 | 3.00 | N/A |"
    assert all(row.replace("\\|", "").count("|") == header.count("|") for row in rows)
