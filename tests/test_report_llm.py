"""The LLM section of the attack report: JSON, Markdown and text, from a hand-built run.

Three requests with exact binary-fraction timestamps, 30 s windows over a 60 s schedule:

* 0 — one attempt at 0: sent 0.125, first token 0.625, chunks 0.75, 1.0, 1.5, end 1.625;
  usage 500 + 100 tokens; utilisation 40 %.
* 1 — refused at 10 (sent 10.25, 429, utilisation 100 %), retried at 11.5: sent 11.75,
  first token 12.25, chunk 12.5, end 12.75; usage 300 + 20; utilisation 60 %.
* 2 — one attempt at 40: sent 40.125, first token 40.375, chunk 40.5, cut at 40.625
  (FAILED, no usage): a stream that failed after its first token.

The run ends (its last answer) at 45 s, inside the second window, before the schedule's
60 s: answers and tokens per minute are over the 60 s schedule, as the sent rate is (so
the answered rate can never exceed the sent one), and so is the second window's rpm.
"""

from __future__ import annotations

import json
from typing import Any

from llm_helpers import streamed_attempt
from pyattacker.attack import AttackPlan, AttackResult, LlmSpec, OpenModel
from pyattacker.attack._tally import ErrorGroup
from pyattacker.llm import JsonlPrompts, SyntheticPrompts
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
    return streamed_attempt(
        request,
        attempt,
        at=at,
        sent=sent,
        first=first,
        chunks=chunks,
        end=end,
        outcome=outcome,
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
        retry_after=2.5,
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


def result_of(
    records: list[RequestRecord],
    in_flight: tuple[int, ...],
    *,
    elapsed: float = 45.0,
    errors: list[ErrorGroup] | None = None,
) -> AttackResult:
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
        elapsed=elapsed,
        send_span_s=40.125,
        scheduled=len(records),
        sent=len(records),
        late=0,
        total=stats,
        by_target={URL: stats},
        errors=errors or [],
        windows=series.windows(),
        decisions={"rate_limit": 1} if any(r.retried for r in records) else {},
    )


CUT = "LlmResponseError: the stream broke off after 2 content chunks, before [DONE]"


def llm_result() -> AttackResult:
    return result_of(llm_records(), (1, 1, 1), errors=[ErrorGroup(CUT, 1, CUT)])


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
    return result_of(plain, (1, 1, 1))


# --- JSON ----------------------------------------------------------------------------


def test_the_json_llm_section_states_every_figure_on_its_clock() -> None:
    llm = json.loads(attack_json(llm_result()))["llm"]
    assert (llm["streamed_requests"], llm["ok_streams"], llm["failed_after_first_token"]) == (
        3,
        2,
        1,
    )
    assert llm["ok_answers"] == 2
    assert llm["ttft_s"] == {  # every stream, the cut one too: its first token did arrive
        "sent": summary(0.5, 2.0, 0.25),  # request 1: 12.25 - 10.25, from the first send
        "scheduled": summary(0.625, 2.25, 0.375),  # request 1: 12.25 - 10.0
    }
    # the OK streams only: the cut stream's gaps and end say nothing of a whole answer
    assert llm["itl_s"] == summary(0.125, 0.25, 0.5, 0.25)
    assert llm["tpot_s"] == summary(1.0 / 99, 0.5 / 19)
    assert llm["e2e_s"] == {"sent": summary(1.5, 2.5), "scheduled": summary(1.625, 2.75)}
    assert llm["tokens"] == {"prompt": 800, "completion": 120, "requests_with_usage": 2}
    assert llm["per_minute"] == {
        "answer_span_s": 60.0,  # the schedule: longer than the 45 s to the last answer
        "ok_requests": 2.0,
        "prompt_tokens": 800.0,
        "completion_tokens": 120.0,
        "sending_span_s": 60.0,  # the schedule
        "sent": 3.0,
    }
    assert (llm["throttled_requests"], llm["throttled_attempts"]) == (1, 1)
    assert (llm["requests"], llm["attempts"], llm["sent_attempts"]) == (3, 4, 4)
    assert llm["attempts_per_request"] == llm["sent_attempts_per_sent_request"] == 4 / 3
    assert llm["utilisation_pct"] == summary(40.0, 100.0, 60.0)
    assert llm["retry_after_s"] == summary(2.5)  # the one refused attempt was asked to wait
    assert "targets" not in llm  # one target: the total is its figures


