"""Prompt sources: synthetic prompts of exact length, JSONL files, and ``--shape``."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ConfigError
from pyattacker.llm import (
    MAX_SHAPE_TOKENS,
    VOCABULARY,
    JsonlPrompts,
    Prompt,
    Shape,
    SyntheticPrompts,
    parse_shape,
)


@given(st.integers(1, 3000), st.integers(0, 2**32), st.integers(0, 10**6))
def test_a_synthetic_prompt_has_exactly_the_asked_number_of_vocabulary_words(
    context: int, seed: int, n: int
) -> None:
    prompt = SyntheticPrompts(context, 16, seed).prompt(n)
    assert prompt.text is not None
    words = prompt.text.split(" ")
    assert len(words) == context == len(prompt.text.split())
    assert set(words) <= set(VOCABULARY)
    assert prompt.max_tokens == 16


@given(st.integers(1, 200), st.integers(0, 2**32), st.integers(0, 10**6))
def test_a_synthetic_prompt_depends_only_on_the_seed_and_the_request_ordinal(
    context: int, seed: int, n: int
) -> None:
    first = SyntheticPrompts(context, 8, seed).prompt(n)
    assert SyntheticPrompts(context, 8, seed).prompt(n) == first
    assert SyntheticPrompts(context, 99, seed).prompt(n).text == first.text


@pytest.mark.parametrize("context", [1, 15, 16, 17, 18, 1000])
def test_a_synthetic_prompt_has_exactly_its_length_on_both_sides_of_its_fresh_opening(
    context: int,
) -> None:
    source = SyntheticPrompts(context, 1, seed=3)
    for n in range(50):
        text = source.prompt(n).text
        assert text is not None
        assert len(text.split(" ")) == context


def test_synthetic_prompts_differ_from_request_to_request_and_seed_to_seed() -> None:
    source = SyntheticPrompts(50, 8, seed=1)
    texts = {source.prompt(n).text for n in range(20)}
    assert len(texts) == 20
    assert SyntheticPrompts(50, 8, seed=2).prompt(0).text != source.prompt(0).text


def words(source: SyntheticPrompts, n: int) -> list[str]:
    text = source.prompt(n).text
    assert text is not None
    return text.split(" ")


@given(st.integers(17, 2000), st.integers(0, 2**32), st.integers(0, 10**9))
def test_no_two_requests_open_with_the_same_words_so_no_prefix_cache_can_serve_them(
    context: int, seed: int, first: int
) -> None:
    source = SyntheticPrompts(context, 8, seed)
    openings = {tuple(words(source, n)[:16]) for n in range(first, first + 40)}
    assert len(openings) == 40


def test_consecutive_requests_almost_never_start_with_the_same_word() -> None:
    source = SyntheticPrompts(200, 8, seed=11)
    firsts = [words(source, n)[0] for n in range(2000)]
    same = sum(a == b for a, b in itertools.pairwise(firsts))
    assert same < 20  # 1 in 324 expected: about 6


def test_the_words_after_the_opening_are_a_rotation_of_one_shared_text_per_seed() -> None:
    source = SyntheticPrompts(116, 8, seed=5)
    tails = [words(source, n)[16:] for n in range(30)]
    base = tails[0]
    doubled = base + base
    for tail in tails:
        assert len(tail) == 100
        assert any(doubled[i : i + 100] == tail for i in range(100)), "not a rotation"
    assert len({tuple(tail) for tail in tails}) >= 20  # different starts, mostly
    other = SyntheticPrompts(116, 8, seed=6)
    assert sorted(words(other, 0)[16:]) != sorted(base)


def test_a_shape_or_length_beyond_the_largest_context_window_is_refused_naming_it() -> None:
    too_many = MAX_SHAPE_TOKENS + 1
    for args, field in [((too_many, 10), "context_tokens"), ((10, too_many), "max_tokens")]:
        with pytest.raises(ConfigError, match=f"at most {MAX_SHAPE_TOKENS:,}") as caught:
            SyntheticPrompts(*args)
        assert caught.value.field == field
    for text, field in [
        ("999999999:10", "shape.context_tokens"),
        (f"10:{too_many}", "shape.max_tokens"),
    ]:
        with pytest.raises(ConfigError) as caught:
            parse_shape(text)
        assert caught.value.field == field
        assert "CONTEXT:MAX_TOKENS" in str(caught.value)
    assert parse_shape(f"{MAX_SHAPE_TOKENS}:{MAX_SHAPE_TOKENS}") == (
        MAX_SHAPE_TOKENS,
        MAX_SHAPE_TOKENS,
    )


def test_the_vocabulary_is_plain_lower_case_words_without_repeats() -> None:
    assert len(VOCABULARY) == len(set(VOCABULARY)) >= 300
    assert all(word.isascii() and word.isalpha() and word.islower() for word in VOCABULARY)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_synthetic_prompts_refuse_a_length_that_is_not_a_whole_number_of_tokens(
    bad: object,
) -> None:
    with pytest.raises(ConfigError, match="context_tokens"):
        SyntheticPrompts(bad, 10)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_tokens"):
        SyntheticPrompts(10, bad)  # type: ignore[arg-type]


def test_a_shape_is_context_colon_max_tokens() -> None:
    assert parse_shape("1000:200") == Shape(1000, 200)
    assert parse_shape(" 5 : 1 ") == Shape(5, 1)
    source = SyntheticPrompts.from_shape("12:3", seed=4)
    assert (source.context_tokens, source.max_tokens, source.seed) == (12, 3, 4)


@pytest.mark.parametrize(
    "text", ["1000", "1000:", ":200", "a:b", "10:0", "0:10", "1:2:3", "-1:5", "1.5:2"]
)
def test_a_bad_shape_is_a_config_error_showing_the_expected_form(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_shape(text)
    assert caught.value.field is not None
    assert caught.value.field.startswith("shape")
    assert "CONTEXT:MAX_TOKENS" in str(caught.value)


def write_lines(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n",
        encoding="utf-8",
    )
    return path


def test_jsonl_prompts_are_used_in_order_and_cycle_by_request_ordinal(tmp_path: Path) -> None:
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5}
    path = write_lines(tmp_path, chat, "", {"prompt": "Once upon a time"})
    source = JsonlPrompts(path)
    assert len(source) == 2
    assert source.prompt(0) == Prompt(messages=({"role": "user", "content": "Hi"},), max_tokens=5)
    assert source.prompt(1) == Prompt(text="Once upon a time")
    assert source.prompt(2) == source.prompt(0)
    assert source.prompt(5) == source.prompt(1)
    assert source.has_messages


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"prompt": "x", "max_token": 3}, "unknown key 'max_token'"),
        ({"prompt": "x", "messages": []}, "exactly one of"),
        ({"max_tokens": 3}, "exactly one of"),
        ({"prompt": ""}, "non-empty string"),
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"content": "x"}]}, "'role' string"),
        ({"messages": [{"role": "user"}]}, "no 'content'"),
        ({"prompt": "x", "max_tokens": 0}, "whole number >= 1"),
        ({"prompt": "x", "max_tokens": MAX_SHAPE_TOKENS + 1}, "at most 2,000,000 tokens"),
    ],
)
def test_a_bad_jsonl_line_is_a_config_error_naming_its_line_number(
    tmp_path: Path, line: object, says: str
) -> None:
    path = write_lines(tmp_path, {"prompt": "fine"}, line)
    with pytest.raises(ConfigError) as caught:
        JsonlPrompts(path)
    assert says in str(caught.value)
    assert f"{path}:2" in str(caught.value)


def test_an_empty_or_missing_prompts_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no prompts"):
        JsonlPrompts(write_lines(tmp_path, "", "  "))
    with pytest.raises(ConfigError, match="cannot read"):
        JsonlPrompts(tmp_path / "missing.jsonl")


def test_a_prompt_is_either_text_or_messages() -> None:
    with pytest.raises(ConfigError):
        Prompt()
    with pytest.raises(ConfigError):
        Prompt(text="x", messages=({"role": "user", "content": "x"},))
    assert repr(Prompt(text="a b c", max_tokens=2)) == "<Prompt 3 words max_tokens=2>"
