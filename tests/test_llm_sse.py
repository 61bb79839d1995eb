"""The incremental SSE parser: events, their arrival times, and malformed streams."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import ErrorClass, error_class_of
from pyattacker.llm import LlmErrorKind, SseError, SseEvent, SseParser


def parse(stream: bytes, *, strict: bool = True) -> list[SseEvent]:
    parser = SseParser(strict=strict)
    events = parser.feed(stream, 0.0)
    parser.close()
    return events


def test_data_lines_become_events_stamped_with_the_chunk_that_completed_them() -> None:
    parser = SseParser()
    assert parser.feed(b"data: one\n\ndata: tw", 1.0) == [SseEvent("one", 1.0)]
    assert parser.feed(b"o\n", 2.0) == []
    assert parser.feed(b"\n", 3.0) == [SseEvent("two", 3.0)]


def test_lf_crlf_and_lone_cr_line_endings_give_the_same_events() -> None:
    expected = [SseEvent("a", 0.0), SseEvent("b", 0.0)]
    for newline in ("\n", "\r\n", "\r"):
        text = f"data: a{newline}{newline}data: b{newline}{newline}"
        assert parse(text.encode()) == expected, repr(newline)


def test_a_crlf_split_between_two_chunks_is_one_line_end_not_a_blank_line() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\r", 1.0) == []
    assert parser.feed(b"\ndata: b\r\n\r\n", 2.0) == [SseEvent("a\nb", 2.0)]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse(b"data: first\ndata:second\ndata\n\n") == [SseEvent("first\nsecond\n", 0.0)]


def test_comments_ids_retry_and_event_types_are_read_as_the_standard_says() -> None:
    parser = SseParser()
    stream = b": keep-alive\nid: 7\nretry: 100\nevent: error\ndata: x\n\ndata: y\n\n"
    assert parser.feed(stream, 0.0) == [SseEvent("x", 0.0, "error"), SseEvent("y", 0.0)]
    assert parser.last_id == "7"


def test_an_event_without_data_is_not_dispatched() -> None:
    assert parse(b"event: ping\n\n: only a comment\n\n") == []


def test_a_leading_byte_order_mark_is_dropped() -> None:
    assert parse("\ufeffdata: x\n\n".encode()) == [SseEvent("x", 0.0)]


def test_done_ends_the_stream_and_whatever_follows_it_is_ignored() -> None:
    parser = SseParser()
    events = parser.feed(b"data: a\n\ndata: [DONE]\n\ndata: late\n\n<html>", 0.0)
    assert [e.data for e in events] == ["a", "[DONE]"]
    assert events[-1].done
    assert parser.done
    assert parser.feed(b"data: more\n\n", 1.0) == []
    parser.close()  # nothing to complain about after [DONE]


def test_a_line_that_is_no_sse_field_is_a_broken_stream_naming_the_line() -> None:
    with pytest.raises(SseError) as caught:
        parse(b"data: ok\n\n<!DOCTYPE html>\n")
    assert caught.value.kind is LlmErrorKind.BROKEN_STREAM
    assert caught.value.line == 3
    assert "line 3" in str(caught.value)
    assert "<!DOCTYPE html>" in str(caught.value)
    assert error_class_of(caught.value) is ErrorClass.UPSTREAM


def test_without_strict_unknown_fields_are_ignored_as_browsers_do() -> None:
    assert parse(b"<html>\ndata: x\n\n", strict=False) == [SseEvent("x", 0.0)]


def test_a_stream_ending_in_the_middle_of_a_line_is_cut() -> None:
    parser = SseParser()
    parser.feed(b'data: {"choices": [{"delta": {"content": "Hel', 0.0)
    with pytest.raises(SseError, match="middle of line 1") as caught:
        parser.close()
    assert caught.value.kind is LlmErrorKind.STREAM_CUT


def test_a_stream_ending_between_an_events_lines_and_its_blank_line_is_cut() -> None:
    parser = SseParser()
    parser.feed(b"data: x\n", 0.0)
    with pytest.raises(SseError, match="middle of an event") as caught:
        parser.close()
    assert caught.value.kind is LlmErrorKind.STREAM_CUT


def test_a_stream_that_ends_between_events_closes_cleanly_without_being_done() -> None:
    parser = SseParser()
    parser.feed(b"data: x\n\n: bye\n", 0.0)
    parser.close()
    assert not parser.done


def test_a_line_longer_than_the_limit_is_refused_whether_split_or_whole() -> None:
    with pytest.raises(SseError, match="longer than 16 bytes"):
        SseParser(max_line=16).feed(b"data: " + b"x" * 20 + b"\n\n", 0.0)
    parser = SseParser(max_line=16)
    parser.feed(b"data: " + b"x" * 8, 0.0)
    with pytest.raises(SseError, match="longer than 16 bytes"):
        parser.feed(b"x" * 8, 1.0)


# --------------------------------------------------------------------------- properties


@dataclass
class Model:
    """A stream built from known events: the bytes, and what a parser must find in them."""

    stream: bytes
    expected: list[tuple[str, str]]  # (data, type) of each dispatched event


_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"))


@st.composite
def streams(draw: st.DrawFn) -> Model:
    parts: list[str] = []
    expected: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 6))):
        newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))  # one style per event
        kind = draw(st.sampled_from(["", "update"]))
        data = draw(st.lists(_TEXT, max_size=3))
        lines = [f": {draw(_TEXT)}"] if draw(st.booleans()) else []
        lines += [f"event: {kind}"] if kind else []
        lines += [f"data: {value}" for value in data]
        parts.append("".join(line + newline for line in lines) + newline)
        if data:
            expected.append(("\n".join(data), kind or "message"))
    if draw(st.booleans()):
        parts.append("data: [DONE]\n\n")
        expected.append(("[DONE]", "message"))
    if ("[DONE]", "message") in expected:  # nothing after the first [DONE] counts
        expected = expected[: expected.index(("[DONE]", "message")) + 1]
    return Model("".join(parts).encode(), expected)


@st.composite
def splits(draw: st.DrawFn, stream: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(stream)), max_size=12)))
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


def feed_all(chunks: list[bytes]) -> list[SseEvent]:
    parser = SseParser()
    events = [event for i, chunk in enumerate(chunks) for event in parser.feed(chunk, float(i))]
    parser.close()
    return events


@given(st.data())
def test_any_split_of_a_stream_into_chunks_yields_the_same_events(data: st.DataObject) -> None:
    model = data.draw(streams())
    chunks = data.draw(splits(model.stream))
    events = feed_all(chunks)
    assert [(e.data, e.type) for e in events] == model.expected
    # Each event is stamped with the chunk holding the byte that completed it: the same
    # stream fed one byte at a time (stamped by offset) says which byte that is.
    ends = [int(e.at) for e in feed_all([bytes([b]) for b in model.stream])]
    starts = [sum(len(c) for c in chunks[:i]) for i in range(len(chunks))]
    owner = [max(i for i, s in enumerate(starts) if s <= end and chunks[i]) for end in ends]
    assert [int(e.at) for e in events] == owner


@given(st.binary(max_size=200), st.data())
def test_arbitrary_bytes_give_events_or_an_sse_error_the_same_way_for_any_split(
    stream: bytes, data: st.DataObject
) -> None:
    def outcome(chunks: list[bytes]) -> object:
        try:
            return [(e.data, e.type) for e in feed_all(chunks)]
        except SseError as exc:
            return (exc.kind, exc.line)

    assert outcome(data.draw(splits(stream))) == outcome([stream])
