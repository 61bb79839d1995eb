"""``attack --serve``: the live server's routes, its loopback bind, and ``/metrics`` scraped
during a real attack, whose counts end equal to the final report's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from live_helpers import pause, served_attack
from pyattacker.attack import AttackPlan, OpenModel, Progress, attack
from pyattacker.cli import run_cli
from pyattacker.report import LiveServer
from pyattacker.servers import EchoServerProcess


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms", fail="429:0.1,500:0.1", seed=3) as server:
        yield server


def families(text: str) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """The exposition read by Prometheus's own parser: samples by family."""
    return {
        f.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples}
        for f in text_string_to_metric_families(text)
    }


def by_label(samples: dict[Any, float], label: str) -> dict[str, int]:
    return {dict(labels)[label]: int(v) for (_, labels), v in samples.items()}


# ----------------------------------------------------------------- routes, without a socket


def test_known_paths_answer_and_unknown_paths_are_404() -> None:
    server = LiveServer()
    assert server.respond("GET", "/healthz") == (200, "text/plain; charset=utf-8", b"ok\n")
    assert server.respond("GET", "/")[0] == 200
    assert server.respond("GET", "/metrics")[1].startswith("text/plain; version=0.0.4")
    assert json.loads(server.respond("GET", "/progress.json")[2])["done"] is False
    for path in ("/nope", "/assets/", "/assets/live.html", "/../etc/passwd", "/metrics/x"):
        assert server.respond("GET", path)[0] == 404, path


def test_progress_since_a_time_holds_only_the_later_snapshots() -> None:
    server = LiveServer()
    for n in range(1, 5):
        server.record_progress(Progress(n * 0.5, None, n, n, n, 0, 0, 0, 0, None, None, None, None))

    def elapsed(path: str) -> list[float]:
        columns: dict[str, list[float]] = json.loads(server.respond("GET", path)[2])["columns"]
        return columns["elapsed"]

    assert elapsed("/progress.json") == [0.5, 1.0, 1.5, 2.0]
    assert elapsed("/progress.json?since=1.0") == [1.5, 2.0]
    assert elapsed("/progress.json?since=2.0") == []
    assert elapsed("/progress.json?since=nan") == [0.5, 1.0, 1.5, 2.0]
    assert elapsed("/progress.json?since=soon") == [0.5, 1.0, 1.5, 2.0]


def test_only_get_and_head_are_allowed() -> None:
    server = LiveServer()
    for method in ("POST", "PUT", "DELETE", "OPTIONS", "TRACE"):
        assert server.respond(method, "/healthz")[0] == 405


def test_the_pages_load_their_scripts_from_the_server_and_insert_no_html() -> None:
    server = LiveServer()
    report_page = server.respond("GET", "/")[2].decode()
    progress_page = server.respond("GET", "/progress")[2].decode()
    for script in ("uPlot.js", "page_kit.js", "page_attack.js", "page_live.js"):
        assert f'<script src="/assets/{script}">' in report_page
    assert '<script src="/assets/live.js">' in progress_page
    for page in (report_page, progress_page):
        assert "<script>" not in page  # no inline script: the CSP allows none
    for name in ("live.js", "page_kit.js", "page_attack.js", "page_live.js"):
        script = server.respond("GET", f"/assets/{name}")[2].decode()
        assert "innerHTML" not in script, name
        assert "insertAdjacentHTML" not in script, name


def test_report_json_before_the_attack_starts_says_only_that() -> None:
    answer = json.loads(LiveServer().respond("GET", "/report.json")[2])
    assert answer == {"live": {"started": False, "done": False, "stop_reason": None}}


