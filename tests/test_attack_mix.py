"""Request mixes: seeded draws by arrival index, templates, data rows, and the checks a
mix passes before any traffic."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import AttackPlan, DataRows, Mix, MixLine, OpenModel
from pyattacker.attack._draws import BLOCK, Draws
from pyattacker.attack._mix import prepare
from pyattacker.attack._mix_send import MixSender
from pyattacker.attack._template import Template
from pyattacker.errors import ConfigError
from pyattacker.http import HttpClient
from pyattacker.measure import Attempt

URL = "http://127.0.0.1:9/"


def plan_with(mix: Mix, *urls: str, **options: object) -> AttackPlan:
    return AttackPlan.build(urls or [URL], OpenModel(rate=10), requests=10, mix=mix, **options)


# -- draws ---------------------------------------------------------------------------------


def test_the_same_seed_draws_the_same_sequence_whatever_order_it_is_asked_in() -> None:
    weights = [3.0, 1.0, 1.0]
    forward_draws = Draws(7, "mix", weights)
    forward = [forward_draws(n) for n in range(3 * BLOCK)]
    backward_draws = Draws(7, "mix", weights)
    backward = [backward_draws(n) for n in reversed(range(3 * BLOCK))][::-1]
    assert forward == backward
    other = Draws(8, "mix", weights)
    assert forward != [other(n) for n in range(3 * BLOCK)]


def test_a_draw_is_a_function_of_seed_and_index_even_after_its_block_was_forgotten() -> None:
    draws = Draws(1, "mix", [1.0, 2.0])
    first = [draws(n) for n in range(10)]
    for block in range(1, 20):  # more blocks than are kept
        draws(block * BLOCK)
    assert [draws(n) for n in range(10)] == first


def test_each_line_is_drawn_in_proportion_to_its_weight_within_a_binomial_bound() -> None:
    weights = [6.0, 3.0, 1.0]
    n = 100_000
    draws = Draws(0, "mix", weights)
    counts = [0, 0, 0]
    for i in range(n):
        counts[draws(i)] += 1
    for count, weight in zip(counts, weights, strict=True):
        p = weight / sum(weights)
        sigma = math.sqrt(n * p * (1 - p))
        assert abs(count - n * p) < 6 * sigma, (counts, weights)


def test_weights_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Draws(0, "mix", [1.0, 0.0])


# -- templates -----------------------------------------------------------------------------

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda s: s != "key")
texts = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=12)


@given(st.lists(st.tuples(texts, names), max_size=5), texts, st.data())
def test_a_template_fills_every_field_and_keeps_every_literal(
    pieces: list[tuple[str, str]], tail: str, data: st.DataObject
) -> None:
    text = "".join(f"{lit}{{{name}}}" for lit, name in pieces) + tail
    row = {name: data.draw(texts) for _, name in pieces}
    expected = "".join(f"{lit}{row[name]}" for lit, name in pieces) + tail
    template = Template(text)
    assert template.fill(row) == expected
    assert template.fields == tuple(dict.fromkeys(name for _, name in pieces))
    assert template.missing(row) is None


def test_braces_that_are_not_a_field_stay_text_and_key_is_left_for_the_keys() -> None:
    template = Template('{"id": {id}, "k": "{key}", "x": { }, "{1}": 1}')
    assert template.fields == ("id",)
    assert template.fill({"id": 42}) == '{"id": 42, "k": "{key}", "x": { }, "{1}": 1}'
    assert template.missing({}) == "id"


# -- data rows -----------------------------------------------------------------------------


def test_sequential_rows_go_in_turn_and_start_again(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 1}\n\n{"id": 2}\n{"id": 3}\n')
    rows = DataRows.load(str(path))
    assert [rows.row(n) for n in range(5)] == [{"id": i} for i in (1, 2, 3, 1, 2)]


def test_random_rows_are_reproducible_by_seed_and_cover_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("id,name\n1,a\n2,b\n3,c\n")
    one = DataRows.load(str(path), order="random", seed=5)
    two = DataRows.load(str(path), order="random", seed=5)
    picks = [one.row(n) for n in range(300)]
    assert picks == [two.row(n) for n in range(300)]
    assert {row["id"] for row in picks if row} == {"1", "2", "3"}  # CSV values are strings


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("rows.jsonl", '{"id": 1}\n[1, 2]\n', "line 2: a row must be a JSON object"),
        ("rows.jsonl", '{"id": 1}\n{"id": \n', "line 2: not JSON"),
        ("rows.jsonl", "\n\n", "no rows"),
        ("rows.csv", "id,name\n1\n", "line 2: not as many values"),
    ],
)
def test_a_bad_rows_file_is_refused_naming_the_line(
    tmp_path: Path, name: str, text: str, says: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=says) as info:
        DataRows.load(str(path))
    assert info.value.field == "--data"


# -- the plan's checks and the prepared requests -------------------------------------------


def test_a_row_missing_a_field_a_template_uses_is_refused_before_any_traffic() -> None:
    rows = DataRows([{"id": 1}, {"name": "x"}], path="rows.jsonl")
    mix = Mix([MixLine(url="/users/{id}", where="t line 1")], data=rows)
    with pytest.raises(ConfigError, match=r"rows.jsonl row 2 has no field 'id'.*t line 1") as info:
        plan_with(mix)
    assert info.value.field == "--data"


def test_a_line_on_another_host_is_refused_naming_the_line() -> None:
    mix = Mix([MixLine(url="http://10.0.0.1:80/a", where="t line 4")])
    with pytest.raises(ConfigError, match="t line 4: url") as info:
        plan_with(mix)
    assert info.value.field == "url"


def test_a_header_the_client_would_refuse_is_refused_naming_the_line() -> None:
    mix = Mix([MixLine(url="/", headers=(("Content-Length", "3"),), where="t line 2")])
    with pytest.raises(ConfigError, match="t line 2"):
        plan_with(mix)


def test_a_mix_is_not_for_llm_attacks() -> None:
    from pyattacker.attack import LlmSpec
    from pyattacker.llm import SyntheticPrompts

    spec = LlmSpec(model="m", prompts=SyntheticPrompts(10, 5))
    with pytest.raises(ConfigError, match="LLM"):
        plan_with(Mix([MixLine(url="/")]), llm=spec)


def test_a_line_takes_the_plans_defaults_and_its_headers_replace_the_plans() -> None:
    plan = plan_with(
        Mix([MixLine(url="/a?x=1", headers=(("x-b", "line"),))]),
        "http://127.0.0.1:9/base",
        method="POST",
        body=b"plan",
        headers=[("X-B", "plan"), ("x-c", "plan")],
    )
    prepared = prepare(plan, plan.resolved_targets()[0], plan.mix.lines[0], templates=False)  # type: ignore[union-attr]
    assert (prepared.method, prepared.url.target, prepared.body) == ("POST", "/a?x=1", b"plan")
    assert prepared.headers == (("x-c", "plan"), ("x-b", "line"))
    assert prepared.name == "POST /a"


def test_a_templated_line_fills_url_headers_and_body_from_the_requests_row() -> None:
    rows = DataRows([{"id": "a b/c", "tok": "t1", "n": 7}], path="rows.jsonl")
    line = MixLine(url="/users/{id}", method="PUT", headers=(("x-t", "{tok}"),),
                   body=b'{"n": {n}}', name="user")  # fmt: skip
    plan = plan_with(Mix([line], data=rows))
    sender = MixSender(HttpClient(), plan)
    attempt = Attempt(request=0, attempt=1, scheduled=0.0)
    method, url, headers, body = sender._request(plan.resolved_targets()[0], attempt)
    assert (method, url.target, headers, body) == (
        "PUT", "/users/a%20b%2Fc", (("x-t", "t1"),), b'{"n": 7}',
    )  # fmt: skip
    assert (attempt.name, attempt.bytes_sent) == ("user", len(b'{"n": 7}'))


def test_the_mix_sender_sends_each_arrival_its_seeded_line() -> None:
    lines = [MixLine(url=f"/{i}", weight=w) for i, w in enumerate((5.0, 1.0, 1.0))]
    plan = plan_with(Mix(lines), seed=3)
    target = plan.resolved_targets()[0]

    def names() -> list[str | None]:
        sender = MixSender(HttpClient(), plan)
        out = []
        for n in range(500):
            attempt = Attempt(request=n, attempt=1, scheduled=0.0)
            sender._request(target, attempt)
            out.append(attempt.name)
        return out

    first = names()
    assert first == names()
    assert set(first) == {"GET /0", "GET /1", "GET /2"}
    assert first.count("GET /0") > first.count("GET /1")


# -- counting a mix's names ----------------------------------------------------------------


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(),
                          st.floats(0.0, 3.0)), max_size=300))  # fmt: skip
def test_named_answers_counted_in_batches_agree_with_counting_each_as_it_ends(
    requests: list[tuple[str | None, bool, float]],
) -> None:
    from pyattacker.attack._tally import Tally
    from pyattacker.measure import Outcome

    batched = Tally(origin=0.0, window=0.5, late_after=0.01, per_target=False, on_record=None)
    each = Tally(origin=0.0, window=0.5, late_after=0.01, per_target=False,
                 on_record=lambda record: None)  # fmt: skip
    for n, (name, ok, at) in enumerate(requests):
        for counted in (batched, each):
            attempt = Attempt(n, 1, scheduled=at, sent=at + 0.001, end=at + 0.004, name=name)
            attempt.outcome, attempt.status = (Outcome.OK, 200) if ok else (Outcome.FAILED, 503)
            counted.finished_one(attempt)
    assert list(batched.names.stats) == list(each.names.stats)  # in order of first sight
    for name, stats in each.names.stats.items():
        assert batched.names.stats[name] == stats
        assert batched.names.windows[name].windows() == each.names.windows[name].windows()
    assert batched.total == each.total


def test_a_key_in_the_query_is_refused_with_lines_whose_path_would_drop_it() -> None:
    with pytest.raises(ConfigError, match="query that carries") as info:
        plan_with(Mix([MixLine(url="/a")]), "http://127.0.0.1:9/?key={key}", keys=("k1",))
    assert info.value.field == "--targets"
