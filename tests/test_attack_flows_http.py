"""A scenario's steps on real HTTP terms, as plain requests have them: a redirect is a
redirect (class ``redirect``, or followed hop by hop with ``follow_redirects``, each hop an
attempt of the step), and a step that opened a connection reports its connect and TLS
time rather than booking them as ``blocked``.

The redirect rules are pinned on virtual time with a fake step sender that answers the
redirects the test chooses and records what each hop sent; then against the echo server,
whose own count of what it received must equal the attempts counted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trustme

from engine_helpers import attack as attack_virtual
from pyattacker.attack import (
    AttackPlan,
    AttackResult,
    ClosedModel,
    FlowClient,
    OpenModel,
    Scenario,
    Step,
    StepFailed,
    Target,
    attack,
)
from pyattacker.attack._flow_client import resolve
from pyattacker.cli import run_cli
from pyattacker.clock import LoopClock
from pyattacker.http import Headers, Response, Timing, TlsOptions
from pyattacker.measure import Attempt, RequestRecord
from pyattacker.servers import EchoServer, EchoServerProcess, server_tls

A = "http://a.test/shop/"


@dataclass
class Redirecting:
    """Answers a step to a URL in ``redirects`` with that (status, Location) after 10 ms,
    any other with 200; records what each attempt sent: (method, URL, headers, body)."""

    redirects: dict[str, tuple[int, str]]
    calls: list[tuple[str, str, dict[str, str], bytes | None]] = field(default_factory=list)

    async def send(self, target: Target, attempt: Attempt) -> None:
        raise AssertionError("a scenario sends steps, never the plan's request")

    async def send_step(self, target: Target, step: Step, attempt: Attempt) -> Response:
        clock = LoopClock()
        url = resolve(target.url, step.path)
        attempt.sent = clock.now()
        headers = dict(target.headers + step.headers)
        self.calls.append((step.method, str(url), headers, step.body))
        await clock.sleep(0.01)
        attempt.first_byte = attempt.end = clock.now()
        response = Response(url, Timing(0.0))
        status, location = self.redirects.get(str(url), (200, ""))
        response.status = attempt.status = status
        if location:
            response.headers = Headers.from_pairs([("Location", location)])
        return response


async def one_hop(client: FlowClient) -> None:
    await client.get("/old", name="hop")


def plan_of(function: object, **options: object) -> AttackPlan:
    scenario = Scenario(function, "test:flow")  # type: ignore[arg-type]
    return AttackPlan.build([A], OpenModel(rate=10), scenario=scenario, **options)  # type: ignore[arg-type]


def test_an_unfollowed_redirect_fails_its_step_as_a_redirect_not_an_ok() -> None:
    steps = Redirecting({"http://a.test/old": (301, "/new")})
    result, _ = attack_virtual(plan_of(one_hop, requests=3), steps)
    hop = result.by_name["hop"]
    assert dict(hop.by_outcome) == {"failed": 3}
    assert dict(hop.by_error_class) == {"redirect": 3}
    assert dict(hop.by_status) == {301: 3}
    assert result.flows is not None
    assert result.flows.failed == {"hop": 3}
    assert [url for _, url, _, _ in steps.calls] == ["http://a.test/old"] * 3  # not followed


def test_a_followed_redirect_is_one_more_attempt_of_the_step_sent_at_once() -> None:
    steps = Redirecting({"http://a.test/old": (301, "/mid"), "http://a.test/mid": (302, "/new")})
    result, records = attack_virtual(plan_of(one_hop, requests=3, follow_redirects=2), steps)
    hop = result.by_name["hop"]
    assert dict(hop.by_outcome) == {"ok": 3}
    assert (hop.requests, hop.attempts) == (3, 9)
    assert [url for _, url, _, _ in steps.calls[:3]] == [
        "http://a.test/old",
        "http://a.test/mid",
        "http://a.test/new",
    ]
    assert result.flows is not None
    assert result.flows.completed == 3
    first = records[0]
    assert first.n_attempts == 3
    assert first.latency == pytest.approx(0.03)  # three 10 ms hops, none waiting


def test_a_step_still_redirected_after_its_hops_fails_as_a_redirect() -> None:
    steps = Redirecting({"http://a.test/old": (301, "/old")})  # a loop
    result, _ = attack_virtual(plan_of(one_hop, requests=2, follow_redirects=2), steps)
    hop = result.by_name["hop"]
    assert dict(hop.by_error_class) == {"redirect": 2}
    assert hop.attempts == 6


def test_hops_follow_the_plain_paths_rules_for_methods_bodies_and_credentials() -> None:
    async def flow(client: FlowClient) -> None:
        client.headers["Authorization"] = "Bearer sk-flow"
        await client.post("/form", name="form", body="x=1", headers={"accept": "text/plain"})
        await client.post("/upload", name="upload", body="data")

    steps = Redirecting(
        {
            "http://a.test/form": (302, "/done"),  # a POST answered 302: a GET, no body
            "http://a.test/upload": (307, "http://b.test/store"),  # 307: same method and body
        }
    )
    result, _ = attack_virtual(plan_of(flow, requests=1, follow_redirects=1), steps)
    assert {name: dict(s.by_outcome) for name, s in result.by_name.items()} == {
        "form": {"ok": 1},
        "upload": {"ok": 1},
    }
    (form, done, upload, store) = steps.calls
    assert (done[0], done[1], done[3]) == ("GET", "http://a.test/done", None)
    assert done[2] == form[2]  # the same origin: every header, the flow's credential too
    assert done[2]["Authorization"] == "Bearer sk-flow"
    assert (store[0], store[1], store[3]) == ("POST", "http://b.test/store", b"data")
    assert "Authorization" not in store[2]  # another origin: no credential
    assert upload[2]["Authorization"] == "Bearer sk-flow"


def test_a_step_that_expects_the_redirect_takes_it_as_its_answer_when_not_following() -> None:
    seen: list[int | None] = []

    async def flow(client: FlowClient) -> None:
        seen.append((await client.get("/old", name="hop", expect=301)).status)
        try:
            await client.get("/old", name="other", expect=(200, 404))
        except StepFailed as failed:
            seen.append(failed.status)

    steps = Redirecting({"http://a.test/old": (301, "/new")})
    result, _ = attack_virtual(plan_of(flow, requests=1), steps)
    assert seen == [301, 301]
    assert dict(result.by_name["hop"].by_outcome) == {"ok": 1}
    assert dict(result.by_name["other"].by_error_class) == {"redirect": 1}


# -- against the echo server -------------------------------------------------------------


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms") as server:
        yield server


@pytest.mark.parametrize(("follow", "code"), [(None, 1), ("2", 0)])
def test_a_flows_redirected_step_is_counted_as_the_server_saw_it(
    follow: str | None, code: int, echo: EchoServerProcess, tmp_path: Path
) -> None:
    flows = tmp_path / "rflow.py"
    flows.write_text(
        "async def r(client, row):\n"
        "    await client.get('/redirect?to=/final&code=301', name='hop')\n"
    )
    out = tmp_path / "r.json"
    argv = ["attack", f"{echo.url}/", "--scenario", f"{flows}:r", "--rate", "50/s"]
    argv += ["--requests", "5", "-q", "--json", str(out)]
    argv += [] if follow is None else ["--follow-redirects", follow]
    echo.reset()
    assert run_cli(argv) == code
    report = json.loads(out.read_text())
    served = echo.stats()
    hop = report["names"]["hop"]
    assert hop["attempts"] == report["total"]["attempts"] == served["count"]
    if follow is None:
        assert hop["outcomes"] == {"failed": 5}
        assert hop["error_classes"] == {"redirect": 5}
        assert served["statuses"] == {"301": 5}
        assert report["flows"]["failed_by_step"] == {"hop": 5}
    else:
        assert hop["outcomes"] == {"ok": 5}
        assert hop["attempts"] == 10
        assert served["statuses"] == {"301": 5, "200": 5}
        assert report["flows"]["completed"] == 5


# -- a new connection's connect and TLS ---------------------------------------------------


async def two_steps(client: FlowClient) -> None:
    await client.get("/a", name="a")
    await client.get("/b", name="b")


async def _flows_over(
    url: str, load: OpenModel | ClosedModel, tls: TlsOptions | None = None
) -> tuple[AttackResult, list[Attempt]]:
    """Eight flows of two steps against ``url``: the result and every attempt."""
    records: list[RequestRecord] = []
    scenario = Scenario(two_steps, "test:two")
    plan = AttackPlan.build([url], load, requests=8, scenario=scenario, tls=tls)
    result = await attack(plan, on_record=records.append)
    return result, [attempt for record in records for attempt in record.attempts]


def _check_connections_are_reported(
    result: AttackResult, attempts: list[Attempt], *, tls: bool
) -> None:
    phases = result.phases
    assert phases is not None
    assert phases.connections >= 1
    assert phases.connect.count == phases.connections
    assert phases.tls.count == (phases.connections if tls else 0)
    opened = [a for a in attempts if a.connect is not None]
    assert len(opened) == phases.connections
    for attempt in opened:
        assert (attempt.tls is not None) is tls
        # blocked is the dispatch delay less the connection's setup, not all of it
        setup = attempt.connect + (attempt.tls or 0.0)
        assert attempt.dispatch_delay is not None
        assert attempt.blocked == pytest.approx(attempt.dispatch_delay - setup)
        assert setup > 0.0
    assert result.to_dict()["timing"]["connections"] == phases.connections


@pytest.mark.parametrize("load", [OpenModel(rate=40), ClosedModel(clients=2)])
def test_a_flows_steps_report_the_connections_they_opened(
    load: OpenModel | ClosedModel, echo: EchoServerProcess
) -> None:
    result, attempts = asyncio.run(_flows_over(f"{echo.url}/", load))
    assert result.total.requests == 16
    _check_connections_are_reported(result, attempts, tls=False)


def test_a_flows_steps_over_https_report_each_handshake(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca_file, server_file = tmp_path / "ca.pem", tmp_path / "server.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(server_file))

    async def main() -> tuple[AttackResult, list[Attempt]]:
        async with EchoServer(ssl=server_tls(str(server_file))) as server:
            tls = TlsOptions(cacert=str(ca_file))
            return await _flows_over(server.url, OpenModel(rate=40), tls)

    result, attempts = asyncio.run(main())
    assert dict(result.total.by_outcome) == {"ok": 16}
    _check_connections_are_reported(result, attempts, tls=True)
