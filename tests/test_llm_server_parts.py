"""The mock LLM server's pure parts: lengths, limits, dice, routes, event bytes, the ticker."""

from __future__ import annotations

import asyncio
import json
import math
import random
from array import array
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker import servers
from pyattacker.errors import ConfigError
from pyattacker.measure import exact_percentile
from pyattacker.servers import Delay, LlmServer, LlmServerProcess
from pyattacker.servers._llm_dice import Failures, TokenCount, parse_storms
from pyattacker.servers._llm_exchange import (
    TRANSITIONS,
    Event,
    Exchange,
    IllegalTransition,
    State,
    next_state,
)
from pyattacker.servers._llm_handle import route
from pyattacker.servers._llm_limits import Bucket, Limiter, go_duration
from pyattacker.servers._llm_plan import parse_plan
from pyattacker.servers._llm_ticker import Ticker
from pyattacker.servers._llm_truth import Epoch, Ledger, Outcome, Record
from pyattacker.servers._llm_values import CAP, PERCENTILES, SLICE, Values, select
from pyattacker.servers._llm_wire import VOCABULARY, Ask, Events, parse_ask
from pyattacker.servers._timer import ServerTimer
from pyattacker.testing import run_virtual
from pyattacker.world import EndpointProfile, FailureProfile, ProviderModel, Scenario

# -- completion lengths ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("7", "fixed:7"),
        (7, "fixed:7"),
        ("fixed:12", "fixed:12"),
        (" Uniform: min=1, max=9 ", "uniform:min=1,max=9"),
        ("lognormal:median=100,sigma=0.5", "lognormal:median=100,sigma=0.5"),
        ("MAX", "max"),
    ],
)
def test_every_token_count_form_parses_to_its_canonical_spec(
    spec: str | int, canonical: str
) -> None:
    count = TokenCount.parse(spec)
    assert count.describe() == canonical
    assert TokenCount.parse(canonical) == count


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("0", "output_tokens"),
        ("fixed:-3", "output_tokens"),
        ("uniform:min=5,max=2", "output_tokens.max"),
        ("uniform:min=5", "output_tokens"),
        ("lognormal:median=10,sigma=9", "output_tokens.sigma"),
        ("poisson:10", "output_tokens"),
        ("10ms", "output_tokens"),
    ],
)
def test_a_bad_token_count_names_the_field_and_lists_the_forms(spec: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TokenCount.parse(spec)
    assert caught.value.field == field
    assert "uniform:min=A,max=B" in str(caught.value)


@given(
    st.sampled_from(["fixed:3", "uniform:min=1,max=50", "lognormal:median=20,sigma=1.5"]),
    st.integers(0, 2**32),
    st.none() | st.integers(1, 40),
)
def test_a_length_is_at_least_one_at_most_max_tokens_and_length_means_it_was_cut(
    spec: str, seed: int, max_tokens: int | None
) -> None:
    tokens, finish = TokenCount.parse(spec).sample(random.Random(seed), max_tokens)
    assert tokens >= 1
    if max_tokens is not None:
        assert tokens <= max_tokens
    if finish == "length":
        assert tokens == max_tokens
    again = TokenCount.parse(spec).sample(random.Random(seed), max_tokens)
    assert again == (tokens, finish)


# -- rate limits -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.0171, "18ms"),
        (0.999, "999ms"),
        (1.5, "1.5s"),
        (59.9999, "1m0s"),
        (360, "6m0s"),
        (61.25, "1m1.25s"),
    ],
)
def test_durations_are_written_as_openai_headers_write_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_a_bucket_refills_continuously_and_never_beyond_its_limit() -> None:
    bucket = Bucket(60, now=0.0)  # one per second
    bucket.level = 0.0
    bucket.refill(2.5)
    assert (bucket.remaining(), bucket.wait(3.0), bucket.reset_s()) == (2, 0.5, 57.5)
    bucket.refill(1000.0)
    assert bucket.level == 60.0
    assert bucket.wait(61) == float("inf")


