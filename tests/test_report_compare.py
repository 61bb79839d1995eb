"""``compare``'s noise judgements on hand-built reports: percentile intervals from the
order statistics, two-proportion and Poisson tests, bench rows paired by seed."""

from __future__ import annotations

import copy
import statistics
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError
from pyattacker.measure import Summary
from pyattacker.report import compare_reports, comparison_text
from pyattacker.report._compare import MIN_TAIL, percentile_interval
from pyattacker.report._compare_means import _variance_bound, mean_interval


def summary(n: int, base: float) -> dict[str, Any]:
    """A latency summary of ``n`` samples spread evenly over [base, 2 base]."""
    levels = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}
    out: dict[str, Any] = {"count": n, "min": base, "max": 2 * base, "mean": 1.5 * base}
    out.update({key: base * (1 + q) for key, q in levels.items()})
    return out


def attack_report(
    *, n: int = 1000, base: float = 0.002, failed: int = 0, sent_span: float = 10.0
) -> dict[str, Any]:
    latency = {"scheduled": summary(n, base), "sent": summary(n, base)}
    outcomes = {"ok": n - failed, **({"failed": failed} if failed else {})}
    return {
        "plan": {"targets": ["http://127.0.0.1:1/"], "load": {"model": "open", "rate": 100.0}},
        "summary": {"sent": n, "sending_span_s": sent_span},
        "total": {"requests": n, "outcomes": outcomes, "latency_s": latency},
    }


def rows(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[bool | None, bool | None]]:
    return {r.figure: (r.significant, r.worse) for r in compare_reports(a, b).rows}


def test_an_identical_report_has_no_significant_difference() -> None:
    report = attack_report()
    comparison = compare_reports(report, copy.deepcopy(report))
    assert [r.significant for r in comparison.rows].count(True) == 0
    assert comparison.regressions == ()


def test_a_tripled_latency_is_a_regression_on_both_clocks() -> None:
    found = rows(attack_report(base=0.002), attack_report(base=0.006))
    assert found["p50(latency)"] == (True, True)
    assert found["p50(service_time)"] == (True, True)
    assert found["rate"] == (False, None)


def test_a_faster_b_is_an_improvement_not_a_regression() -> None:
    comparison = compare_reports(attack_report(base=0.006), attack_report(base=0.002))
    assert comparison.regressions == ()
    assert "p50(latency)" in [r.figure for r in comparison.improvements]


def test_percentiles_with_too_few_samples_beyond_them_are_not_judged() -> None:
    found = rows(attack_report(n=200, base=0.002), attack_report(n=200, base=0.006))
    assert found["p95(latency)"] == (True, True)  # 10 samples beyond p95 of 200
    assert found["p99(latency)"] == (None, None)  # 2 beyond p99: one stall of the machine


@given(st.integers(min_value=20, max_value=10**7), st.sampled_from(["p50", "p90", "p95", "p99"]))
def test_a_percentile_interval_contains_the_percentile_and_is_ordered(n: int, key: str) -> None:
    s = summary(n, 0.001)
    interval = percentile_interval(s, key)
    q = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}[key]
    if min(n * q, n * (1 - q)) < MIN_TAIL:
        assert interval is None
        return
    assert interval is not None
    assert s["min"] <= interval[0] <= s[key] <= interval[1] <= s["max"]


def test_a_percentile_interval_narrows_to_the_neighbouring_percentiles_with_many_samples() -> None:
    # 10 million samples: the 99 % interval of p95 is within (p90, p99) of the report
    s = summary(10**7, 0.001)
    assert percentile_interval(s, "p95") == (s["p90"], s["p99"])
    assert percentile_interval(s, "p50") == (s["min"], s["p90"])  # nothing reported nearer


def test_an_error_rate_rise_is_judged_by_a_two_proportion_test() -> None:
    found = rows(attack_report(n=10_000), attack_report(n=10_000, failed=100))
    assert found["error_rate"] == (True, True)  # 0 of 10,000 against 100 of 10,000
    slight = rows(attack_report(n=10_000, failed=10), attack_report(n=10_000, failed=12))
    assert slight["error_rate"] == (False, None)  # 10 against 12: chance


def test_a_lower_achieved_rate_is_judged_as_poisson_counts() -> None:
    found = rows(attack_report(n=1000, sent_span=10.0), attack_report(n=1000, sent_span=20.0))
    assert found["rate"] == (True, True)  # 100/s against 50/s
    close = rows(attack_report(n=1000, sent_span=10.0), attack_report(n=1000, sent_span=10.2))
    assert close["rate"] == (False, None)


