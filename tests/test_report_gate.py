"""The gate: thresholds judged on a finished attack and on live snapshots, goodput counted
per request, the report sections and the exit codes; exactly at the bounds.

Runs are built by hand from records with binary-fraction timestamps, so every figure the
histograms report is exact (every sample of a distribution is the same value, or the
percentile is an extreme).
"""

from __future__ import annotations

import json
import pickle
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_helpers import streamed_attempt
from pyattacker.attack import AttackPlan, AttackResult, LlmSpec, OpenModel, Progress
from pyattacker.errors import ConfigError
from pyattacker.llm import SyntheticPrompts
from pyattacker.measure import Attempt, Outcome, RequestRecord, RequestStats
from pyattacker.report import EXIT_BREACHED, Gate, parse_threshold
from pyattacker.report._goodput import GoodputCounter, figures_of, parse_slos

URL = "http://127.0.0.1:9/"


def plain(request: int, latency: float, *, outcome: Outcome = Outcome.OK) -> RequestRecord:
    """A one-attempt HTTP request scheduled at 0 (so its latency is exactly ``latency``),
    sent on time."""
    at = 0.0
    status = {Outcome.OK: 200, Outcome.THROTTLED: 429}.get(outcome, 500)
    return RequestRecord.from_attempts(
        [Attempt(request, 1, at, sent=at, end=at + latency, outcome=outcome, status=status)]
    )


def result_of(
    records: list[RequestRecord], *, llm: bool = False, span: float = 10.0
) -> AttackResult:
    spec = LlmSpec("m", SyntheticPrompts.from_shape("10:4")) if llm else None
    plan = AttackPlan.build([URL], OpenModel(rate=1.0), duration=span, llm=spec)
    stats = RequestStats()
    for record in records:
        stats.add(record)
    return AttackResult(
        plan=plan,
        started_at=0.0,
        schedule_s=span,
        elapsed=span,
        send_span_s=span,
        scheduled=len(records),
        sent=len(records),
        late=0,
        total=stats,
    )


def gate(*texts: str) -> Gate:
    return Gate.from_flags(texts, None, False, llm=False)


def progress(**fields: float | int | None) -> Progress:
    names = "planned scheduled sent completed in_flight dropped failed throttled"
    base: dict[str, float | int | None] = dict.fromkeys(names.split(), 0)
    base.update(elapsed=1.0, planned=None)
    base.update(dict.fromkeys(["latency_p50", "latency_p99", "service_p50", "service_p99"]))
    base.update(fields)
    return Progress(**base)  # type: ignore[arg-type]


@given(st.sampled_from([0.25, 0.1, 0.003, 1.5]), st.sampled_from(["p50", "p95", "p99", "max"]))
def test_a_percentile_equal_to_its_bound_passes_le_and_fails_lt(seconds: float, stat: str) -> None:
    result = result_of([plain(i, seconds) for i in range(20)])
    ms = f"{Fraction(str(seconds)) * 1000}ms"
    inclusive = gate(f"{stat}(latency) <= {ms}", f"{stat}(service_time) >= {ms}")
    strict = gate(f"{stat}(latency) < {ms}", f"{stat}(service_time) > {ms}")
    assert [v.passed for v in inclusive.verdicts(result)] == [True, True]
    assert [v.passed for v in strict.verdicts(result)] == [False, False]
    assert [v.value for v in strict.verdicts(result)] == [seconds, seconds]


def test_an_error_rate_of_one_in_a_hundred_is_on_a_one_percent_bound() -> None:
    records = [plain(i, 0.5) for i in range(99)] + [plain(99, 0.5, outcome=Outcome.FAILED)]
    result = result_of(records, span=100.0)
    (le,) = gate("error_rate <= 1%").verdicts(result)
    (lt,) = gate("error_rate < 1%").verdicts(result)
    assert (le.value, le.passed, lt.passed) == (Fraction(1, 100), True, False)


def test_throttled_rate_counts_requests_that_ended_throttled() -> None:
    records = [plain(0, 0.5), plain(1, 0.5, outcome=Outcome.THROTTLED)]
    (verdict,) = gate("throttled_rate <= 50%").verdicts(result_of(records))
    assert (verdict.value, verdict.passed) == (Fraction(1, 2), True)


def test_the_achieved_rate_is_judged_against_a_rate_bound() -> None:
    result = result_of([plain(i, 0.5) for i in range(8)], span=8.0)  # 8 sent in 8 s
    assert [v.passed for v in gate("rate >= 1/s", "rate > 60/m").verdicts(result)] == [True, False]


def test_nothing_to_judge_is_a_breach() -> None:
    result = result_of([])
    g = gate("p95(latency) < 1s")
    (verdict,) = g.verdicts(result)
    assert (verdict.value, verdict.passed) == (None, False)
    assert g.exit_code(result, output_failed=False) == EXIT_BREACHED