def test_report_json_is_the_snapshot_read_when_asked_then_the_final_result(
    echo: EchoServerProcess,
) -> None:
    plan = AttackPlan.build([echo.url + "/"], OpenModel(rate=200), duration=1.5)
    server = LiveServer(sections=lambda result: {"extra_section": result.total.requests})
    seen: list[dict[str, Any]] = []

    async def main() -> Any:
        async def look() -> None:
            while not server.done:
                await asyncio.sleep(0.1)
                if server.snapshot is not None:
                    seen.append(json.loads(server.respond("GET", "/report.json")[2]))

        looking = asyncio.create_task(look())
        result = await attack(plan, on_start=server.on_start)
        server.finish(result)
        await looking
        return result

    result = asyncio.run(main())
    final = json.loads(server.respond("GET", "/report.json")[2])
    assert final["live"] == {"started": True, "done": True, "stop_reason": None}
    assert final["kind"] == "attack"
    assert final["report"]["total"] == json.loads(json.dumps(result.to_dict()))["total"]
    assert final["report"]["extra_section"] == result.total.requests
    assert seen
    assert not seen[0]["live"]["done"]
    # mid-schedule, the planned and achieved rates are over the time so far
    first = seen[0]["report"]["summary"]
    assert first["schedule_s"] == first["elapsed_s"] < 1.5
    counts = [s["report"]["total"]["requests"] for s in seen]
    assert counts == sorted(counts)
    assert counts[0] < result.total.requests


# ----------------------------------------------------------------- the server on a socket


