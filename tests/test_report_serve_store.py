"""``pyattacker serve``'s routes without a socket: ``/report.json`` is what the run's page
draws, and a body read from the store is built by one request at a time and reused while
young (virtual time: a list of instants stands for the clock)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

from pyattacker.report._http import TEXT, Response, respond
from pyattacker.report._serve_store import Reused, store_routes
from pyattacker.store import MemoryStore, RunRow, RunState


def _clock(instants: list[float]) -> Iterator[float]:
    yield from instants


def test_an_answer_is_reused_while_younger_than_twice_its_cost_then_built_again() -> None:
    built: list[str] = []
    # each get() reads the clock at its start, and after a build at its end
    ticks = _clock([0.0, 1.0, 2.5, 3.1, 3.2, 4.0])

    def build(query: str) -> Response:
        built.append(query)
        return 200, TEXT, f"body {len(built)}".encode()

    reused = Reused(build, factor=2.0, clock=lambda: next(ticks))
    assert reused.get("") == (200, TEXT, b"body 1")  # built from 0 to 1: cost 1
    assert reused.get("") == (200, TEXT, b"body 1")  # at 2.5: 1.5 old, under 2 x 1
    assert reused.get("") == (200, TEXT, b"body 2")  # at 3.1: 2.1 old: built again
    assert built == ["", ""]


def test_a_failed_read_is_never_kept() -> None:
    answers = iter([(500, TEXT, b"could not read"), (200, TEXT, b"fine")])
    reused = Reused(lambda query: next(answers), clock=lambda: 0.0)
    assert reused.get("")[0] == 500
    assert reused.get("") == (200, TEXT, b"fine")


def test_requests_arriving_during_a_build_wait_for_it_and_share_it() -> None:
    started, release = threading.Event(), threading.Event()
    builds: list[int] = []

    def slow(query: str) -> Response:
        builds.append(1)
        started.set()
        release.wait(10)
        return 200, TEXT, b"shared"

    times = iter([0.0, 5.0, 5.0])  # the first starts at 0 and ends at 5; the second asks at 5
    reused = Reused(slow, clock=lambda: next(times))
    answers: list[Response] = []
    first = threading.Thread(target=lambda: answers.append(reused.get("")))
    first.start()
    started.wait(10)
    second = threading.Thread(target=lambda: answers.append(reused.get("")))
    second.start()
    assert answers == []  # nobody has an answer while the build is under way
    release.set()
    first.join(10)
    second.join(10)
    assert answers == [(200, TEXT, b"shared")] * 2
    assert builds == [1]


def test_report_json_is_the_payload_the_run_page_draws_and_says_whether_a_run_is_live() -> None:
    store = MemoryStore()
    store.begin_run(RunRow(run_id="r1", state=RunState.RUNNING, started_at=1.0), resume=False)
    routes = store_routes(lambda: store, refresh_s=3)
    live = json.loads(respond(routes, "GET", "/report.json")[2])
    assert set(live) == {"kind", "title", "version", "report", "extra", "live"}
    assert live["kind"] == "run"
    assert live["live"] == {"started": True, "done": False, "stop_reason": None, "every_s": 3}
    assert live["report"]["runs"][0]["run_id"] == "r1"
    assert set(live["extra"]) >= {"timeline", "retry_delays_s", "failed_items", "leases"}
    page = respond(routes, "GET", "/")[2].decode()
    assert '<script src="/assets/page_run.js">' in page
    assert respond(routes, "GET", "/assets/page_run.js")[0] == 200
    assert respond(routes, "GET", "/assets/page_attack.js")[0] == 404  # not this page's


def test_a_store_that_cannot_be_opened_is_a_500_saying_why_and_the_health_stays_ok() -> None:
    def missing() -> MemoryStore:
        raise FileNotFoundError("eval.db is gone")

    routes = store_routes(missing, refresh_s=5)
    status, kind, body = respond(routes, "GET", "/metrics")
    assert (status, kind) == (500, TEXT)
    assert body == b"could not read the store: FileNotFoundError: eval.db is gone\n"
    assert respond(routes, "GET", "/healthz") == (200, TEXT, b"ok\n")
