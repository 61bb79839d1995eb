"""The mock LLM server's pure parts: lengths, limits, dice, routes, event bytes, the ticker."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError
from pyattacker.servers import LlmServer, LlmServerProcess
from pyattacker.servers._llm_dice import Failures, TokenCount, parse_storms
from pyattacker.servers._llm_handle import parse_plan, route
from pyattacker.servers._llm_limits import Bucket, Limiter, go_duration
from pyattacker.servers._llm_ticker import Ticker
from pyattacker.servers._llm_wire import VOCABULARY, Ask, Events, parse_ask
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

        ticker = Ticker(loop, lagging)
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
        ticker = Ticker(loop, loop.time)
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
        ticker = Ticker(loop, loop.time)
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
