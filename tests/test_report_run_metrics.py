"""A run store's ``/metrics`` and page extras: attempt durations as histograms by task and
outcome, leases in use as the live run last recorded them, failed attempts by task and
class; read back with prometheus_client's parser."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pyattacker.pool import Pool, Resource, Selector
from pyattacker.report import prometheus_text
from pyattacker.report._html_run import LEASES_EVENT, store_extras
from pyattacker.run._leases import LEASES_EVENT as RECORDED_EVENT
from pyattacker.run._leases import LeaseLog
from pyattacker.store import (
    AttemptRow,
    Batch,
    EventRow,
    MemoryStore,
    PipelineRow,
    PipelineState,
    RunRow,
    RunState,
    open_store,
    results,
)
from serve_helpers import finished_store, leases_in_use, samples

OK = {"retry": False, "reason": "ok"}
NO = {"retry": False, "reason": "policy_declined"}
HISTOGRAM = "pyattacker_run_attempt_duration_seconds"


def _pipeline(pid: str) -> PipelineRow:
    return PipelineRow(
        pipeline_id=pid, template="t", chain_digest="c", seed_digest=pid, seed_artifact=pid,
        repeat=0, key=None, state=PipelineState.RUNNING, cursor=0, ntasks=2, run_id="r1",
        ordinal=int(pid[1:]), created_at=1000.0, updated_at=1000.0,
    )  # fmt: skip


def _attempt(pid: str, task: str, outcome: str, duration_s: float, **more: Any) -> AttemptRow:
    return AttemptRow(
        run_id="r1", pipeline_id=pid, seq=0 if task == "fetch" else 1, task=task, attempt=1,
        outcome=outcome, started_at=1000.0, ended_at=1000.0 + duration_s,
        duration_s=duration_s, decision=OK if outcome == "ok" else NO, **more,
    )  # fmt: skip


def _leases(at: float, in_use: int, run_id: str = "r1") -> EventRow:
    data = {"in_use": {"llm/k1": in_use}, "limit": {"llm/k1": 2}}
    return EventRow(run_id=run_id, kind=LEASES_EVENT, at=at, data=data)


def _store(*events: EventRow) -> MemoryStore:
    store = MemoryStore()
    store.begin_run(RunRow(run_id="r1", state=RunState.RUNNING, started_at=1000.0), resume=False)
    attempts = [
        _attempt("p1", "fetch", "ok", 0.25),
        _attempt("p1", "ask", "ok", 0.02, resources=("llm/k1",)),
        _attempt("p2", "ask", "ok", 0.5, resources=("llm/k1",)),
        _attempt("p2", "ask", "failed", 0.001, error_class="rate_limit", error="429"),
        _attempt("p2", "ask", "failed", 0.002, error_class="fatal", error="no"),
    ]
    pipelines = [_pipeline("p1"), _pipeline("p2")]
    store.write(Batch(pipelines=pipelines, attempts=attempts, events=list(events)))
    return store


def _histogram(text: str, task: str, outcome: str) -> dict[str, float]:
    """The histogram's samples for one task and outcome: ``le`` bounds, ``sum``, ``count``."""
    found = samples(text)
    out: dict[str, float] = {}
    for labels, value in found[f"{HISTOGRAM}_bucket"]:
        if (labels["task"], labels["outcome"]) == (task, outcome):
            out[labels["le"]] = value
    for part in ("sum", "count"):
        for labels, value in found[f"{HISTOGRAM}_{part}"]:
            if (labels["task"], labels["outcome"]) == (task, outcome):
                out[part] = value
    return out


def test_attempt_durations_are_histograms_by_task_and_outcome_counting_every_attempt() -> None:
    text = prometheus_text(_store())
    ok = _histogram(text, "ask", "ok")
    assert (ok["0.01"], ok["0.025"], ok["0.25"], ok["0.5"], ok["+Inf"]) == (0, 1, 1, 2, 2)
    assert ok["count"] == 2
    assert math.isclose(ok["sum"], 0.52)
    failed = _histogram(text, "ask", "failed")
    assert (failed["0.001"], failed["0.0025"], failed["count"]) == (1, 2, 2)  # le: on a bound
    assert _histogram(text, "fetch", "ok")["0.25"] == 1
    attempts = {
        (labels["task"], labels["outcome"]): value
        for labels, value in samples(text)["pyattacker_run_attempts_total"]
    }
    assert attempts == {("fetch", "ok"): 1, ("ask", "ok"): 2, ("ask", "failed"): 2}


