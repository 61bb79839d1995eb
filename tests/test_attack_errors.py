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
from pyattacker.attack._tally import MAX_MESSAGES, OTHER_MESSAGES, ErrorMessages
from pyattacker.clock import LoopClock
from pyattacker.llm import SyntheticPrompts
from pyattacker.measure import Attempt, RequestRecord, RequestStats
from pyattacker.report import attack_json, attack_markdown, attack_text
from pyattacker.servers import LlmServer
from pyattacker.testing import run_virtual

A = "http://127.0.0.1:9/a"
KEY = "sk-echoed-0123456789abcdef"


# --- the bounded count ---------------------------------------------------------------


def test_error_messages_keep_twenty_distinct_and_count_the_rest_as_other() -> None:
    errors = ErrorMessages()
    for n in range(MAX_MESSAGES + 5):
        errors.note(f"E{n:02d}")
    for _ in range(3):
        errors.note("E07")  # a kept message goes on counting
    errors.note(f"E{MAX_MESSAGES:02d}")  # one that came when the table was full: other
    counts = errors.counts()
    assert len(counts) == MAX_MESSAGES + 1
    assert list(counts)[:2] == ["E07", "E00"]  # most common first, ties by message
    assert counts["E07"] == 4
    assert counts[OTHER_MESSAGES] == 6
    assert list(counts)[-1] == OTHER_MESSAGES
    assert sum(counts.values()) == MAX_MESSAGES + 5 + 3 + 1


def test_no_error_is_no_entry() -> None:
    assert ErrorMessages().counts() == {}


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
    assert list(result.errors.values()) == [2]
    for output in (attack_json(result), attack_text(result), attack_markdown(result)):
        assert KEY not in output
        assert KEY[:8] not in output


# --- reports -------------------------------------------------------------------------


def result_with_errors(errors: dict[str, int]) -> AttackResult:
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


MESSAGES = {f"Refused: HTTP {400 + n}": 10 - n for n in range(7)} | {OTHER_MESSAGES: 2}


def test_the_text_report_quotes_the_five_most_common_messages_and_counts_the_rest() -> None:
    lines = attack_text(result_with_errors(MESSAGES)).splitlines()
    start = lines.index(
        "Errors (requests by the message they ended with, most common first; 51 in all):"
    )
    assert lines[start + 1 : start + 7] == [
        "  10  Refused: HTTP 400",
        "   9  Refused: HTTP 401",
        "   8  Refused: HTTP 402",
        "   7  Refused: HTTP 403",
        "   6  Refused: HTTP 404",
        "  11 more with other messages (--json lists every message kept)",  # 5 + 4 + 2 (other)
    ]


def test_the_markdown_report_quotes_messages_as_code_and_json_lists_every_kept_one() -> None:
    result = result_with_errors(MESSAGES)
    markdown = attack_markdown(result).splitlines()
    assert "  - 10: `Refused: HTTP 400`" in markdown
    assert "  - 11 more with other messages (--json lists every message kept)" in markdown
    assert json.loads(attack_json(result))["errors"] == MESSAGES


def test_a_run_without_errors_says_so() -> None:
    result = result_with_errors({})
    assert "Errors: none" in attack_text(result).splitlines()
    assert "- Errors: none" in attack_markdown(result).splitlines()
    assert json.loads(attack_json(result))["errors"] == {}


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
    ((message, count),) = result.errors.items()
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
    (message,) = result.errors
    assert "Incorrect API key provided" in message  # the server's words, quoted
    assert result.total.by_status == {401: 2}
    outputs = [attack_json(result), attack_text(result), attack_markdown(result)]
    outputs += [path.read_text() for path in rows.values()]
    for output in outputs:
        assert KEY not in output
