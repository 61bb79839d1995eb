"""``attack --serve --workers 2``: the live page and ``/metrics`` of an attack run by
worker processes, fed by their merged snapshots, end equal to the final report; the
gate's sections come with the final report only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_helpers import requests_by_outcome, served_attack, watch_until_report
from pyattacker.servers import EchoServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServerProcess]:
    with EchoServerProcess(delay="fixed:1ms", fail="429:0.1,500:0.1", seed=3) as server:
        yield server


def test_a_served_attack_on_two_workers_shows_the_merged_snapshots_then_the_final_report(
    echo: EchoServerProcess, tmp_path: Path
) -> None:
    echo.reset()
    flags = ("--rate", "200/s", "--duration", "3s", "--workers", "2", "--threshold",
             "error_rate < 90%")  # fmt: skip
    with served_attack(echo.url, tmp_path, *flags) as served:
        seen, scrapes = watch_until_report(served)
        report = served.wait_for_report()
        final = json.loads(served.get("/report.json")[2])
        metrics = requests_by_outcome(served.get("/metrics")[2].decode())
        progress = json.loads(served.get("/progress.json")[2])
    assert final["live"]["done"] is True
    assert final["report"] == report
    assert report["workers"] == {"count": 2, "lost": []}
    assert metrics == report["total"]["outcomes"]
    assert report["total"]["requests"] == echo.stats()["count"] == 600
    assert progress["done"] is True
    assert progress["requests"] == report["total"]["requests"]
    running = [s["report"] for s in seen if s["live"]["started"] and not s["live"]["done"]]
    assert len(running) >= 2
    counts = [r["total"]["requests"] for r in running]
    assert counts == sorted(counts)
    assert counts[0] < counts[-1] <= report["total"]["requests"]
    assert all(r["workers"]["count"] == 2 for r in running)
    # the gate's sections come with the final report (goodput is added up at the end)
    assert "thresholds" in report
    assert not any("thresholds" in r for r in running)
    assert scrapes == sorted(scrapes)
    assert scrapes[-1] <= report["total"]["requests"]
