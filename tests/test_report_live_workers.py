"""``attack --serve --workers 2``: the live page and ``/metrics`` of an attack run by
worker processes, fed by their merged snapshots, end equal to the final report; the
gate's sections come with the final report only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from live_helpers import served_workers_run
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
    report, running = served_workers_run(echo.url, tmp_path, lambda: echo.stats()["count"], *flags)
    assert report["total"]["requests"] == 600
    assert report["workers"] == {"count": 2, "lost": [], "on_ray": False}
    # the gate's sections come with the final report (goodput is added up at the end)
    assert "thresholds" in report
    assert not any("thresholds" in r for r in running)
