"""``/metrics`` of ``attack --serve``: counts exact, read back by Prometheus's own parser."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from pyattacker.measure import Attempt, Outcome, RequestRecord
from pyattacker.report import AttackMetrics
from pyattacker.report._metrics import BUCKETS


def parsed(text: str) -> dict[str, Any]:
    """Each family by name: its type, and its samples as ``{(name, labels): value}``."""
    out = {}
    for family in text_string_to_metric_families(text):
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        out[family.name] = (family.type, samples)
    return out


def record(n: int, outcome: Outcome, *, status: int | None = 200, took: float = 0.01,
           error_class: str | None = None, attempts: int = 1,
           first_token: float | None = None) -> RequestRecord:  # fmt: skip
    answered = outcome in (Outcome.OK, Outcome.FAILED, Outcome.THROTTLED)
    tries = [
        Attempt(
            n,
            i + 1,
            scheduled=0.0,
            sent=0.001,
            end=0.001 + took if answered else None,
            outcome=outcome,
            status=status,
            error_class=error_class,
            first_token=first_token,
        )
        for i in range(attempts)
    ]
    return RequestRecord(n, tuple(tries))


def test_counts_by_outcome_status_and_error_class_are_those_of_the_last_attempt() -> None:
    metrics = AttackMetrics()
    metrics.add(record(1, Outcome.OK))
    metrics.add(record(2, Outcome.FAILED, status=500, error_class="upstream", attempts=3))
    metrics.add(record(3, Outcome.THROTTLED, status=429, error_class="rate_limit"))
    metrics.add(record(4, Outcome.DROPPED, status=None))
    families = parsed(metrics.exposition(in_flight=7))
    kind, requests = families["pyattacker_requests"]
    assert kind == "counter"
    assert requests == {
        ("pyattacker_requests_total", (("outcome", "dropped"),)): 1,
        ("pyattacker_requests_total", (("outcome", "failed"),)): 1,
        ("pyattacker_requests_total", (("outcome", "ok"),)): 1,
        ("pyattacker_requests_total", (("outcome", "throttled"),)): 1,
    }
    assert families["pyattacker_attempts"][1] == {("pyattacker_attempts_total", ()): 6}
    statuses = {dict(k[1])["status"]: v for k, v in families["pyattacker_responses"][1].items()}
    assert statuses == {"200": 1, "429": 1, "500": 1}
    errors = {dict(k[1])["class"]: v for k, v in families["pyattacker_errors"][1].items()}
    assert errors == {"rate_limit": 1, "upstream": 1}
    assert families["pyattacker_in_flight"] == ("gauge", {("pyattacker_in_flight", ()): 7})


def test_only_answered_requests_enter_the_latency_histograms() -> None:
    metrics = AttackMetrics()
    metrics.add(record(1, Outcome.OK, took=0.02))
    metrics.add(record(2, Outcome.DROPPED, status=None))
    kind, samples = parsed(metrics.exposition())["pyattacker_latency_seconds"]
    assert kind == "histogram"
    for clock in ("scheduled", "sent"):
        assert samples[("pyattacker_latency_seconds_count", (("clock", clock),))] == 1
    assert "pyattacker_in_flight" not in parsed(metrics.exposition())


def test_a_value_on_a_bucket_bound_counts_in_that_bucket() -> None:
    metrics = AttackMetrics()
    hist = metrics.latency["scheduled"]
    for value in (0.01, 0.025, 0.0250001):
        hist.observe(value)
    samples = parsed(metrics.exposition())["pyattacker_latency_seconds"][1]

    def le(bound: str) -> float:
        key = (("clock", "scheduled"), ("le", bound))
        return samples[("pyattacker_latency_seconds_bucket", key)]

    assert (le("0.005"), le("0.01"), le("0.025"), le("0.05")) == (0, 1, 2, 3)


def test_ttft_is_a_histogram_of_llm_attacks_only() -> None:
    http, llm = AttackMetrics(), AttackMetrics(llm=True)
    for metrics in (http, llm):
        metrics.add(record(1, Outcome.OK, took=0.5, first_token=0.101))
    assert "pyattacker_ttft_seconds" not in parsed(http.exposition())
    kind, samples = parsed(llm.exposition())["pyattacker_ttft_seconds"]
    assert kind == "histogram"
    assert samples[("pyattacker_ttft_seconds_count", ())] == 1
    assert samples[("pyattacker_ttft_seconds_bucket", (("le", "0.1"),))] == 1  # 0.1 s after sent


def test_an_error_class_with_quotes_and_backslashes_reads_back_unchanged() -> None:
    metrics = AttackMetrics()
    odd = 'a "quoted"\\ class\nwith a newline'
    metrics.add(record(1, Outcome.FAILED, status=None, error_class=odd))
    errors = parsed(metrics.exposition())["pyattacker_errors"][1]
    assert [dict(k[1])["class"] for k in errors] == [odd]


outcomes = st.sampled_from([Outcome.OK, Outcome.FAILED, Outcome.THROTTLED, Outcome.DROPPED])


@given(st.lists(st.tuples(outcomes, st.floats(0, 120), st.sampled_from([200, 404, 503]))))
def test_counts_and_histograms_agree_with_the_records_for_any_mix(
    mix: list[tuple[Outcome, float, int]],
) -> None:
    metrics = AttackMetrics()
    for n, (outcome, took, status) in enumerate(mix):
        metrics.add(record(n, outcome, took=took, status=status))
    families = parsed(metrics.exposition())
    requests = {dict(k[1])["outcome"]: v for k, v in families["pyattacker_requests"][1].items()}
    assert requests == Counter(str(o) for o, _, _ in mix)
    answered = sum(o is not Outcome.DROPPED for o, _, _ in mix)
    samples = families["pyattacker_latency_seconds"][1]
    clock = (("clock", "sent"),)
    assert samples[("pyattacker_latency_seconds_count", clock)] == answered
    cumulative = [
        samples[("pyattacker_latency_seconds_bucket", (("clock", "sent"), ("le", le)))]
        for le in [repr(b) for b in BUCKETS] + ["+Inf"]
    ]
    assert cumulative == sorted(cumulative)
    assert cumulative[-1] == answered


def test_each_targets_leases_are_gauges_of_held_and_most() -> None:
    text = AttackMetrics().exposition(
        in_flight=3, leases=(("http://a/", 2, 8), ('b "quoted"', 1, 4))
    )
    families = parsed(text)
    kind, held = families["pyattacker_leases_active"]
    assert kind == "gauge"
    assert held == {
        ("pyattacker_leases_active", (("target", "http://a/"),)): 2.0,
        ("pyattacker_leases_active", (("target", 'b "quoted"'),)): 1.0,
    }
    kind, most = families["pyattacker_lease_capacity"]
    assert kind == "gauge"
    assert set(most.values()) == {8.0, 4.0}
    assert "pyattacker_leases_active" not in parsed(AttackMetrics().exposition(in_flight=0))
