"""The LLM section of the attack report: JSON, Markdown and text, from a hand-built run.

Three requests with exact binary-fraction timestamps, 30 s windows over a 60 s schedule:

* 0 — one attempt at 0: sent 0.125, first token 0.625, chunks 0.75, 1.0, 1.5, end 1.625;
  usage 500 + 100 tokens; utilisation 40 %.
* 1 — refused at 10 (sent 10.25, 429, utilisation 100 %), retried at 11.5: sent 11.75,
  first token 12.25, chunk 12.5, end 12.75; usage 300 + 20; utilisation 60 %.
* 2 — one attempt at 40: sent 40.125, first token 40.375, chunk 40.5, cut at 40.625
  (FAILED, no usage).
"""

from __future__ import annotations

import json
from typing import Any

from pyattacker.attack import AttackPlan, AttackResult, OpenModel
from pyattacker.measure import (
    Attempt,
    Histogram,
    Outcome,
    RequestRecord,
    RequestStats,
    WindowSeries,
)
from pyattacker.report import attack_json, attack_markdown, attack_text

URL = "http://127.0.0.1:9/v1/chat/completions"
UTILISATION = "azure-openai-deployment-utilization"


def summary(*values: float) -> dict[str, Any]:
    hist = Histogram()
    for v in values:
        hist.record(v)
    return hist.summary().to_dict()


