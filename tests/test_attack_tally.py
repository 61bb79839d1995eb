"""The attack's ``Tally``: batched counting of plain OK answers changes no figure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack._tally import BATCH, Tally
from pyattacker.errors import ErrorClass
from pyattacker.measure import Attempt, Outcome, RequestRecord

ORIGIN = 500.0


@st.composite
def finished_requests(draw: st.DrawFn) -> list[list[Attempt]]:
    """Mostly plain OK answers (batched), with failures, drops, retries and streamed
    answers (counted one by one) among them, in any order."""
    requests = []
    for n in range(draw(st.integers(0, 3 * BATCH))):
        at = ORIGIN + draw(st.floats(0.001, 4.0))
        sent = at + draw(st.floats(-0.001, 0.05))
        end = sent + draw(st.floats(0.0, 0.5))
        kind = draw(st.sampled_from(["ok"] * 6 + ["failed", "dropped", "retried", "streamed"]))
        first = Attempt(n, 1, scheduled=at, sent=sent, first_byte=end, end=end, status=200)
        first.outcome = Outcome.OK
        attempts = [first]
        if kind == "failed":
            first.outcome, first.status, first.error_class = Outcome.FAILED, 500, "upstream"
            first.error = "HttpStatusError: HTTP 500"
        elif kind == "dropped":
            first.sent = first.first_byte = first.end = first.status = None
            first.outcome, first.error_class = Outcome.DROPPED, ErrorClass.CANCELLED.value
            first.error = "dropped: --max-in-flight requests were already in progress"
        elif kind == "retried":
            first.outcome, first.status = Outcome.THROTTLED, 429
            again = Attempt(n, 2, scheduled=end + 0.01, sent=end + 0.01, end=end + 0.02)
            again.outcome, again.status = Outcome.OK, 200
            attempts.append(again)
        elif kind == "streamed":
            first.first_token = sent + 0.001
        requests.append(attempts)
    return requests


@given(
    finished_requests(),
    st.sets(st.integers(0, 3 * BATCH)),
    st.booleans(),
    st.sampled_from([0.01, 0, 1]),  # a limit given as an int (from a plan file) too
)
def test_batched_plain_answers_count_exactly_as_records_counted_one_by_one(
    requests: list[list[Attempt]], read_after: set[int], direct: bool, late_after: float
) -> None:
    records: list[RequestRecord] = []
    batched = Tally(
        origin=ORIGIN, window=0.5, late_after=late_after, per_target=False, on_record=None
    )
    each = Tally(
        origin=ORIGIN,
        window=0.5,
        late_after=late_after,
        per_target=False,
        on_record=records.append,
    )
    for i, attempts in enumerate(requests):
        if direct and len(attempts) == 1:  # the engine's direct path counts this way
            batched.finished_one(attempts[0])
        else:
            batched.finished(attempts)
        each.finished(attempts)
        if i in read_after:  # a reader (the live view) midway sees every request so far
            assert batched.total.requests == i + 1
            assert batched.sent == each.sent
    assert len(records) == len(requests)  # the reference counted each as it came
    assert batched.total == each.total
    assert batched.windows.windows() == each.windows.windows()
    assert (batched.sent, batched.late, batched.last_sent) == (each.sent, each.late, each.last_sent)
    assert batched.errors.groups() == each.errors.groups()


def plain_ok(n: int, at: float) -> list[Attempt]:
    attempt = Attempt(n, 1, scheduled=at, sent=at + 0.001, first_byte=at + 0.002, end=at + 0.002)
    attempt.outcome, attempt.status = Outcome.OK, 200
    return [attempt]


def test_a_refused_time_in_a_batch_loses_only_its_own_request_as_counting_alone_does() -> None:
    requests = [plain_ok(n, ORIGIN + 0.01 * (n + 1)) for n in range(BATCH)]
    requests[5] = plain_ok(5, ORIGIN - 1.0)  # stamped on another clock: before the origin
    batched = Tally(origin=ORIGIN, window=0.5, late_after=0.01, per_target=False, on_record=None)
    alone = Tally(origin=ORIGIN, window=0.5, late_after=0.01, per_target=False, on_record=None)
    refused = []
    for attempts in requests[:-1]:
        batched.finished(attempts)
        try:
            alone._one_attempt(attempts[0])  # the old way: each counted as it ends
        except ValueError as exc:
            refused.append(exc)
    with pytest.raises(ValueError, match="before the series origin"):
        batched.finished(requests[-1])  # the batch is full: counted, and one time refused
    alone._one_attempt(requests[-1][0])
    assert len(refused) == 1
    assert batched.total == alone.total
    assert batched.total.requests == BATCH
    assert batched.windows.windows() == alone.windows.windows()
    assert (batched.sent, batched.late, batched.last_sent) == (
        alone.sent,
        alone.late,
        alone.last_sent,
    )