def test_a_refused_request_pays_neither_bucket() -> None:
    limiter = Limiter(rpm=10, tpm=100, now=0.0)
    assert limiter.admit(0.0, 90) is None
    refusal = limiter.admit(0.0, 20)
    assert refusal is not None
    assert (refusal.kind, refusal.wait) == ("tokens", pytest.approx(10 / (100 / 60)))
    headers = dict(limiter.headers(0.0))
    assert headers[b"x-ratelimit-remaining-requests"] == b"9"
    assert headers[b"x-ratelimit-remaining-tokens"] == b"10"
    assert headers[b"x-ratelimit-reset-tokens"] == b"54s"
    limiter.fill(0.0)
    assert dict(limiter.headers(0.0))[b"x-ratelimit-remaining-tokens"] == b"100"


def test_a_request_larger_than_the_whole_limit_is_refused_with_no_time_to_wait() -> None:
    limiter = Limiter(rpm=None, tpm=100, now=0.0)
    refusal = limiter.admit(0.0, 101)
    assert refusal is not None
    assert (refusal.kind, refusal.wait) == ("tokens", None)
    assert "Request too large" in refusal.message
    assert dict(limiter.headers(0.0))[b"x-ratelimit-remaining-tokens"] == b"100"


def test_the_request_bucket_refuses_first_and_says_when_a_request_is_due() -> None:
    limiter = Limiter(rpm=1, tpm=None, now=0.0)
    assert limiter.admit(0.0, 5) is None
    refusal = limiter.admit(15.0, 5)
    assert refusal is not None
    assert (refusal.kind, refusal.wait) == ("requests", 45.0)
    assert limiter.admit(60.0, 5) is None


# -- failures and storms -------------------------------------------------------------------------


def test_storms_are_the_world_models_storms_for_the_same_seed_and_model() -> None:
    profile = FailureProfile(error_rate=0.0, storm_rate=0.3, storm_duration_s=10.0)
    failures = Failures({}, profile, ("m",), seed=42)
    world = ProviderModel(
        Scenario(name="w", endpoints=(EndpointProfile(id="m", failures=profile),)), 42
    )
    times = [t * 2.5 for t in range(200)]
    ours = [failures.storm_until("m", t) for t in times]
    assert ours == [world.storm_until("m", t) for t in times]
    assert None in ours
    assert any(until is not None for until in ours)


def test_blip_statuses_come_in_their_configured_proportions() -> None:
    failures = Failures({500: 0.1, 503: 0.3}, parse_storms(None), ("m",), seed=0)
    rng = random.Random(5)
    draws = [failures.status("m", 0.0, rng) for _ in range(20_000)]
    counts = {s: sum(1 for d in draws if d and d[0] == s) for s in (500, 503)}
    assert counts[500] == pytest.approx(2_000, rel=0.1)
    assert counts[503] == pytest.approx(6_000, rel=0.1)
    assert not any(d and d[1] for d in draws)  # no storm configured


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("rate=0.1,duration=30s", "storms"),
        ("rate=2,duration=30s,error_rate=0.5", "storms.rate"),
        ("rate=0.1,duration=0s,error_rate=0.5", "storms.duration"),
        ("rate=0.1,duration=soon,error_rate=0.5", "storms.duration"),
    ],
)
def test_a_bad_storm_spec_names_its_part(spec: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_storms(spec)
    assert caught.value.field == field


# -- requests: routes, bodies, headers -------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "target"),
    [
        (b"/v1/chat/completions", ("chat", None)),
        (b"/chat/completions", ("chat", None)),
        (b"/v1/completions", ("completions", None)),
        (b"/openai/deployments/gpt-4o/chat/completions", ("chat", "gpt-4o")),
        (b"/openai/deployments/my%20dep/completions", ("completions", "my dep")),
        (b"/v1/models", ("models", None)),
        (b"/openai/models", ("models", None)),
        (b"/v1/models/gpt-4o", ("model", "gpt-4o")),
        (b"/v1/embeddings", None),
        (b"/openai/deployments/x/embeddings", None),
        (b"/", None),
        (b"/openai/v1/chat/completions", ("chat", None)),
        (b"/openai/v1/completions", ("completions", None)),
        (b"/openai/v1/models", ("models", None)),
        (b"/openai/deployments//chat/completions", None),  # no deployment named "chat"
        (b"/openai/deployments/a%2Fb/chat/completions", ("chat", "a/b")),
        (b"/v1/chat/completions/", None),
        (b"//v1/chat/completions", None),
    ],
)
def test_routes(path: bytes, target: tuple[str, str | None] | None) -> None:
    assert route(path) == target