def test_leases_in_use_are_the_live_runs_last_record_and_none_once_no_run_is_live() -> None:
    store = _store(_leases(1001.0, 1), _leases(1002.0, 2))
    text = prometheus_text(store)
    assert samples(text)["pyattacker_run_live"] == [({}, 1.0)]
    assert leases_in_use(text) == {"llm/k1": 2}
    assert samples(text)["pyattacker_run_resource_lease_limit"] == [({"resource": "llm/k1"}, 2)]
    store.end_run("r1", RunState.SUCCEEDED, ended_at=1003.0, stop_reason=None)
    ended = prometheus_text(store)
    assert leases_in_use(ended) == {"llm/k1": 0}
    assert samples(ended)["pyattacker_run_resource_lease_limit"] == [({"resource": "llm/k1"}, 2)]


def test_a_live_run_that_recorded_no_leases_has_no_gauge_rather_than_a_made_up_zero() -> None:
    assert leases_in_use(prometheus_text(_store())) == {}


def test_the_page_extras_hold_failures_by_task_and_class_and_the_leases_over_time() -> None:
    extras = store_extras(_store(_leases(1001.0, 1), _leases(1002.5, 2)))
    assert extras["errors_by_task"] == {"ask": {"rate_limit": 1, "fatal": 1}}
    # t: seconds from the timeline's start, the first attempt's end (1000.001)
    assert extras["leases"] == {"t": [0.999, 2.499], "in_use": {"llm/k1": [1, 2]},
                                "limit": {"llm/k1": 2}}  # fmt: skip
    assert sum(w["throttled"] for w in extras["timeline"]["windows"]) == 1


def test_the_report_reads_the_event_the_runner_records() -> None:
    assert LEASES_EVENT == RECORDED_EVENT


def test_a_lease_log_records_the_leases_out_only_when_they_change() -> None:
    pool = Pool("llm", [Resource.create("llm", id="k1", capacity=2)])
    seen: list[tuple[str, Any]] = []
    log = LeaseLog([pool], lambda kind, data: seen.append((kind, data)))
    log.look()
    log.look()
    lease = pool.try_acquire(Selector.build(id="k1"))
    assert lease is not None
    log.look()
    log.look()
    lease.release_now()
    log.last_look()
    assert seen == [
        (RECORDED_EVENT, {"in_use": {"llm/k1": 0}, "limit": {"llm/k1": 2}}),
        (RECORDED_EVENT, {"in_use": {"llm/k1": 1}, "limit": {"llm/k1": 2}}),
        (RECORDED_EVENT, {"in_use": {"llm/k1": 0}, "limit": {"llm/k1": 2}}),
    ]


def test_a_run_shorter_than_a_heartbeat_records_no_leases_at_its_end() -> None:
    pool = Pool("llm", [Resource.create("llm", id="k1", capacity=2)])
    seen: list[Any] = []
    LeaseLog([pool], lambda kind, data: seen.append(data)).last_look()
    assert seen == []


def test_leases_another_run_recorded_do_not_count_as_the_live_runs() -> None:
    text = prometheus_text(_store(_leases(1001.0, 2, run_id="r0")))
    assert leases_in_use(text) == {}


def test_the_failed_items_are_those_results_gives_with_their_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path, code = finished_store(tmp_path, range(1, 31))
    assert code == 1
    fields = ("key", "state", "step", "error_class", "error", "attempts")
    with open_store(str(path), read_only=True) as store:
        wanted = [{k: r[k] for k in fields} for r in results(store) if r["state"] != "succeeded"]
        items = store_extras(store)["failed_items"]
    assert items == {"count": 6, "shown": wanted}
    assert {item["attempts"] for item in items["shown"]} == {2}  # prepare, then a fatal ask