def test_answers_per_minute_are_over_the_time_the_answers_took_not_the_schedule() -> None:
    # The reviewer's case: a 4 s schedule whose retried answers came until 20 s.
    result = result_of(llm_records(), (1, 1, 1), elapsed=20 * 60.0)
    rate = result.to_dict()["llm"]["per_minute"]
    assert (rate["answer_span_s"], rate["ok_requests"]) == (1200.0, 0.1)  # 2 in 20 minutes
    assert (rate["sending_span_s"], rate["sent"]) == (60.0, 3.0)
    assert (
        "Per minute: 3.0 requests sent (over the 60.00 s schedule); 0.1 answered OK, "
        "40.0 context and 6.0 generated tokens (over the 1200.00 s from the start to the "
        "end of the run)"
    ) in attack_text(result).splitlines()


def test_the_json_llm_time_series_has_the_usual_llm_columns_per_window() -> None:
    first, second = json.loads(attack_json(llm_result()))["llm"]["windows"]
    assert first == {
        "start": 0.0,
        "width": 30.0,
        "covered_s": 30.0,
        "rpm": 4.0,  # two first sends in 30 s
        "max_in_flight": 1,
        "completed": 2,
        "failed": 0,
        "throttled": 0,  # no request ended throttled...
        "throttled_attempts": 1,  # ...but request 1 was refused once (then served)
        "ttft_sent_s": summary(0.5, 2.0),
        "e2e_scheduled_s": summary(1.625, 2.75),
        "itl_s": summary(0.125, 0.25, 0.5, 0.25),  # both OK streams' chunk gaps
        "tpot_s": summary(1.0 / 99, 0.5 / 19),
        "prompt_tokens": 800,
        "completion_tokens": 120,
    }
    # Sending covered the whole window (the 60 s schedule): one send in 30 s is 2 a minute.
    assert (second["covered_s"], second["rpm"]) == (30.0, 2.0)
    assert (second["completed"], second["failed"], second["throttled_attempts"]) == (1, 1, 0)
    assert second["ttft_sent_s"] == summary(0.25)
    assert second["e2e_scheduled_s"] == summary()  # the cut stream is no whole answer
    assert second["itl_s"] == second["tpot_s"] == summary()  # nor has it ITL or TPOT
    assert (second["prompt_tokens"], second["completion_tokens"]) == (0, 0)


def test_an_http_run_has_no_llm_section_in_any_form() -> None:
    result = http_result()
    assert not result.has_llm
    data = result.to_dict()
    assert "llm" not in data
    assert "llm" not in json.loads(attack_json(result))
    assert set(data["windows"][0]) == {
        "index", "start", "width", "scheduled", "sent", "completed", "ok", "failed",
        "throttled", "dropped", "cancelled", "max_in_flight", "statuses", "latency",
        "service_time",
    }  # fmt: skip
    for text in (attack_text(result), attack_markdown(result)):
        assert "LLM" not in text
        assert "first token" not in text


def test_a_run_whose_only_llm_data_is_a_utilisation_header_gets_the_section() -> None:
    result = result_of([RequestRecord.from_attempts([refused(0, 1.0)])], (1,))
    llm = result.to_dict()["llm"]
    assert llm["streamed_requests"] == 0
    assert llm["utilisation_pct"] == summary(100.0)
    assert llm["retry_after_s"] == summary(2.5)
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