def test_llm_figures_and_goodput_are_compared_when_both_reports_have_them() -> None:
    def llm(base: float, good: int) -> dict[str, Any]:
        report = attack_report(n=1000, base=base)
        report["llm"] = {
            "ttft_s": {"sent": summary(1000, base), "scheduled": summary(1000, base)},
            "tpot_s": summary(1000, base / 10),
            "itl_s": summary(5000, base / 10),
            "e2e_s": {"sent": summary(1000, base * 4), "scheduled": summary(1000, base * 4)},
            "tokens": {"completion": 100_000},
            "per_minute": {"answer_span_s": 10.0},
        }
        report["goodput"] = {"good": good, "requests": 1000}
        return report

    found = rows(llm(0.1, 950), llm(0.3, 600))
    assert found["p50(ttft)"] == (True, True)
    assert found["p50(e2e)"] == (True, True)
    assert found["tokens_per_s"] == (False, None)
    assert found["goodput"] == (True, True)


def test_the_text_names_the_regressions_and_a_difference_of_plans() -> None:
    b = attack_report(base=0.006)
    b["plan"]["load"]["rate"] = 200.0
    text = comparison_text(compare_reports(attack_report(), b), ["a.json", "b.json"])
    assert "A = a.json, B = b.json" in text
    assert "the plans differ in load" in text
    assert "regressions beyond the noise: p50(latency), p90(latency)" in text


def bench_report(values: dict[int, float], *, better: str = "higher") -> dict[str, Any]:
    runs = [
        {"algorithm": "wait", "seed": seed, "metrics": {"jobs_done": value}}
        for seed, value in values.items()
    ]
    return {
        "scenario": {"name": "s", "definition": {"jobs": 40}},
        "algorithms": ["wait"],
        "metrics": {"jobs_done": {"unit": "jobs", "better": better}},
        "aggregates": {},
        "runs": runs,
    }


def test_bench_rows_pair_each_algorithms_metric_by_seed() -> None:
    before = bench_report({0: 40.0, 1: 30.0, 2: 50.0})
    # every seed lost 5 jobs: the seeds' spread is large, the paired one nil
    (row,) = compare_reports(before, bench_report({0: 35.0, 1: 25.0, 2: 45.0})).rows
    assert (row.figure, row.significant, row.worse) == ("jobs_done[wait]", True, True)
    (mixed,) = compare_reports(before, bench_report({0: 35.0, 1: 35.0, 2: 50.0})).rows
    assert mixed.significant is False
    (one,) = compare_reports(bench_report({0: 40.0}), bench_report({0: 35.0})).rows
    assert one.significant is None  # one shared seed: no interval
    (lower,) = compare_reports(
        bench_report({0: 4.0, 1: 3.0}, better="lower"),
        bench_report({0: 2.0, 1: 1.0}, better="lower"),
    ).rows
    assert (lower.significant, lower.worse) == (True, False)


@pytest.mark.parametrize(
    ("a", "b", "field"),
    [
        ([], {}, "A"),
        (attack_report(), {"runs": []}, "B"),
        (attack_report(), bench_report({0: 1.0}), "B"),
        ({"summary": {}, "total": {}, "plan": {}}, attack_report(), "A/B"),
    ],
)
def test_what_is_not_a_pair_of_reports_is_a_config_error_naming_it(
    a: Any, b: Any, field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        compare_reports(a, b)
    assert caught.value.field == field


@given(st.lists(st.floats(min_value=0.0, max_value=10.0), min_size=1, max_size=300))
def test_the_variance_bound_from_the_percentiles_is_never_below_the_true_variance(
    values: list[float],
) -> None:
    s = Summary.of_values(values).to_dict()
    s["mean"] = statistics.fmean(values)
    true = statistics.pvariance(values)
    assert _variance_bound(s) >= true - 1e-9 * max(1.0, max(values) ** 2)


def test_bursty_windows_widen_the_interval_of_the_mean() -> None:
    s = summary(1000, 0.002)
    steady = [{"count": 100, "mean": s["mean"]} for _ in range(10)]
    bursty = [{"count": 100, "mean": s["mean"] * (3 if i == 0 else 0.78)} for i in range(10)]
    calm, burst = mean_interval(s, steady), mean_interval(s, bursty)
    assert calm is not None
    assert burst is not None
    assert burst[1] - burst[0] > 2 * (calm[1] - calm[0])
    assert calm == mean_interval(s, [])  # no windows: only the within-run bound
