"""``pyattacker attack --serve`` in a child process, and plain HTTP requests to its server.

The attack runs in a child so a test can scrape it while it runs and end the server's
linger with SIGINT, as a person at the terminal would with Ctrl-C.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Served:
    """A served attack: its process, the server's URL and where its JSON report goes."""

    process: subprocess.Popen[str]
    url: str
    report: Path

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """GET ``path``: status, headers, body (an HTTP error status is returned too)."""
        return fetch(self.url + path.lstrip("/"))

    def wait_for_report(self, timeout: float = 120.0) -> dict[str, Any]:
        """The JSON report, once written (it is, before the server's linger starts)."""
        deadline_polls = int(timeout / 0.05)
        for _ in range(deadline_polls):
            if self.report.exists():
                loaded: dict[str, Any] = json.loads(self.report.read_text(encoding="utf-8"))
                return loaded
            assert self.process.poll() is None, self.process.stderr
            pause(0.05)
        raise AssertionError("the served attack wrote no report")


def requests_by_outcome(text: str) -> dict[str, int]:
    """``pyattacker_requests_total`` by outcome, read by Prometheus's own parser."""
    for family in text_string_to_metric_families(text):
        if family.name == "pyattacker_requests":
            return {s.labels["outcome"]: int(s.value) for s in family.samples}
    return {}


def watch_until_report(served: Served) -> tuple[list[dict[str, Any]], list[int]]:
    """Scrape ``/report.json`` and ``/metrics`` every 0.2 s until the JSON report is
    written: every page read, and the requests ``/metrics`` counted at each scrape."""
    seen: list[dict[str, Any]] = []
    scrapes: list[int] = []
    while not served.report.exists():
        assert served.process.poll() is None, "the attack ended without a report"
        seen.append(json.loads(served.get("/report.json")[2]))
        scrapes.append(sum(requests_by_outcome(served.get("/metrics")[2].decode()).values()))
        pause(0.2)
    return seen, scrapes


def served_workers_run(
    target: str, tmp_path: Path, server_count: Callable[[], int], *flags: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Serve an attack of two workers (``flags``) against ``target`` to its end, checking
    what every such run must show: while it ran, the merged whole of both workers, partial
    and never falling; at the end, the final report on every endpoint, its count what
    ``server_count()`` says. Returns the final report and the reports seen while it ran."""
    with served_attack(target, tmp_path, *flags) as served:
        seen, scrapes = watch_until_report(served)
        report = served.wait_for_report()
        final = json.loads(served.get("/report.json")[2])
        metrics = requests_by_outcome(served.get("/metrics")[2].decode())
        progress = json.loads(served.get("/progress.json")[2])
    assert final["live"]["done"] is True
    assert final["report"] == report
    assert report["workers"]["count"] == 2
    assert report["workers"]["lost"] == []
    assert metrics == report["total"]["outcomes"]
    assert report["total"]["requests"] == server_count()
    assert progress["done"] is True
    assert progress["requests"] == report["total"]["requests"]
    running = [s["report"] for s in seen if s["live"]["started"] and not s["live"]["done"]]
    assert len(running) >= 2
    counts = [r["total"]["requests"] for r in running]
    assert counts == sorted(counts)
    # a partial whole before the end (two reads may fall between two of the page's
    # refreshes on a busy machine, so not necessarily two different counts)
    assert counts[0] < report["total"]["requests"]
    assert counts[-1] <= report["total"]["requests"]
    assert all(r["workers"]["count"] == 2 for r in running)
    assert scrapes == sorted(scrapes)
    assert scrapes[-1] <= report["total"]["requests"]
    return report, running


def fetch(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@contextmanager
def served_attack(target: str, tmp_path: Path, *flags: str) -> Iterator[Served]:
    """``pyattacker attack TARGET FLAGS --serve --serve-linger 120s --json ...``; on exit,
    SIGINT ends the linger and the process is waited for."""
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pyattacker", "attack", target, "-q", *flags,
               "--json", str(report), "--serve", "--serve-linger", "120s"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = ""
        assert process.stderr is not None
        for line in process.stderr:
            if line.startswith("live page: "):
                url = line.split()[2]
                break
        assert url.startswith("http://127.0.0.1:"), url
        yield Served(process, url, report)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def pause(seconds: float) -> None:
    """Wait between polls (a scrape loop that never pauses would load the attack's loop)."""
    import time

    time.sleep(seconds)