async def _raw(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


def test_by_default_it_listens_on_loopback_only_and_answers_with_a_strict_csp() -> None:
    async def main() -> tuple[str, bytes, bytes, bytes, bytes]:
        server = LiveServer()
        url = await server.start()
        try:
            got = await _raw(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await _raw(url, b"HEAD /healthz HTTP/1.1\r\n\r\n")
            post = await _raw(url, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            junk = await _raw(url, b"hello\r\n\r\n")
            return url, got, head, post, junk
        finally:
            await server.close()

    url, got, head, post, junk = asyncio.run(main())
    assert url.startswith("http://127.0.0.1:")
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert got.endswith(b"\r\n\r\nok\n")
    assert b"Content-Security-Policy: default-src 'none';" in got
    assert b"connect-src 'self'" in got
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert head.endswith(b"\r\n\r\n")
    assert post.startswith(b"HTTP/1.1 405 ")
    assert b"Allow: GET, HEAD" in post
    assert junk.startswith(b"HTTP/1.1 400 ")


def test_the_cli_binds_loopback_unless_serve_host_says_otherwise() -> None:
    from pyattacker.cli._serve import Serving

    serving = Serving.from_flags("0", "127.0.0.1", "0s")
    assert serving is not None
    assert serving.host == "127.0.0.1"
    assert Serving.from_flags(None, "127.0.0.1", "0s") is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--serve", "http"], "--serve: 'http' is not a port number"),
        (["--serve", "70000"], "--serve: '70000' is not a port number"),
        (["--serve-linger", "5s"], "--serve-linger: --serve-host and --serve-linger apply"),
        (["--serve", "--serve-linger", "soon"], "--serve-linger"),
    ],
)
def test_bad_serve_flags_exit_2_naming_the_flag_before_anything_runs(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(["attack", "http://127.0.0.1:9/", "--rate", "1/s", "--requests", "1", *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "attacking" not in err


# ----------------------------------------------------------------- a real attack, scraped


def test_metrics_scraped_during_an_attack_grow_to_the_final_reports_counts(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    flags = ("--rate", "200/s", "--duration", "3s")
    with served_attack(echo.url, tmp_path, *flags) as served:
        scrapes = []
        while not served.report.exists():
            assert served.process.poll() is None, "the attack ended without a report"
            status, headers, body = served.get("/metrics")
            assert status == 200
            assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
            scrapes.append(families(body.decode()))
            pause(0.2)
        report = served.wait_for_report()
        final = families(served.get("/metrics")[2].decode())
        assert served.get("/healthz")[:1] == (200,)
        progress = json.loads(served.get("/progress.json")[2])
    total = report["total"]
    assert by_label(final["pyattacker_requests"], "outcome") == total["outcomes"]
    assert by_label(final["pyattacker_responses"], "status") == total["status"]
    assert by_label(final["pyattacker_errors"], "class") == total["error_classes"]
    assert final["pyattacker_attempts"] == {("pyattacker_attempts_total", ()): total["attempts"]}
    latency = final["pyattacker_latency_seconds"]
    for clock in ("scheduled", "sent"):
        count = latency[("pyattacker_latency_seconds_count", (("clock", clock),))]
        assert count == total["latency_s"][clock]["count"]
    assert final["pyattacker_in_flight"] == {("pyattacker_in_flight", ()): 0}
    assert progress["done"] is True
    assert progress["requests"] == total["requests"]
    # every scrape during the run: counters only grow, and never past the final count
    assert len(scrapes) >= 2
    seen = [sum(s["pyattacker_requests"].values()) for s in scrapes]
    assert seen == sorted(seen)
    assert seen[-1] <= total["requests"]
    assert seen[0] < total["requests"]  # at least one scrape saw the attack unfinished


def test_report_json_during_an_attack_grows_to_the_final_json_report(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    flags = ("--rate", "200/s", "--duration", "3s", "--threshold", "error_rate < 90%")
    with served_attack(echo.url, tmp_path, *flags) as served:
        seen = []
        while not served.report.exists():
            assert served.process.poll() is None, "the attack ended without a report"
            status, headers, body = served.get("/report.json")
            assert status == 200
            assert headers["Content-Type"] == "application/json"
            seen.append(json.loads(body))
            pause(0.2)
        report = served.wait_for_report()
        final = json.loads(served.get("/report.json")[2])
    assert final["live"]["done"] is True
    assert final["report"] == report  # the gate's thresholds section included
    assert "thresholds" in report
    running = [s["report"] for s in seen if s["live"]["started"] and not s["live"]["done"]]
    assert len(running) >= 2
    counts = [r["total"]["requests"] for r in running]
    assert counts == sorted(counts)
    assert counts[0] < counts[-1] <= report["total"]["requests"]


def test_an_llm_attack_serves_a_ttft_histogram_and_its_whole_report(tmp_path: Path) -> None:
    from pyattacker.servers import LlmServerProcess

    with LlmServerProcess(models="m", ttft="fixed:5ms", itl="fixed:1ms", output_tokens=4) as llm:
        flags = ("--llm", "--model", "m", "--shape", "10:4", "--rate", "50/s", "--requests", "20")
        with served_attack(f"{llm.url}/v1", tmp_path, *flags) as served:
            report = served.wait_for_report()
            final = families(served.get("/metrics")[2].decode())
            page = json.loads(served.get("/report.json")[2])
    assert page["title"] == "pyattacker attack report (LLM)"
    assert page["report"] == report
    assert page["report"]["llm"]["ttft_s"]["sent"]["count"] == 20
    ttft = final["pyattacker_ttft_seconds"]
    assert ttft[("pyattacker_ttft_seconds_count", ())] == report["llm"]["ttft_s"]["sent"]["count"]
    assert ttft[("pyattacker_ttft_seconds_bucket", (("le", "+Inf"),))] == 20


def test_a_request_head_over_16_kib_is_dropped_and_the_server_goes_on() -> None:
    async def main() -> tuple[bytes, bytes]:
        server = LiveServer()
        url = await server.start()
        try:
            huge = b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n"
            dropped = await _raw(url, huge)
            after = await _raw(url, b"GET /healthz HTTP/1.1\r\n\r\n")
            return dropped, after
        finally:
            await server.close()

    dropped, after = asyncio.run(main())
    assert dropped == b""
    assert after.endswith(b"ok\n")


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


def test_a_slow_first_report_build_does_not_hold_the_early_report_for_seconds() -> None:
    # The first /report.json build pays for imports (or meets a stalled machine): kept for
    # 50 times its cost, a 0.1 s build would show the first moment's report for 5 s.
    server = LiveServer()
    clock = _Clock()
    server._clock = clock  # type: ignore[assignment]
    builds: list[float] = []

    def report_json() -> dict[str, object]:
        builds.append(clock.t)
        clock.t += 0.1 if len(builds) == 1 else 0.001  # the first build is slow
        return {"report": {"requests": len(builds)}, "live": {}}

    server.report_json = report_json  # type: ignore[method-assign]
    server.on_start(lambda: None)  # type: ignore[arg-type,return-value]
    clock.t += 0.02  # 20 ms into the attack
    first = server.report_body()  # took 0.1 s: kept no longer than the 20 ms it covers
    second = server.report_body()  # so built again now, not held for 5 s
    assert json.loads(first)["report"] == {"requests": 1}
    assert json.loads(second)["report"] == {"requests": 2}
    clock.t += 0.01  # a cheap build (1 ms) is kept for 50 ms: polls cost the loop little
    assert server.report_body() == second
    assert len(builds) == 2