def test_the_plan_reads_every_mock_header() -> None:
    plan = parse_plan(
        {
            b"x-mock-ttft": b"5ms",
            b"x-mock-itl": b"1ms",
            b"x-mock-tokens": b"20",
            b"x-mock-fault": b"Cut-Mid-Token:4",
            b"authorization": b"ignored",
        }
    )
    assert plan == (0.005, 0.001, 20, "cut-mid-token", 4, None)
    assert parse_plan({b"x-mock-fault": b"status:503"}).status == 503
    assert parse_plan({}) == (None,) * 6


def test_the_plan_refuses_a_length_beyond_the_servers_limit() -> None:
    assert parse_plan({b"x-mock-tokens": b"100"}, max_tokens=100).tokens == 100
    with pytest.raises(ConfigError) as caught:
        parse_plan({b"x-mock-tokens": b"101"}, max_tokens=100)
    assert caught.value.field == "x-mock-tokens"


def test_a_model_from_an_azure_path_wins_over_the_body() -> None:
    ask = parse_ask("chat", b'{"model": "a", "messages": [{"role": "user", "content": "x"}]}', "b")
    assert ask.model == "b"


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_every_event_is_one_well_framed_chunk_of_json(kind: str, include_usage: bool) -> None:
    events = Events(Ask(kind, 'a "quoted" model', True, include_usage, None, 3), "id-1", 7)
    data = events.first() + b"".join(events.token(i) for i in range(len(VOCABULARY)))
    data += events.last("stop", len(VOCABULARY))
    payloads = []
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line, 16)
        assert rest[size : size + 2] == b"\r\n"
        payloads.append(rest[:size])
        data = rest[size + 2 :]
    assert payloads[-1] == b""
    assert payloads[-2] == b"data: [DONE]\n\n"
    decoded: list[dict[str, Any]] = [json.loads(p[6:]) for p in payloads[:-2]]
    assert {d["model"] for d in decoded} == {'a "quoted" model'}
    texts = [
        d["choices"][0].get("delta", {}).get("content") or d["choices"][0].get("text")
        for d in decoded
        if d["choices"]
    ]
    assert "".join(t for t in texts if t).encode() == b"".join(VOCABULARY)


# -- the ticker ------------------------------------------------------------------------------------


class Recorder:
    def __init__(self, name: str, log: list[tuple[str, float, float]], now: Any) -> None:
        self.name, self.log, self.now = name, log, now

    def due(self, at: float) -> None:
        self.log.append((self.name, at, self.now()))


def test_the_ticker_calls_in_due_order_never_early_even_when_loop_timers_fire_early() -> None:
    async def main() -> list[tuple[str, float, float]]:
        loop = asyncio.get_running_loop()

        def lagging() -> float:  # our clock reads behind the loop's: its timers look early
            return loop.time() - 0.0004

        ticker = Ticker(ServerTimer(loop, lagging))
        log: list[tuple[str, float, float]] = []
        for name, at in (("c", 0.030), ("a", 0.010), ("b", 0.010), ("d", 0.020)):
            ticker.at(at, Recorder(name, log, lagging))
        await asyncio.sleep(0.05)
        assert len(ticker) == 0
        return log

    log = run_virtual(main())
    assert [name for name, _, _ in log] == ["a", "b", "d", "c"]
    assert all(called >= at for _, at, called in log)


class Rescheduler:
    """Each call schedules the next one ``step`` later, ``times`` times in all."""

    def __init__(self, ticker: Ticker, step: float, times: int, log: list[float]) -> None:
        self.ticker, self.step, self.left, self.log = ticker, step, times, log

    def due(self, at: float) -> None:
        self.log.append(at)
        self.left -= 1
        if self.left:
            self.ticker.at(at + self.step, self)


def test_a_call_scheduled_from_a_call_does_not_delay_one_already_waiting() -> None:
    async def main() -> tuple[list[float], list[tuple[str, float, float]]]:
        loop = asyncio.get_running_loop()
        ticker = Ticker(ServerTimer(loop, loop.time))
        slow: list[float] = []
        log: list[tuple[str, float, float]] = []
        ticker.at(0.001, Rescheduler(ticker, 0.100, 3, slow))
        ticker.at(0.005, Recorder("waiting", log, loop.time))
        await asyncio.sleep(0.5)
        return slow, log

    slow, log = run_virtual(main())
    assert slow == [0.001, 0.101, 0.201]
    assert log == [("waiting", 0.005, 0.005)]  # on time, not at 0.101