def test_the_text_report_names_the_clock_and_the_requests_of_every_llm_row() -> None:
    text = attack_text(llm_result())
    lines = text.splitlines()
    start = lines.index("LLM")
    assert lines[start + 1] == (
        "3 answers streamed (answered requests whose last attempt got a first token): "
        "2 OK, failed after first token: 1."
    )
    assert lines[start + 2] == (
        "Time to first token covers all 3; inter-token latency and time per output token the "
        "2 OK streams; end to end the 2 OK answers (a stream that broke has a TTFT but no "
        "end to end). "
        "Times in ms."
    )
    table = lines[start + 4 :][:7]
    assert [line.split()[0:3] for line in table[1:]] == [
        ["time", "to", "first"],
        ["scheduled", "3", "1083.33"],
        ["inter-token", "latency", "chunk"],
        ["time", "per", "output"],
        ["end", "to", "end"],
        ["scheduled", "2", "2187.50"],
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
        "Per minute: 3.0 requests sent (over the 60.00 s schedule); 2.0 answered OK, "
        "800.0 context and 120.0 generated tokens (over the 60.00 s schedule)"
    ) in lines
    assert "Sent attempts per request that was sent (what the server saw): 1.33" in lines
    throttled = [line for line in lines if "throttled attempts" in line]
    assert len(throttled) == 1  # the Attempts: line's, not repeated in the LLM section
    assert throttled[0].startswith("Attempts: 4 for 3 requests, all sent")
    assert (
        "Utilisation header of 3 attempts: mean 66.7 %, p50 60.0 %, p95 100.0 %, max 100.0 %"
        in (lines)
    )
    assert (
        "Retry-After waits asked for by 1 refusals: mean 2.500 s, p50 2.500 s, p95 2.500 s, "
        "max 2.500 s"
    ) in lines


def test_the_text_time_series_shows_one_row_per_window_in_the_usual_llm_columns() -> None:
    lines = attack_text(llm_result()).splitlines()
    start = lines.index("LLM time series (30 s windows)")
    header, first, second = lines[start + 2 : start + 5]
    assert header.split("  ")[0:1] == ["t (s)"]
    assert [cell.strip() for cell in header.split("  ") if cell.strip()] == [
        "t (s)", "rpm", "max in flight", "answered", "failed", "throttled (ended)",
        "throttled (attempts)", "ttft avg (sent)",
        "ttft p95 (sent)", "e2e avg (sched)", "e2e p95 (sched)", "ctx tokens", "gen tokens",
    ]  # fmt: skip
    assert first.split() == ["0", "4.0", "1", "2", "0", "0", "1", "1250.00", "2000.00",
                             "2187.50", "2750.00", "800", "120"]  # fmt: skip
    assert second.split() == ["30", "2.0", "1", "1", "1", "0", "0", "250.00", "250.00", "-",
                              "-", "0", "0"]  # fmt: skip


def test_the_markdown_report_has_the_llm_tables() -> None:
    markdown = attack_markdown(llm_result())
    assert "## LLM" in markdown
    assert (
        "| time to first token | sent | 3 | 916.67 | 250.00 | 500.24 | 2000.00 | 2000.00 | "
        "2000.00 | 2000.00 | 2000.00 |"
    ) in markdown
    assert "| inter-token latency | chunk gaps | 4 | 281.25 |" in markdown
    assert (
        "- 3 answers streamed (answered requests whose last attempt got a first token): "
        "2 OK, failed after first token: 1."
    ) in markdown.splitlines()
    assert "### LLM time series (30 s windows)" in markdown
    assert "| ttft avg (sent) | ttft p95 (sent) | e2e avg (sched) | e2e p95 (sched) |" in markdown
    assert (
        "| 0 | 4.0 | 1 | 2 | 0 | 0 | 1 | 1250.00 | 2000.00 | 2187.50 | 2750.00 | 800 | 120 |"
    ) in markdown
    assert "- Tokens: 800 prompt, 120 completion (usage of 2 OK requests)" in markdown
    assert "generated tokens (over the 60.00 s schedule)" in markdown


# --- what was tested, whole-body answers, rates, throttling labels --------------------


def llm_plan(**spec: Any) -> AttackPlan:
    prompts = spec.pop("prompts", SyntheticPrompts(context_tokens=50, max_tokens=10, seed=3))
    return AttackPlan.build(
        [URL.removesuffix("/chat/completions")],
        OpenModel(rate=1),
        duration=60.0,
        keys=("sk-secret-0123456789",),
        llm=LlmSpec("mock-llm", prompts, **spec),
    )