def streamed(
    request: int,
    attempt: int,
    at: float,
    times: tuple[float, float, tuple[float, ...], float],
    *,
    usage: tuple[float, float] | None = None,
    outcome: Outcome = Outcome.OK,
    utilisation: str | None = None,
) -> Attempt:
    sent, first, chunks, end = times
    return Attempt(
        request,
        attempt,
        scheduled=at,
        sent=at + sent,
        first_byte=at + sent + 0.0625,
        first_token=at + first,
        token_times=[at + t for t in chunks],
        end=at + end,
        outcome=outcome,
        status=200 if outcome is Outcome.OK else None,
        usage=None
        if usage is None
        else {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        headers=None if utilisation is None else {UTILISATION: utilisation},
    )


def refused(request: int, at: float) -> Attempt:
    return Attempt(
        request,
        1,
        scheduled=at,
        sent=at + 0.25,
        first_byte=at + 0.5,
        end=at + 0.5,
        outcome=Outcome.THROTTLED,
        status=429,
        error_class="rate_limit",
        headers={UTILISATION: "100%"},
    )


def llm_records() -> list[RequestRecord]:
    return [
        RequestRecord.from_attempts(
            [
                streamed(
                    0,
                    1,
                    0.0,
                    (0.125, 0.625, (0.75, 1.0, 1.5), 1.625),
                    usage=(500, 100),
                    utilisation="40%",
                )
            ]
        ),
        RequestRecord.from_attempts(
            [
                refused(1, 10.0),
                streamed(
                    1, 2, 11.5, (0.25, 0.75, (1.0,), 1.25), usage=(300, 20), utilisation="60%"
                ),
            ]
        ),
        RequestRecord.from_attempts(
            [streamed(2, 1, 40.0, (0.125, 0.375, (0.5,), 0.625), outcome=Outcome.FAILED)]
        ),
    ]


def result_of(records: list[RequestRecord], in_flight: tuple[int, ...]) -> AttackResult:
    plan = AttackPlan.build([URL], OpenModel(rate=0.05), duration=60.0, window=30.0)
    stats, series = RequestStats(), WindowSeries(30.0, 0.0)
    for record, busy in zip(records, in_flight, strict=True):
        series.note_arrival(record.scheduled, busy)
        assert record.sent is not None
        series.note_sent(record.sent)
        stats.add(record)
        series.add(record)
    return AttackResult(
        plan=plan,
        started_at=0.0,
        schedule_s=60.0,
        elapsed=61.0,
        send_span_s=40.125,
        scheduled=len(records),
        sent=len(records),
        late=0,
        total=stats,
        by_target={URL: stats},
        windows=series.windows(),
        decisions={"rate_limit": 1} if any(r.retried for r in records) else {},
    )


def llm_result() -> AttackResult:
    return result_of(llm_records(), (0, 1, 0))


def http_result() -> AttackResult:
    plain = [
        RequestRecord.from_attempts(
            [
                Attempt(
                    i,
                    1,
                    scheduled=t,
                    sent=t + 0.125,
                    first_byte=t + 0.25,
                    end=t + 0.5,
                    outcome=Outcome.OK,
                    status=200,
                )
            ]
        )
        for i, t in enumerate((0.0, 20.0, 45.0))
    ]
    return result_of(plain, (0, 0, 0))


# --- JSON ----------------------------------------------------------------------------


def test_the_json_llm_section_states_every_figure_on_its_clock() -> None:
    llm = json.loads(attack_json(llm_result()))["llm"]
    assert llm["streamed_requests"] == 3
    assert llm["ttft_s"] == {
        "sent": summary(0.5, 2.0, 0.25),  # request 1: 12.25 - 10.25, from the first send
        "scheduled": summary(0.625, 2.25, 0.375),  # request 1: 12.25 - 10.0
    }
    assert llm["itl_s"] == summary(0.125, 0.25, 0.5, 0.25, 0.125)
    assert llm["tpot_s"] == summary(1.0 / 99, 0.5 / 19, 0.25 / 1)  # usage, usage, 2 chunks
    assert llm["e2e_s"] == {
        "sent": summary(1.5, 2.5, 0.5),
        "scheduled": summary(1.625, 2.75, 0.625),
    }
    assert llm["tokens"] == {"prompt": 800, "completion": 120, "requests_with_usage": 2}
    assert llm["per_minute"] == {
        "span_s": 60.0,
        "ok_requests": 2.0,
        "prompt_tokens": 800.0,
        "completion_tokens": 120.0,
        "sent": 3.0,
    }
    assert (llm["throttled_requests"], llm["throttled_attempts"]) == (1, 1)
    assert llm["attempts_per_request"] == 4 / 3
    assert llm["utilisation_pct"] == summary(40.0, 100.0, 60.0)
    assert "targets" not in llm  # one target: the total is its figures


def test_the_json_llm_time_series_has_seed_001s_columns_per_window() -> None:
    first, second = json.loads(attack_json(llm_result()))["llm"]["windows"]
    assert first == {
        "start": 0.0,
        "width": 30.0,
        "rpm": 4.0,  # two first sends in 30 s
        "in_flight": 1,
        "completed": 2,
        "failures": 0,
        "throttled": 0,  # request 1 was refused once but ended OK
        "ttft_s": summary(0.5, 2.0),
        "e2e_s": summary(1.625, 2.75),
        "prompt_tokens": 800,
        "completion_tokens": 120,
    }
    assert (second["rpm"], second["completed"], second["failures"]) == (2.0, 1, 1)
    assert second["ttft_s"] == summary(0.25)
    assert (second["prompt_tokens"], second["completion_tokens"]) == (0, 0)


def test_an_http_run_has_no_llm_section_in_any_form() -> None:
    result = http_result()
    assert not result.has_llm
    data = result.to_dict()
    assert "llm" not in data
    assert "llm" not in json.loads(attack_json(result))
    assert set(data["windows"][0]) == {
        "index", "start", "width", "scheduled", "sent", "completed", "ok", "failed",
        "throttled", "dropped", "cancelled", "max_in_flight", "latency", "service_time",
    }  # fmt: skip
    for text in (attack_text(result), attack_markdown(result)):
        assert "LLM" not in text
        assert "first token" not in text


def test_a_run_whose_only_llm_data_is_a_utilisation_header_gets_the_section() -> None:
    result = result_of([RequestRecord.from_attempts([refused(0, 1.0)])], (0,))
    llm = result.to_dict()["llm"]
    assert llm["streamed_requests"] == 0
    assert llm["utilisation_pct"] == summary(100.0)
    assert llm["ttft_s"]["sent"]["count"] == 0
    assert llm["ttft_s"]["sent"]["p50"] is None


def test_several_targets_get_their_own_llm_figures() -> None:
    result = llm_result()
    other = RequestStats()
    other.add(llm_records()[2])
    result.by_target = {URL: result.total, f"{URL} (key 2)": other}
    targets = result.to_dict()["llm"]["targets"]
    assert list(targets) == [URL, f"{URL} (key 2)"]
    assert targets[f"{URL} (key 2)"]["ttft_s"]["sent"] == summary(0.25)
    assert f"  {URL} (key 2): TTFT" in attack_text(result)


# --- text and Markdown ---------------------------------------------------------------


def test_the_text_report_names_the_clock_of_every_llm_row() -> None:
    text = attack_text(llm_result())
    lines = text.splitlines()
    table = lines[lines.index("LLM") + 3 :][:7]
    assert [line.split()[0:2] for line in table[1:]] == [
        ["time", "to"],
        ["scheduled", "3"],
        ["inter-token", "latency"],
        ["time", "per"],
        ["end", "to"],
        ["scheduled", "3"],
    ]
    assert table[1].split()[-10:] == [
        "sent", "3", "916.67", "250.00", "500.24", "2000.00", "2000.00", "2000.00", "2000.00",
        "2000.00",
    ]  # fmt: skip
    assert "Clocks: sent = from the request's first send, scheduled = from when it" in text


def test_the_text_report_states_tokens_rates_throttling_and_utilisation() -> None:
    lines = attack_text(llm_result()).splitlines()
    assert "Tokens: 800 prompt, 120 completion (usage of 2 OK requests)" in lines
    assert (
        "Per minute over the 60.00 s schedule: 3.0 requests sent, 2.0 answered OK; "
        "800.0 context and 120.0 generated tokens"
    ) in lines
    assert (
        "Throttled requests 1, throttled attempts 1; attempts per request 1.33 "
        "(retry: none (one attempt per request))"
    ) in lines
    assert (
        "Utilisation header of 3 attempts: mean 66.7 %, p50 60.0 %, p95 100.0 %, max 100.0 %"
        in (lines)
    )


def test_the_text_time_series_shows_one_row_per_window_in_seed_001s_columns() -> None:
    lines = attack_text(llm_result()).splitlines()
    start = lines.index("LLM time series (30 s windows)")
    header, first, second = (line.split() for line in lines[start + 2 : start + 5])
    assert " ".join(header) == (
        "t (s) rpm in flight completed failures throttled ttft avg ttft p95 e2e avg e2e p95 "
        "ctx tokens gen tokens"
    )
    assert first == ["0", "4.0", "1", "2", "0", "0", "1250.00", "2000.00", "2187.50", "2750.00",
                     "800", "120"]  # fmt: skip
    assert second == ["30", "2.0", "0", "1", "1", "0", "250.00", "250.00", "625.00", "625.00",
                      "0", "0"]  # fmt: skip


def test_the_markdown_report_has_the_llm_tables() -> None:
    markdown = attack_markdown(llm_result())
    assert "## LLM" in markdown
    assert (
        "| time to first token | sent | 3 | 916.67 | 250.00 | 500.24 | 2000.00 | 2000.00 | "
        "2000.00 | 2000.00 | 2000.00 |"
    ) in markdown
    assert "| inter-token latency | chunk gaps | 5 | 250.00 |" in markdown
    assert "### LLM time series (30 s windows)" in markdown
    assert (
        "| 0 | 4.0 | 1 | 2 | 0 | 0 | 1250.00 | 2000.00 | 2187.50 | 2750.00 | 800 | 120 |"
    ) in markdown
    assert "- Tokens: 800 prompt, 120 completion (usage of 2 OK requests)" in markdown