class Broken:
    def due(self, at: float) -> None:
        raise RuntimeError("a bug in one stream")


def test_a_callback_that_raises_does_not_stop_the_others() -> None:
    async def main() -> list[tuple[str, float, float]]:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, context: None)  # the loop logs it; we don't
        ticker = Ticker(ServerTimer(loop, loop.time))
        log: list[tuple[str, float, float]] = []
        ticker.at(0.001, Broken())
        ticker.at(0.002, Recorder("after", log, loop.time))
        await asyncio.sleep(0.01)
        return log

    assert run_virtual(main()) == [("after", 0.002, 0.002)]


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"port": 70000}, "port"),
        ({"models": []}, "models"),
        ({"models": ["a", "a"]}, "models"),
        ({"models": ["a/b"]}, "models"),
        ({"ttft": "lognormal:median=1s"}, "ttft"),
        ({"itl": "soon"}, "itl"),
        ({"output_tokens": "none"}, "output_tokens"),
        ({"capacity": 0}, "capacity"),
        ({"overflow": "drop"}, "overflow"),
        ({"rpm": -1}, "rpm"),
        ({"tpm": 1.5}, "tpm"),
        ({"fail": {200: 0.1}}, "fail"),
        ({"fail": {503: 0.8, 500: 0.8}}, "fail"),
        ({"fail": {503: 0.1}, "storms": FailureProfile(error_rate=0.1)}, "storms"),
        ({"api_keys": ["ok", "has space"]}, "api_keys"),
        ({"seed": -1}, "seed"),
        ({"utilization_header": True}, "utilization_header"),
        ({"utilization_header": "yes", "capacity": 2}, "utilization_header"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"output_tokens": 200, "max_output_tokens": 100}, "output_tokens"),
        ({"output_tokens": "uniform:min=1,max=101", "max_output_tokens": 100}, "output_tokens"),
    ],
)
def test_bad_arguments_are_refused_when_the_server_is_built(
    options: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        LlmServer(**options)
    assert caught.value.field == field
    with pytest.raises(ConfigError):
        LlmServerProcess(**{k: v for k, v in options.items() if k != "port"} or {"seed": -1})


def test_a_bad_key_is_refused_without_being_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        LlmServer(api_keys=["sk-secret\n"])
    assert "sk-secret" not in str(caught.value)


def test_the_url_exists_only_once_started() -> None:
    server = LlmServer()
    with pytest.raises(RuntimeError):
        _ = server.url
    assert "not started" in repr(server)
    assert "models mock-llm" in server.describe()


# -- exact distributions in sorted runs ----------------------------------------------------------


@given(
    st.lists(st.floats(-1e6, 1e6), max_size=300),
    st.lists(st.integers(0, 40), min_size=1, max_size=12),
    st.integers(1, 8),
)
@settings(max_examples=200, deadline=None)
def test_values_report_the_exact_nearest_rank_figures_however_they_arrived_and_settled(
    values: list[float], batches: list[int], slice_size: int
) -> None:
    # Tiny slices and cap: many runs, many merges, as millions of values make in a server.
    distribution = Values(slice_size=slice_size, cap=4 * slice_size)
    position = 0
    for size in batches:  # values arrive in batches; work may be done after any of them
        distribution.extend(values[position : position + size])
        position += size
        distribution.settle()
    distribution.extend(values[position:])
    summary = distribution.summary()
    ordered = sorted(values)
    assert summary["count"] == len(values) == len(distribution)
    if not values:
        assert set(summary.values()) == {0, None}
        return
    assert (summary["min"], summary["max"]) == (ordered[0], ordered[-1])
    for key, q in PERCENTILES:
        assert summary[key] == exact_percentile(ordered, q)
    assert summary["mean"] == pytest.approx(math.fsum(values) / len(values), abs=1e-9)


@given(st.lists(st.lists(st.integers(-50, 50), max_size=30), min_size=1, max_size=8))
def test_select_finds_every_rank_across_sorted_runs(runs: list[list[int]]) -> None:
    arrays = [array("d", sorted(run)) for run in runs]
    ordered = sorted(v for run in runs for v in run)
    assert [select(arrays, k) for k in range(len(ordered))] == ordered
    with pytest.raises(IndexError):
        select(arrays, len(ordered))


def test_one_step_sorts_at_most_a_slice_or_merges_at_most_a_cap() -> None:
    distribution = Values()
    distribution.extend(float(i % 997) for i in range(5 * SLICE + 123))
    largest_run = 0
    for _ in distribution.steps():
        largest_run = max(largest_run, *(len(run) for run in distribution._runs))
        assert len(distribution._fresh) % SLICE in (0, 123)  # sorted a slice at a time
    assert largest_run <= CAP
    assert distribution.settled()
    assert distribution.summary()["count"] == 5 * SLICE + 123


def test_a_ledger_summary_is_over_ok_records_and_discards_an_older_epochs() -> None:
    old, new = Epoch(0, 0.0), Epoch(1, 10.0)
    ledger = Ledger(new)
    ok = Record("a", "chat", 11.0, new)
    ok.status, ok.outcome, ok.stream = 200, Outcome.OK, True
    ok.token_times.extend([11.5, 11.75, 12.25])
    ok.end, ok.completion_tokens, ok.prompt_tokens = 12.25, 3, 4
    failed = Record("b", "chat", 11.0, new)
    failed.status, failed.outcome, failed.end = 503, Outcome.ERROR, 11.0
    stale = Record("c", "chat", 9.0, old)
    stale.status, stale.outcome, stale.end = 200, Outcome.OK, 11.0
    for record in (ok, failed, stale):
        ledger.add(record)
    summary = ledger.summary()
    assert (summary["requests"], summary["discarded_after_reset"]) == (2, 1)
    assert summary["statuses"] == {"200": 1, "503": 1}
    assert summary["outcomes"] == {"error": 1, "ok": 1}
    assert (summary["prompt_tokens"], summary["completion_tokens"]) == (4, 3)
    assert (summary["ttft"]["max"], summary["e2e"]["max"]) == (0.5, 1.25)
    assert (summary["itl"]["min"], summary["itl"]["max"], summary["tpot"]["p50"]) == (
        0.25,
        0.5,
        0.375,
    )
    assert ledger.clear(Epoch(2, 20.0)) == 2
    assert ledger.summary()["requests"] == 0


# -- the exchange's states -----------------------------------------------------------------------


def _exchange_in(state: State) -> Exchange:
    record = Record("0000000000000001", "chat", 0.0, Epoch(0, 0.0))
    exchange = Exchange(
        cast(Any, None),
        cast(Any, None),
        record,
        Ask("chat", "m", True, False, None, 1),
        tokens=3,
        finish="stop",
        ttft=0.0,
        itl=Delay.parse("0"),
        rng=random.Random(0),
        fault=None,
        fault_at=1,
        keep_alive=True,
    )
    exchange.state = state
    return exchange


@pytest.mark.parametrize("event", list(Event))
@pytest.mark.parametrize("state", list(State))
def test_an_exchange_moves_only_as_the_transition_table_says(state: State, event: Event) -> None:
    exchange = _exchange_in(state)
    if (state, event) in TRANSITIONS:
        exchange._move(event)
        assert exchange.state is TRANSITIONS[state, event] is next_state(state, event)
    else:
        with pytest.raises(IllegalTransition):
            exchange._move(event)
        assert exchange.state is state  # an illegal event changes nothing


def test_every_exchange_ends_done_and_done_is_final() -> None:
    assert not [key for key in TRANSITIONS if key[0] is State.DONE]
    for state in (State.QUEUED, State.RUNNING, State.ENDED):  # a client can always leave
        assert TRANSITIONS[state, Event.LOSE] is State.DONE
        assert TRANSITIONS[state, Event.FAIL] is State.DONE


def test_the_servers_package_exports_both_servers_and_both_ways_to_serve_them() -> None:
    assert sorted(servers.__all__) == [
        "Delay",
        "EchoServer",
        "EchoServerProcess",
        "LlmServer",
        "LlmServerProcess",
        "check_processes",
        "serve_echo_fleet",
        "serve_llm_fleet",
        "serve_llm_until_signalled",
        "serve_until_signalled",
        "server_tls",
    ]
    assert all(hasattr(servers, name) for name in servers.__all__)
