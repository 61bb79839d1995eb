"""What went wrong, in the attack's own words: the bounded count of error messages the
requests ended with, in every report, and never a key in it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from http_helpers import Peer, Server
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    Engine,
    LlmSpec,
    OpenModel,
    SampleWriter,
    Target,
    attack,
)
from pyattacker.attack._tally import (
    MAX_MESSAGES,
    OTHER_MESSAGES,
    ErrorGroup,
    ErrorMessages,
    error_key,
)
from pyattacker.clock import LoopClock
from pyattacker.llm import SyntheticPrompts
from pyattacker.measure import Attempt, RequestRecord, RequestStats
from pyattacker.report import attack_json, attack_markdown, attack_text
from pyattacker.servers import LlmServer
from pyattacker.testing import run_virtual

A = "http://127.0.0.1:9/a"
KEY = "sk-echoed-0123456789abcdef"


# --- the bounded count ---------------------------------------------------------------


WORDS = [f"E{letter}" for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]  # no digit: 26 kinds


def test_error_messages_keep_twenty_kinds_and_count_the_rest_as_other() -> None:
    errors = ErrorMessages()
    for word in WORDS[: MAX_MESSAGES + 5]:
        errors.note(word)
    for _ in range(3):
        errors.note("EH")  # a kept kind goes on counting
    errors.note(WORDS[MAX_MESSAGES])  # one that came when the table was full: other
    groups = errors.groups()
    assert len(groups) == MAX_MESSAGES + 1
    assert groups[:2] == [ErrorGroup("EH", 4, "EH"), ErrorGroup("EA", 1, "EA")]  # ties by key
    assert groups[-1] == ErrorGroup(OTHER_MESSAGES, 6, None)
    assert sum(group.count for group in groups) == MAX_MESSAGES + 5 + 3 + 1


def test_no_error_is_no_entry() -> None:
    assert ErrorMessages().groups() == []


RETRY_AFTER = (
    "LlmStatusError: HTTP 429: rate limited, retry after {s} s; the server says 'Please try "
    "again in {ms}ms.' (url='http://127.0.0.1:{port}/v1/chat/completions', status=429, "
    "retry_after={s}, kind='rate_limit')"
)
BROKEN = "LlmResponseError: broken SSE event in chatcmpl-{id}: line {n} is not JSON"


def test_messages_that_differ_only_in_numbers_and_ids_are_one_kind_with_its_first_example() -> None:
    errors = ErrorMessages()
    first = RETRY_AFTER.format(s="0.051", ms=51, port=45299)
    errors.note(first)
    for n in range(1, 40):  # 40 Retry-After values: far more than the 20 slots
        errors.note(RETRY_AFTER.format(s=f"0.{n:03d}", ms=n, port=45299 + n % 2))
    for n, ident in enumerate(("9f2c3a01", "4be7d0aa", "a1b2c3d4e5f6")):
        errors.note(BROKEN.format(id=ident, n=n))
    errors.note("Refused: HTTP 503")
    errors.note("Refused: HTTP 503")
    groups = errors.groups()
    assert groups == [
        ErrorGroup(
            "LlmStatusError: HTTP 429: rate limited, retry after <n> s; the server says "
            "'Please try again in <n>ms.' (url='http://<n>:<n>/v1/chat/completions', "
            "status=429, retry_after=<n>, kind='rate_limit')",
            40,
            first,
        ),
        ErrorGroup(
            "LlmResponseError: broken SSE event in <id>: line <n> is not JSON",
            3,
            BROKEN.format(id="9f2c3a01", n=0),
        ),
        ErrorGroup("Refused: HTTP 503", 2, "Refused: HTTP 503"),
    ]


def test_status_codes_and_plain_words_keep_kinds_apart() -> None:
    assert error_key("Refused: HTTP 404") != error_key("Refused: HTTP 429")
    assert error_key("x (status=503)") != error_key("x (status=500)")
    assert error_key("dropped: max_in_flight requests") == "dropped: max_in_flight requests"
    assert error_key("uuid 3f2504e0-4f89-11d3-9a0c-0305e82c3301 v1") == "uuid <id> v1"


# --- keys are scrubbed before the message is cut -------------------------------------


class Leaky:
    """A sender whose every attempt fails with an error that quotes the request's headers."""

    async def send(self, target: Target, attempt: Attempt) -> None:
        attempt.sent = LoopClock().now()
        attempt.end = attempt.sent
        headers = dict(target.headers)
        pad = "x" * 270  # unscrubbed, the cut at 300 characters would keep the key's start
        raise RuntimeError(f"{pad} {headers['Authorization']} and again {KEY}")


def test_an_error_that_quotes_a_key_is_scrubbed_before_it_is_cut_or_counted() -> None:
    plan = AttackPlan.build(
        [A], OpenModel(rate=10), requests=2, headers=[("Authorization", "Bearer {key}")],
        keys=(KEY,),
    )  # fmt: skip
    records: list[RequestRecord] = []

    async def main() -> AttackResult:
        return await Engine(plan, Leaky(), on_record=records.append).run()

    result = run_virtual(main(), start=0.0)
    for record in records:
        error = record.attempts[0].error
        assert error is not None
        assert error == f"RuntimeError: {'x' * 270} *** and again ***"[:300]
        assert KEY[:8] not in error
    assert [group.count for group in result.errors] == [2]
    for output in (attack_json(result), attack_text(result), attack_markdown(result)):
        assert KEY not in output
        assert KEY[:8] not in output