def test_exit_codes_with_thresholds() -> None:
    failing = result_of([plain(0, 0.5), plain(1, 0.5, outcome=Outcome.FAILED)])
    assert gate("error_rate <= 50%").exit_code(failing, output_failed=False) == 0
    assert gate("error_rate <= 50%").exit_code(failing, output_failed=True) == 1
    assert gate("error_rate < 50%").exit_code(failing, output_failed=False) == EXIT_BREACHED
    failing.stop_reason = "interrupted"
    assert gate("error_rate <= 50%").exit_code(failing, output_failed=False) == 130


def test_a_live_breach_stops_the_attack_once_and_is_reported() -> None:
    g = Gate(
        [parse_threshold("p99(latency) < 250ms"), parse_threshold("rate >= 1000/s")],
        abort_on_fail=True,
    )
    watch = g.on_progress(None)
    assert watch is not None
    assert watch(progress(elapsed=0.5)) is None  # nothing measured yet: nothing judged
    # rate is not judged live, p99 is under its bound
    assert watch(progress(elapsed=1.0, completed=10, latency_p99=0.25 - 2**-20)) is None
    reason = "threshold breached: p99(latency) < 250ms"
    assert watch(progress(elapsed=1.5, completed=20, latency_p99=0.25)) == reason
    assert watch(progress(elapsed=2.0, completed=30, latency_p99=0.5)) == reason
    assert g.breach is not None
    assert (g.breach.elapsed_s, g.breach.verdict.value) == (1.5, 0.25)
    result = result_of([plain(i, 0.125) for i in range(4)])
    result.stop_reason = reason
    assert g.exit_code(result, output_failed=False) == EXIT_BREACHED
    section = g.sections(result)["thresholds"]
    assert section["aborted"] == {
        "threshold": "p99(latency) < 250ms",
        "value": 0.25,
        "elapsed_s": 1.5,
    }
    assert section["passed"] is False
    assert "aborted by --abort-on-fail at 1.5s" in g.text(result, "REPORT")


def test_a_live_error_rate_counts_failed_throttled_and_dropped() -> None:
    g = Gate([parse_threshold("error_rate <= 30%")], abort_on_fail=True)
    assert g.judge_live(progress(completed=10, failed=1, throttled=1, dropped=1)) is None
    breach = g.judge_live(progress(completed=10, failed=2, throttled=1, dropped=1))
    assert breach is not None
    assert breach.verdict.value == Fraction(4, 10)


def test_the_json_report_gains_a_thresholds_section_and_keeps_the_rest() -> None:
    result = result_of([plain(i, 0.125) for i in range(4)])
    g = gate("p50(latency) <= 125ms", "error_rate < 1%")
    data = json.loads(g.json(result, json.dumps({"summary": {"sent": 4}})))
    assert data["summary"] == {"sent": 4}
    assert data["thresholds"]["passed"] is True
    assert [r["value"] for r in data["thresholds"]["results"]] == [0.125, 0.0]
    assert [r["live"] for r in data["thresholds"]["results"]] == [True, True]
    assert gate().json(result, "{}") == "{}"