def with_plan(plan: AttackPlan) -> AttackResult:
    result = llm_result()
    result.plan = plan
    return result


def test_the_plan_says_which_model_api_prompts_and_parameters_were_tested_and_no_key() -> None:
    result = with_plan(llm_plan(max_tokens=12, extra={"temperature": 0.5, "ignore_eos": True}))
    assert result.to_dict()["plan"]["llm"] == {
        "model": "mock-llm",
        "api": "chat",
        "stream": True,
        "prompts": {
            "kind": "synthetic",
            "context_tokens": 50,
            "max_tokens": 10,
            "seed": 3,
            "note": "50 common English words, about one token each",
        },
        "max_tokens": 10,  # the shape's: every synthetic prompt names it, so 12 is unused
        "azure_deployment": None,
        "api_version": None,
        "extra": {"temperature": 0.5, "ignore_eos": True},
    }
    line = (
        "LLM: model mock-llm, chat API, streamed; prompts: 50 common English words, about one "
        "token each (synthetic, seed 3), max_tokens 10; extra: "
        "temperature=0.5, ignore_eos=true"
    )
    assert attack_text(result).splitlines()[1] == line
    assert f"- {line}" in attack_markdown(result).splitlines()
    for output in (attack_json(result), attack_text(result), attack_markdown(result)):
        assert "sk-secret" not in output


def test_a_prompts_file_is_named_with_its_line_count_in_the_plan(tmp_path: Any) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"prompt": "b"}\n{"prompt": "c"}\n')
    result = with_plan(llm_plan(prompts=JsonlPrompts(path), api="completions", stream=False))
    plan = result.to_dict()["plan"]["llm"]
    assert plan["prompts"] == {"kind": "jsonl", "file": "prompts.jsonl", "lines": 3}
    assert attack_text(result).splitlines()[1] == (
        "LLM: model mock-llm, completions API, whole body (not streamed); "
        "prompts: file prompts.jsonl, 3 lines"
    )


def whole_body(request: int, at: float) -> RequestRecord:
    """A whole-body answer: sent 0.125 after ``at``, ended 1.125 after, usage 50 + 10."""
    answer = streamed(request, 1, at, (0.125, 0.5, (), 1.125), usage=(50, 10))
    answer.first_token, answer.token_times = None, None
    return RequestRecord.from_attempts([answer])


def test_a_whole_body_run_has_end_to_end_and_one_line_instead_of_the_stream_figures() -> None:
    result = result_of([whole_body(i, t) for i, t in enumerate((0.0, 20.0, 40.0))], (1, 1, 1))
    llm = result.to_dict()["llm"]
    assert (llm["streamed_requests"], llm["ok_streams"], llm["ok_answers"]) == (0, 0, 3)
    assert llm["e2e_s"] == {
        "sent": summary(1.0, 1.0, 1.0),
        "scheduled": summary(1.125, 1.125, 1.125),
    }
    assert [w["e2e_scheduled_s"]["count"] for w in llm["windows"]] == [2, 1]
    lines = attack_text(result).splitlines()
    start = lines.index("LLM")
    assert lines[start + 1] == (
        "No answer streamed: time to first token, inter-token latency and time per output "
        "token need a streamed answer. End to end covers the 3 OK answers. Times in ms."
    )
    table = lines[start + 3 : start + 6]
    assert [row.split()[:4] for row in table[1:]] == [
        ["end", "to", "end", "sent"],
        ["scheduled", "3", "1125.00", "1125.00"],
    ]
    for text in (attack_text(result), attack_markdown(result)):
        rows = [line for line in text.splitlines() if line.startswith(("time ", "inter", "| "))]
        assert not [row for row in rows if "first token" in row or "inter-token" in row]


def test_requests_sent_per_minute_is_never_below_answered_ok_when_every_request_succeeded() -> None:
    records = [whole_body(i, t) for i, t in enumerate((0.0, 20.0, 40.0))]
    for elapsed in (41.125, 45.0, 60.0, 90.0):  # before, at and after the schedule's end
        rate = result_of(records, (1, 1, 1), elapsed=elapsed).to_dict()["llm"]["per_minute"]
        assert rate["sent"] >= rate["ok_requests"], elapsed
        assert rate["answer_span_s"] == max(60.0, elapsed)
    late = result_of(records, (1, 1, 1), elapsed=90.0)
    assert "generated tokens (over the 90.00 s from the start to the end of the run)" in (
        attack_text(late)
    )


