"""Named requests (a targets file's lines, a scenario's steps): every request that carries
a name is counted under it as well as in the total, and every report shows the names."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pyattacker.attack import AttackPlan, OpenModel
from pyattacker.attack._result import AttackResult, RunTimes
from pyattacker.attack._tally import Tally
from pyattacker.measure import Attempt, Outcome, RequestRecord
from pyattacker.report import attack_json, attack_markdown, attack_text

ORIGIN = 100.0
URL = "http://127.0.0.1:9/"


@st.composite
def named_requests(draw: st.DrawFn) -> list[list[Attempt]]:
    """Requests with or without a name, OK or failed, some retried."""
    requests = []
    for n in range(draw(st.integers(0, 80))):
        at = ORIGIN + draw(st.floats(0.0, 3.0))
        name = draw(st.sampled_from([None, "login", "browse", "checkout"]))
        ok = draw(st.booleans())
        first = Attempt(n, 1, scheduled=at, sent=at + 0.001, end=at + 0.01, name=name)
        first.outcome, first.status = (Outcome.OK, 200) if ok else (Outcome.FAILED, 500)
        attempts = [first]
        if not ok and draw(st.booleans()):
            again = Attempt(n, 2, scheduled=at + 0.02, sent=at + 0.021, end=at + 0.03, name=name)
            again.outcome, again.status = Outcome.OK, 200
            attempts.append(again)
        requests.append(attempts)
    return requests


def tally() -> Tally:
    return Tally(origin=ORIGIN, window=0.5, late_after=0.01, per_target=False, on_record=None)


@given(named_requests(), st.booleans())
def test_each_name_counts_exactly_its_own_requests_and_the_total_counts_all(
    requests: list[list[Attempt]], direct: bool
) -> None:
    named = tally()
    alone: dict[str, Tally] = {}
    for attempts in requests:
        if direct and len(attempts) == 1:
            named.finished_one(attempts[0])
        else:
            named.finished(attempts)
        name = attempts[0].name
        if name is not None:
            alone.setdefault(name, tally()).finished(attempts)
    assert named.total.requests == len(requests)
    assert set(named.names.stats) == set(alone)
    for name, reference in alone.items():
        assert named.names.stats[name] == reference.total
        assert named.names.windows[name].windows() == reference.windows.windows()


def test_unnamed_requests_make_no_name_breakdown() -> None:
    counted = tally()
    attempt = Attempt(0, 1, scheduled=ORIGIN, sent=ORIGIN, end=ORIGIN + 0.01)
    attempt.outcome, attempt.status = Outcome.OK, 200
    counted.finished_one(attempt)
    assert counted.total.requests == 1
    assert counted.names.stats == {}


def result_with_names() -> AttackResult:
    counted = tally()
    for n, name in enumerate(["login", "browse", "browse", "checkout"]):
        at = ORIGIN + n * 0.25
        attempt = Attempt(n, 1, scheduled=at, sent=at + 0.001, end=at + 0.004, name=name)
        attempt.outcome, attempt.status = (Outcome.OK, 200) if n < 3 else (Outcome.FAILED, 503)
        counted.finished([attempt])
    plan = AttackPlan.build([URL], OpenModel(rate=4.0), duration=1.0, window=0.5)
    times = RunTimes(started_at=0.0, start=ORIGIN, schedule_end=ORIGIN + 1, end=ORIGIN + 1,
                     last_offset=0.75)  # fmt: skip
    return AttackResult.build(plan, counted, times, decisions={}, stop_reason=None, loop_lag=None)


def test_the_json_report_has_each_names_figures_and_windows() -> None:
    data = json.loads(attack_json(result_with_names()))
    assert list(data["names"]) == ["login", "browse", "checkout"]
    assert data["names"]["browse"]["requests"] == 2
    assert data["names"]["checkout"]["status"] == {"503": 1}
    assert sum(w["completed"] for w in data["name_windows"]["browse"]) == 2


def test_the_text_and_markdown_reports_show_a_row_and_a_count_line_per_name() -> None:
    text = attack_text(result_with_names())
    markdown = attack_markdown(result_with_names())
    for name in ("login", "browse", "checkout"):
        assert f"name: {name}" in text
        assert f"name {name}: " in text
        assert f"name: {name}" in markdown
    assert "name checkout: failed: 1; status 503: 1" in text


def test_a_samples_row_carries_the_request_name() -> None:
    attempt = Attempt(7, 1, scheduled=1.0, sent=1.0, end=1.5, name="checkout")
    assert RequestRecord.from_attempts([attempt]).to_dict()["name"] == "checkout"
    assert attempt.to_dict()["name"] == "checkout"
