"""LLM figures in the aggregates: TTFT on two clocks, ITL, TPOT, tokens, utilisation.

Attempts are built by hand with timestamps that are exact binary fractions, so every
figure is checked exactly: a histogram equals the histogram of the expected values.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_helpers import streamed_attempt as streamed
from pyattacker.measure import (
    Attempt,
    Histogram,
    Outcome,
    RequestRecord,
    RequestStats,
    Summary,
    WindowSeries,
)

ORIGIN = 100.0


def hist(*values: float) -> Histogram:
    h = Histogram()
    for v in values:
        h.record(v)
    return h


def throttled(request: int, attempt: int, at: float, headers: dict[str, str] | None) -> Attempt:
    return Attempt(
        request,
        attempt,
        scheduled=at,
        sent=at + 0.25,
        first_byte=at + 0.5,
        end=at + 0.5,
        outcome=Outcome.THROTTLED,
        status=429,
        error_class="rate_limit",
        headers=headers,
    )


def usage(prompt: float, completion: float) -> dict[str, float]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def stats_of(*items: Attempt | RequestRecord) -> RequestStats:
    stats = RequestStats()
    for item in items:
        if isinstance(item, Attempt):
            stats.add_attempt(item)
        else:
            stats.add(item)
    return stats


# --- one attempt ---------------------------------------------------------------------


def test_ttft_of_one_attempt_is_first_token_minus_sent_and_minus_scheduled() -> None:
    stats = stats_of(streamed())
    assert stats.ttft == hist(0.5)  # 100.625 - 100.125
    assert stats.ttft_scheduled == hist(0.625)  # 100.625 - 100.0
    assert stats.e2e == hist(1.5)
    assert stats.e2e_scheduled == hist(1.625)
    assert stats.has_llm


def test_itl_holds_every_gap_from_the_first_token_through_each_later_chunk() -> None:
    stats = stats_of(streamed(first=0.625, chunks=(0.75, 1.0, 1.5)))
    assert stats.itl == hist(0.125, 0.25, 0.5)


def test_tpot_divides_the_stream_by_the_reported_completion_tokens_after_the_first() -> None:
    stats = stats_of(streamed(first=0.625, end=1.625, usage=usage(50, 9)))
    assert stats.tpot == hist(1.0 / 8)  # (101.625 - 100.625) / (9 - 1)


def test_tpot_without_usage_counts_the_chunks() -> None:
    stats = stats_of(streamed(first=0.625, chunks=(0.75, 1.0, 1.5), end=1.625))
    assert stats.tpot == hist(1.0 / 3)  # four chunks: (1.0 s) / (4 - 1)


@pytest.mark.parametrize("completion", [None, 1.0, 0.0])
def test_tpot_is_not_recorded_for_fewer_than_two_tokens(completion: float | None) -> None:
    tokens = None if completion is None else usage(10, completion)
    stats = stats_of(streamed(chunks=(), usage=tokens))
    assert stats.tpot.count == 0
    assert stats.itl.count == 0
    assert stats.ttft.count == 1


def test_tokens_sum_the_usage_of_ok_streamed_requests_and_count_them() -> None:
    stats = stats_of(
        streamed(0, usage=usage(500, 100)),
        streamed(1, usage=usage(400, 60)),
        streamed(2),  # no usage
        streamed(3, usage=usage(7, 3), outcome=Outcome.FAILED),  # a cut stream: not counted
    )
    assert (stats.prompt_tokens, stats.completion_tokens, stats.usage_requests) == (900, 160, 2)
    assert stats.ttft.count == 4  # a cut stream still showed its first token


# --- streams that failed after their first token -------------------------------------


def test_a_stream_cut_after_its_first_token_has_a_ttft_and_nothing_of_a_whole_answer() -> None:
    cut = streamed(first=0.625, chunks=(0.75, 1.0), end=1.125, outcome=Outcome.FAILED)
    stats = stats_of(cut)
    assert stats.ttft == hist(0.5)  # 100.625 - 100.125: the token did arrive
    assert stats.ttft_scheduled == hist(0.625)
    assert stats.failed_after_first_token == 1
    for name in ("e2e", "e2e_scheduled", "itl", "tpot"):
        assert getattr(stats, name) == Histogram(), name  # its end is where it broke
    assert stats.has_llm


def test_only_ok_streams_give_end_to_end_itl_and_tpot_while_every_stream_gives_ttft() -> None:
    stats = stats_of(
        streamed(0, first=0.625, chunks=(0.75,), end=0.875),  # OK: gaps 0.125, e2e 0.75
        streamed(1, first=0.25, chunks=(0.5, 4.0), end=8.0, outcome=Outcome.FAILED),
        streamed(2, first=0.375, chunks=(), end=0.5, outcome=Outcome.THROTTLED),  # error event
    )
    assert stats.ttft == hist(0.5, 0.125, 0.25)
    assert stats.ttft_scheduled == hist(0.625, 0.25, 0.375)
    assert stats.e2e == hist(0.75)
    assert stats.e2e_scheduled == hist(0.875)
    assert stats.itl == hist(0.125)
    assert stats.tpot == hist(0.25)  # (0.875 - 0.625) / (2 - 1)
    assert stats.failed_after_first_token == 2
    assert stats.ttft_scheduled.count == stats.e2e_scheduled.count + 2


def test_a_retried_request_whose_last_stream_broke_counts_as_failed_after_first_token() -> None:
    record = RequestRecord.from_attempts(
        [
            throttled(5, 1, 300.0, None),
            streamed(5, 2, at=301.5, sent=0.25, first=0.75, chunks=(1.0,), end=1.25,
                     outcome=Outcome.FAILED),
        ]
    )  # fmt: skip
    stats = stats_of(record)
    assert stats.ttft == hist(2.0)  # 302.25 - 300.25, from the first send
    assert stats.failed_after_first_token == 1
    assert stats.e2e.count == stats.itl.count == stats.tpot.count == 0


def test_token_counts_round_fractions_and_ignore_nonsense() -> None:
    stats = stats_of(
        streamed(0, usage={"prompt_tokens": 10.4, "completion_tokens": 2.6}),
        streamed(1, usage={"prompt_tokens": -5.0, "completion_tokens": float("nan")}),
    )
    assert (stats.prompt_tokens, stats.completion_tokens, stats.usage_requests) == (10, 3, 2)


def test_a_cancelled_stream_adds_no_llm_figure() -> None:
    stats = stats_of(streamed(outcome=Outcome.CANCELLED, usage=usage(5, 5)))
    assert not stats.has_llm
    assert stats.ttft.count == stats.itl.count == stats.usage_requests == 0


def test_an_http_request_adds_nothing_to_the_llm_figures() -> None:
    plain = Attempt(
        0, 1, scheduled=1.0, sent=1.5, first_byte=1.75, end=2.0, outcome=Outcome.OK, status=200
    )
    stats = stats_of(plain)
    assert not stats.has_llm
    empty = RequestStats()
    for name in ("ttft", "ttft_scheduled", "itl", "tpot", "e2e", "e2e_scheduled", "utilisation"):
        assert getattr(stats, name) == getattr(empty, name), name
    assert (stats.prompt_tokens, stats.completion_tokens, stats.usage_requests) == (0, 0, 0)


def whole_body(
    request: int = 0, attempt: int = 1, *, at: float = ORIGIN, outcome: Outcome = Outcome.OK
) -> Attempt:
    """A whole-body (not streamed) LLM answer: usage, no token timestamps."""
    whole = streamed(request, attempt, at=at, outcome=outcome, usage=usage(10, 10))
    whole.first_token, whole.token_times = None, None
    return whole


def test_a_whole_body_answer_counts_its_tokens_and_end_to_end_but_no_stream_figures() -> None:
    # No token timestamps: tokens and end to end (sent 0.125, ended 1.625) yes, TTFT/ITL no.
    stats = stats_of(whole_body())
    assert stats.has_llm
    assert (stats.prompt_tokens, stats.completion_tokens, stats.usage_requests) == (10, 10, 1)
    assert stats.e2e == hist(1.5)
    assert stats.e2e_scheduled == hist(1.625)
    for name in ("ttft", "ttft_scheduled", "itl", "tpot"):
        assert getattr(stats, name).count == 0, name
    series = WindowSeries(1.0, 0.0)
    series.add_attempt(whole_body())
    (window,) = [w for w in series.windows() if w.completed]
    assert (window.prompt_tokens, window.completion_tokens, window.ttft.count) == (10, 10, 0)
    assert window.e2e_scheduled == hist(1.625).summary()


def test_a_retried_whole_body_answer_spans_every_attempt_and_a_failed_one_has_no_e2e() -> None:
    retried = RequestRecord.from_attempts(
        [throttled(0, 1, ORIGIN, None), whole_body(0, 2, at=ORIGIN + 1.0)]
    )  # first sent at 100.25, scheduled at 100.0, ended at 102.625
    failed = whole_body(1, outcome=Outcome.FAILED)
    stats = RequestStats()
    stats.add(retried)
    stats.add_attempt(failed)
    assert stats.e2e == hist(2.375)
    assert stats.e2e_scheduled == hist(2.625)
    series = WindowSeries(1.0, ORIGIN)
    series.add(retried)
    series.add_attempt(failed)
    assert [w.e2e_scheduled.count for w in series.windows()] == [0, 0, 1]


def test_negative_spans_count_as_zero() -> None:
    early = streamed(sent=0.5, first=0.25, chunks=(0.125,), end=0.0625)
    stats = stats_of(early)
    assert stats.ttft == hist(0.0)
    assert stats.itl == hist(0.0)
    assert stats.tpot == hist(0.0)


# --- retried requests ----------------------------------------------------------------


def retried_record() -> RequestRecord:
    """Refused at 200.0 (sent 200.25), retried at 201.5: sent 201.75, first token 202.25,
    one more chunk at 202.5, end 202.75."""
    return RequestRecord.from_attempts(
        [
            throttled(7, 1, 200.0, {"azure-openai-deployment-utilization": "100%"}),
            streamed(
                7,
                2,
                at=201.5,
                sent=0.25,
                first=0.75,
                chunks=(1.0,),
                end=1.25,
                usage=usage(10, 2),
                headers={"azure-openai-deployment-utilization": "42.5%", "retry-after": "1"},
            ),
        ]
    )


def test_a_retried_request_measures_ttft_from_the_first_send_and_the_first_schedule() -> None:
    stats = stats_of(retried_record())
    assert stats.ttft == hist(2.0)  # 202.25 - 200.25: the refused attempt counts
    assert stats.ttft_scheduled == hist(2.25)  # 202.25 - 200.0
    assert stats.e2e == hist(2.5)
    assert stats.e2e_scheduled == hist(2.75)


def test_a_retried_request_takes_itl_tpot_and_tokens_from_its_last_attempt() -> None:
    stats = stats_of(retried_record())
    assert stats.itl == hist(0.25)
    assert stats.tpot == hist(0.5)  # (202.75 - 202.25) / (2 - 1)
    assert (stats.prompt_tokens, stats.completion_tokens, stats.usage_requests) == (10, 2, 1)
    assert (stats.throttled_requests, stats.throttled_attempts) == (1, 1)


def test_utilisation_is_read_from_throttled_attempts_and_the_streamed_answer() -> None:
    stats = stats_of(retried_record())
    assert stats.utilisation == hist(100.0, 42.5)
    assert stats.utilisation.summary().mean == 71.25


def test_a_refusal_alone_records_its_utilisation_and_counts_as_llm_data() -> None:
    stats = stats_of(throttled(0, 1, 10.0, {"azure-openai-deployment-utilization": " 99.5 % "}))
    assert stats.utilisation == hist(99.5)
    assert stats.has_llm
    assert stats.ttft.count == 0


@pytest.mark.parametrize("value", ["", "n/a", "-3%", "nan%", "inf"])
def test_a_utilisation_header_that_is_not_a_percentage_is_ignored(value: str) -> None:
    stats = stats_of(streamed(headers={"azure-openai-deployment-utilization": value}))
    assert stats.utilisation.count == 0


def test_a_request_that_never_streamed_after_a_streamed_try_has_no_ttft() -> None:
    cut = streamed(3, 1, outcome=Outcome.FAILED)
    refused = throttled(3, 2, 105.0, None)
    stats = stats_of(RequestRecord.from_attempts([cut, refused]))
    assert stats.ttft.count == stats.itl.count == 0  # the last attempt's first token counts


# --- merge and serialisation ---------------------------------------------------------


def test_llm_figures_survive_a_json_round_trip_and_merge_exactly() -> None:
    other = streamed(1, usage=usage(3, 4), headers={"azure-openai-deployment-utilization": "1%"})
    merged = RequestStats()
    merged.merge(stats_of(retried_record()))
    merged.merge(stats_of(other))
    assert merged == stats_of(retried_record(), other)
    again = RequestStats.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert again == merged
    assert again.utilisation == hist(100.0, 42.5, 1.0)


def test_stats_written_before_the_llm_figures_still_load_with_them_empty() -> None:
    data = stats_of(Attempt(0, 1, scheduled=1.0, sent=1.5, end=2.0, outcome=Outcome.OK)).to_dict()
    for key in (
        "prompt_tokens",
        "completion_tokens",
        "usage_requests",
        "failed_after_first_token",
        "sent_attempts",
        "ttft",
        "ttft_scheduled",
        "itl",
        "tpot",
        "e2e",
        "e2e_scheduled",
        "utilisation",
    ):
        del data[key]
    old = RequestStats.from_dict(data)
    assert not old.has_llm
    assert old.requests == 1
    assert (old.failed_after_first_token, old.sent_attempts) == (0, 0)


def test_failed_streams_merge_and_survive_a_json_round_trip() -> None:
    cut = streamed(0, outcome=Outcome.FAILED)
    merged = stats_of(cut)
    merged.merge(stats_of(streamed(1, outcome=Outcome.FAILED), streamed(2)))
    assert merged == stats_of(cut, streamed(1, outcome=Outcome.FAILED), streamed(2))
    assert merged.failed_after_first_token == 2
    again = RequestStats.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert again == merged
    assert again.failed_after_first_token == 2


# --- windows -------------------------------------------------------------------------


def test_a_window_holds_the_ttft_on_the_sent_clock_and_the_ok_tokens_of_its_streams() -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.add_attempt(streamed(0, at=ORIGIN, usage=usage(50, 9)))  # ends at 101.625
    series.add_attempt(streamed(1, at=ORIGIN + 0.25, sent=0.25, first=1.0, usage=usage(5, 1)))
    series.add_attempt(streamed(2, at=ORIGIN, outcome=Outcome.FAILED, usage=usage(9, 9)))
    series.add(retried_record())  # ends at 202.75
    windows = series.windows()
    assert windows[1].ttft == hist(0.5, 0.75, 0.5).summary()
    assert (windows[1].prompt_tokens, windows[1].completion_tokens) == (55, 10)
    assert windows[102].ttft == hist(2.0).summary()
    assert (windows[102].prompt_tokens, windows[102].completion_tokens) == (10, 2)
    assert windows[0].ttft == Summary.empty()
    assert (windows[0].prompt_tokens, windows[0].completion_tokens) == (0, 0)


def test_a_window_llm_row_is_json_and_the_http_row_is_unchanged() -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.add_attempt(streamed(usage=usage(50, 9)))
    window = series.windows()[1]
    row = window.llm_dict()
    assert json.loads(json.dumps(row)) == row
    assert row["ttft"]["p50"] == 0.5
    assert row["e2e_scheduled"]["p50"] == 1.625
    assert (row["prompt_tokens"], row["completion_tokens"]) == (50, 9)
    assert row["throttled_attempts"] == 0
    for key in ("ttft", "e2e_scheduled", "throttled_attempts", "prompt_tokens"):
        assert key not in window.to_dict()


def test_a_window_e2e_holds_the_ok_streams_on_the_scheduled_clock_and_no_refusal() -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.add_attempt(streamed(0, at=ORIGIN, end=1.625))  # OK, ends in window 1
    series.add_attempt(streamed(1, at=ORIGIN + 0.25, end=1.5, outcome=Outcome.FAILED))
    series.add_attempt(throttled(2, 1, ORIGIN + 1.0, None))  # refused, ends at 101.5
    series.add(retried_record())  # OK at 202.75, scheduled first at 200.0
    windows = series.windows()
    assert windows[1].e2e_scheduled == hist(1.625).summary()  # not the cut one, not the 429
    assert windows[1].ttft == hist(0.5, 0.5).summary()  # the cut stream did show a token
    assert windows[1].latency.count == 3  # the HTTP figure still has every answer
    assert windows[102].e2e_scheduled == hist(2.75).summary()


def test_a_window_counts_throttled_attempts_where_each_attempt_ended() -> None:
    series = WindowSeries(1.0, ORIGIN)
    twice_then_ok = RequestRecord.from_attempts(
        [
            throttled(0, 1, ORIGIN, None),  # ends at 100.5: window 0
            throttled(0, 2, ORIGIN + 1.0, None),  # ends at 101.5: window 1
            streamed(0, 3, at=ORIGIN + 3.0),  # OK, ends at 104.625: window 4
        ]
    )
    series.add(twice_then_ok)
    series.add_attempt(throttled(1, 1, ORIGIN + 4.0, None))  # ends at 104.5: window 4
    windows = series.windows()
    assert [w.throttled_attempts for w in windows] == [1, 1, 0, 0, 1]
    assert [w.throttled for w in windows] == [0, 0, 0, 0, 1]  # requests by final outcome
    assert [w.ok for w in windows] == [0, 0, 0, 0, 1]


def test_window_llm_figures_merge_and_round_trip_exactly() -> None:
    parts = [WindowSeries(1.0, ORIGIN) for _ in range(2)]
    whole = WindowSeries(1.0, ORIGIN)
    attempts = [
        streamed(0, usage=usage(1, 2)),
        streamed(1, at=ORIGIN + 1),
        throttled(2, 1, ORIGIN + 1, None),
    ]
    for i, attempt in enumerate(attempts):
        parts[i % 2].add_attempt(attempt)
        whole.add_attempt(attempt)
    parts[0].merge(parts[1])
    assert parts[0] == whole
    assert parts[0].windows()[1].throttled_attempts == 1
    assert parts[0].windows()[2].e2e_scheduled == hist(1.625).summary()
    assert WindowSeries.from_dict(json.loads(json.dumps(whole.to_dict()))) == whole


def test_window_series_written_before_the_llm_figures_still_load() -> None:
    series = WindowSeries(1.0, ORIGIN)
    series.add_attempt(Attempt(0, 1, scheduled=ORIGIN, sent=ORIGIN, end=ORIGIN + 1.0))
    data = series.to_dict()
    for window in data["windows"]:
        del window["ttft"], window["prompt_tokens"], window["completion_tokens"]
        del window["e2e_scheduled"], window["throttled_attempts"]
    assert WindowSeries.from_dict(data) == series


@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 5.0),  # when it was scheduled, after the origin
            st.lists(st.floats(0.001, 0.5), max_size=6),  # chunk gaps after the first token
            st.sampled_from([Outcome.OK, Outcome.FAILED]),
            st.one_of(st.none(), st.integers(0, 50)),  # completion tokens reported, if any
        ),
        max_size=12,
    )
)
def test_the_windows_itl_and_tpot_add_up_to_the_attacks_exactly(
    streams: list[tuple[float, list[float], Outcome, int | None]],
) -> None:
    stats, series = RequestStats(), WindowSeries(1.0, ORIGIN)
    for n, (at, gaps, outcome, tokens) in enumerate(streams):
        chunks = [0.625 + sum(gaps[: i + 1]) for i in range(len(gaps))]
        end = (chunks[-1] if chunks else 0.625) + 0.125
        done = streamed(
            n,
            at=ORIGIN + at,
            chunks=chunks,
            end=end,
            outcome=outcome,
            usage=None if tokens is None else usage(8, tokens),
        )
        stats.add_attempt(done)
        series.add_attempt(done)
    windows = series.windows()
    for name in ("itl", "tpot"):
        total = getattr(stats, name)
        parts = [getattr(w, name) for w in windows if getattr(w, name).count]
        assert sum(p.count for p in parts) == total.count, name
        if total.count:
            assert min(p.min for p in parts) == total.min, name
            assert max(p.max for p in parts) == total.max, name