@pytest.mark.parametrize(
    ("thresholds", "goodput", "abort", "llm", "field"),
    [
        (["p99(ttft) < 1s"], None, False, False, "--threshold"),
        (["goodput >= 90%"], None, False, True, "--threshold"),
        ([], "ttft<1s", False, False, "--goodput"),
        ([], None, True, False, "--abort-on-fail"),
        ([], "speed<1s", False, True, "--goodput"),
        ([], "ttft<1s,ttft<2s", False, True, "--goodput"),
        ([], "ttft<1", False, True, "--goodput"),
        ([], "ttft", False, True, "--goodput"),
    ],
)
def test_flags_that_cannot_work_are_refused_naming_the_flag(
    thresholds: list[str], goodput: str | None, abort: bool, llm: bool, field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Gate.from_flags(thresholds, goodput, abort, llm=llm)
    assert caught.value.field == field


def test_goodput_figures_are_the_reports_ttft_tpot_and_e2e() -> None:
    # sent 0.125, first token 0.625, chunks 0.75, 1.0, 1.5, end 1.625; 4 tokens by usage
    record = RequestRecord.from_attempts([streamed_attempt(usage={"completion_tokens": 4})])
    assert figures_of(record) == {"ttft": 0.5, "tpot": 1.0 / 3, "e2e": 1.5}
    chunks_only = RequestRecord.from_attempts([streamed_attempt(chunks=(0.75, 1.125))])
    assert figures_of(chunks_only)["tpot"] == 0.5  # (1.625 - 0.625) / (3 - 1)


def test_a_request_is_good_only_if_ok_and_within_every_slo_at_the_bound() -> None:
    counter = GoodputCounter(parse_slos("ttft<=500ms,e2e<1.5s"))
    counter.add(RequestRecord.from_attempts([streamed_attempt(0, end=1.5)]))  # e2e 1.375: good
    counter.add(RequestRecord.from_attempts([streamed_attempt(1)]))  # e2e exactly 1.5: missed
    counter.add(RequestRecord.from_attempts([streamed_attempt(2, outcome=Outcome.FAILED)]))
    counter.add(RequestRecord.from_attempts([streamed_attempt(3, first=0.75, end=1.0)]))  # ttft
    assert (counter.requests, counter.good, counter.not_ok) == (4, 1, 1)
    assert counter.share() == Fraction(1, 4)
    assert counter.share(dropped=4) == Fraction(1, 8)  # dropped arrivals are not good
    summary = counter.summary(2.0)
    assert summary["missed"] == {"ttft <= 500ms": 1, "e2e < 1.5s": 1}
    assert (summary["share"], summary["rate_per_s"]) == (0.25, 0.5)


def test_an_answer_without_the_figure_is_not_good() -> None:
    counter = GoodputCounter(parse_slos("ttft<10s"))
    whole = Attempt(0, 1, 0.0, sent=0.0, end=0.5, outcome=Outcome.OK, status=200)
    counter.add(RequestRecord.from_attempts([whole]))
    assert counter.good == 0


def test_goodput_thresholds_and_the_reports_goodput_section() -> None:
    g = Gate.from_flags(["goodput >= 50%", "goodput_rate >= 0.2/s"], "ttft<1s", False, llm=True)
    on_record = g.on_record(None)
    assert on_record is not None
    records = [RequestRecord.from_attempts([streamed_attempt(i, at=float(i))]) for i in range(2)]
    records.append(RequestRecord.from_attempts([streamed_attempt(2, at=2.0, first=2.0, end=2.5)]))
    for record in records:
        on_record(record)
    result = result_of(records, llm=True, span=10.0)
    assert [(v.value, v.passed) for v in g.verdicts(result)] == [
        (Fraction(2, 3), True),
        (0.2, True),
    ]
    section = g.sections(result)["goodput"]
    assert (section["good"], section["requests"], section["span_s"]) == (2, 3, 10.0)
    assert "Goodput (ttft < 1s)" in g.text(result, "REPORT")


def test_on_record_chains_the_callback_it_wraps() -> None:
    seen: list[int] = []
    g = Gate.from_flags([], "e2e<1s", False, llm=True)
    chained = g.on_record(lambda r: seen.append(r.request))
    assert chained is not None
    chained(plain(7, 0.5))
    assert seen == [7]
    assert g.goodput is not None
    assert g.goodput.good == 1
    assert gate().on_record(None) is None
    assert gate().on_progress(None) is None


@given(
    st.integers(min_value=1, max_value=10**6),
    st.sampled_from(["ms", "s", "us"]),
    st.sampled_from(["<", "<=", ">", ">="]),
)
def test_an_slo_is_met_exactly_as_its_operator_says_at_the_bound(
    number: int, unit: str, op: str
) -> None:
    (slo,) = parse_slos(f"ttft{op}{number}{unit}")
    at = float(slo.bound)
    record = RequestRecord.from_attempts(
        [Attempt(0, 1, 0.0, sent=0.0, first_token=at, end=at, outcome=Outcome.OK, status=200)]
    )
    assert figures_of(record)["ttft"] == at
    assert slo.met(at) is (op in ("<=", ">="))
    counter = GoodputCounter((slo,))
    counter.add(record)
    assert counter.good == (op in ("<=", ">="))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # the worker that counted it
            st.sampled_from([0.25, 0.5, 0.625, 1.0]),  # first token
            st.sampled_from([1.0, 1.5, 1.625, 3.0]),  # end
            st.sampled_from([Outcome.OK] * 3 + [Outcome.FAILED, Outcome.THROTTLED]),
        ),
        max_size=40,
    )
)
def test_goodput_counted_by_workers_and_gathered_equals_one_counters(
    found: list[tuple[int, float, float, Outcome]],
) -> None:
    slos = parse_slos("ttft<=625ms,tpot<500ms,e2e<1.625s")
    whole, driver = GoodputCounter(slos), GoodputCounter(slos)
    parts = [driver.open(index) for index in range(4)]  # each in its worker
    for n, (worker, first, end, outcome) in enumerate(found):
        record = RequestRecord.from_attempts(
            [streamed_attempt(n, first=first, end=end, outcome=outcome)]
        )
        whole.add(record)
        parts[worker].add(record)
    words = [pickle.loads(pickle.dumps(p.part(final=True))) for p in parts]  # as sent
    driver.gather([*words, None], lost=[4])  # a fifth worker lost before it said anything
    assert driver.summary(2.0, dropped=1) == whole.summary(2.0, dropped=1)