# --- reports -------------------------------------------------------------------------


def result_with_errors(errors: list[ErrorGroup]) -> AttackResult:
    plan = AttackPlan.build([A], OpenModel(rate=1), duration=1.0)
    return AttackResult(
        plan=plan,
        started_at=0.0,
        schedule_s=1.0,
        elapsed=1.0,
        send_span_s=0.0,
        scheduled=0,
        sent=0,
        late=0,
        total=RequestStats(),
        errors=errors,
    )


MESSAGES = [
    *(ErrorGroup(f"Refused: HTTP {400 + n}", 10 - n, f"Refused: HTTP {400 + n}") for n in range(7)),
    ErrorGroup(OTHER_MESSAGES, 2, None),
]


def test_the_text_report_quotes_the_five_most_common_messages_and_counts_the_rest() -> None:
    lines = attack_text(result_with_errors(MESSAGES)).splitlines()
    start = lines.index(
        "Errors (requests by the kind of message they ended with, most common first, one "
        "example each; 51 in all):"
    )
    assert lines[start + 1 : start + 7] == [
        "  10  Refused: HTTP 400",
        "   9  Refused: HTTP 401",
        "   8  Refused: HTTP 402",
        "   7  Refused: HTTP 403",
        "   6  Refused: HTTP 404",
        "  11 more of other kinds (--json lists every kind kept)",  # 5 + 4 + 2 (other)
    ]


def test_the_markdown_report_quotes_messages_as_code_and_json_lists_every_kept_one() -> None:
    result = result_with_errors(MESSAGES)
    markdown = attack_markdown(result).splitlines()
    assert "  - 10: `Refused: HTTP 400`" in markdown
    assert "  - 11 more of other kinds (--json lists every kind kept)" in markdown
    assert json.loads(attack_json(result))["errors"] == [group.to_dict() for group in MESSAGES]
    assert json.loads(attack_json(result))["errors"][-1] == {
        "key": OTHER_MESSAGES,
        "count": 2,
        "example": None,
    }


def test_a_run_without_errors_says_so() -> None:
    result = result_with_errors([])
    assert "Errors: none" in attack_text(result).splitlines()
    assert "- Errors: none" in attack_markdown(result).splitlines()
    assert json.loads(attack_json(result))["errors"] == []


# --- against servers ----------------------------------------------------------------


def llm_plan(url: str, model: str, **options: Any) -> AttackPlan:
    return AttackPlan.build(
        [url.rstrip("/") + "/v1"],
        OpenModel(rate=50),
        requests=2,
        llm=LlmSpec(model, SyntheticPrompts(context_tokens=4, max_tokens=4)),
        **options,
    )


def test_an_unknown_model_is_named_in_the_report_and_not_only_as_a_404() -> None:
    async def main() -> AttackResult:
        async with LlmServer(models="m", ttft="fixed:1ms", itl="fixed:1ms") as server:
            return await attack(llm_plan(server.url, "nope"))

    result = asyncio.run(main())
    (group,) = result.errors
    message, count = group.example or "", group.count
    assert count == 2
    assert message.startswith("LlmStatusError: HTTP 404: unknown model or deployment")
    text = attack_text(result)
    assert f"  2  {message}" in text.splitlines()


async def echo_the_key(peer: Peer) -> None:
    """A server that refuses every request and quotes its Authorization header back."""
    while (request := await peer.read_request()) is not None:
        quoted = request.header("authorization")
        body = json.dumps(
            {"error": {"message": f"Incorrect API key provided: {quoted}", "type": "auth"}}
        ).encode()
        await peer.respond(401, body, "Content-Type: application/json\r\n")


def test_a_key_the_server_echoes_in_its_error_reaches_no_report_and_no_sample(
    tmp_path: Path,
) -> None:
    rows = {kind: tmp_path / f"rows.{kind}" for kind in ("csv", "jsonl")}

    async def main() -> AttackResult:
        writers = [SampleWriter.open(path, llm=True) for path in rows.values()]

        def write(record: RequestRecord) -> None:
            for writer in writers:
                writer.write(record)

        try:
            async with Server(echo_the_key) as server:
                return await attack(llm_plan(server.url, "m", keys=(KEY,)), on_record=write)
        finally:
            for writer in writers:
                writer.close()

    result = asyncio.run(main())
    (group,) = result.errors
    message = group.example
    assert message is not None
    assert "Incorrect API key provided" in message  # the server's words, quoted
    assert result.total.by_status == {401: 2}
    outputs = [attack_json(result), attack_text(result), attack_markdown(result)]
    outputs += [path.read_text() for path in rows.values()]
    for output in outputs:
        assert KEY not in output