def test_a_window_rpm_stops_at_the_send_span_not_at_the_last_answer() -> None:
    result = result_of(llm_records(), (1, 1, 1), elapsed=200.0)
    result.schedule_s = 45.0  # sending covered 45 s: 15 s of the second window
    first, second = result.to_dict()["llm"]["windows"]
    assert (first["covered_s"], first["rpm"]) == (30.0, 4.0)
    assert (second["covered_s"], second["rpm"]) == (15.0, 4.0)


def test_each_throttled_figure_says_what_it_counts() -> None:
    lines = attack_text(llm_result()).splitlines()
    assert any(line.startswith("Outcomes (how requests ended): ") for line in lines)
    assert any(
        "requests throttled at least once: 1 (0 still throttled at the end), "
        "throttled attempts 1" in line
        for line in lines
    )
    start = lines.index("Time series (30 s windows)")
    header = [cell.strip() for cell in lines[start + 1].split("  ") if cell.strip()]
    assert header[5:8] == ["throttled (ended)", "dropped", "max in flight"]
    markdown = attack_markdown(llm_result())
    assert "| throttled (ended) | dropped | max in flight |" in markdown
    assert (
        "| max in flight | answered | failed | throttled (ended) | throttled (attempts) |"
    ) in markdown


def test_a_run_with_nothing_throttled_says_throttled_none() -> None:
    (attempts,) = [line for line in attack_text(http_result()).splitlines() if "Attempts:" in line]
    assert attempts.endswith("; throttled: none")
    assert "throttled at least once" not in attempts


def test_markdown_puts_the_headline_and_llm_intro_lines_in_lists_not_one_paragraph() -> None:
    lines = attack_markdown(llm_result()).splitlines()
    assert next(line for line in lines if "Plan span" in line).startswith("- Plan span ")
    assert next(line for line in lines if "Clocks:" in line).startswith("- Clocks:")


def test_markdown_names_the_total_rows_it_cannot_indent() -> None:
    markdown = attack_markdown(http_result())
    assert "| total: ok only | scheduled |" in markdown
    assert "| total: dispatch delay | sched→sent |" in markdown
    assert "|   ok only" not in markdown
    assert "  ok only  " in attack_text(http_result())


def test_time_series_left_align_only_the_time_and_right_align_every_figure() -> None:
    lines = attack_text(llm_result()).splitlines()
    http = lines.index("Time series (30 s windows)")
    assert lines[http + 1].startswith("t (s)  sched  sent")
    assert lines[http + 2].startswith("0          2     2")  # sched and sent right-aligned
    llm = lines.index("LLM time series (30 s windows)")
    assert lines[llm + 2].startswith("t (s)  rpm  max in flight")
    assert lines[llm + 3].startswith("0      4.0              1")  # rpm right-aligned too


def test_an_llm_plan_has_no_body_bytes_and_both_spans_are_in_the_summary() -> None:
    data = with_plan(llm_plan()).to_dict()
    assert "body_bytes" not in data["plan"]
    assert "body_bytes" in http_result().to_dict()["plan"]
    summary = data["summary"]
    assert (summary["send_span_s"], summary["sending_span_s"]) == (40.125, 60.0)
    assert summary["sending_span_s"] == data["llm"]["per_minute"]["sending_span_s"]
    assert summary["answer_span_s"] == data["llm"]["per_minute"]["answer_span_s"]


def test_a_prompts_file_plan_reports_the_max_tokens_sent_for_lines_that_name_none(
    tmp_path: Any,
) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "a"}\n')
    result = with_plan(llm_plan(prompts=JsonlPrompts(path), max_tokens=7))
    assert result.to_dict()["plan"]["llm"]["max_tokens"] == 7
    assert "; max_tokens 7" in attack_text(result).splitlines()[1]
