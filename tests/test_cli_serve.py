"""``pyattacker serve STORE``: a real run's store served read-only; ``/metrics`` read back
with prometheus_client's parser equals ``pyattacker report --json``; the page in Chromium."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.cli import run_cli
from pyattacker.report._run_metrics import metric_lines
from serve_helpers import assert_metrics_equal_the_report, fetch, finished_store, samples, served


def _report(store: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert run_cli(["report", str(store), "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


@pytest.mark.slow
def test_a_served_store_answers_metrics_equal_to_its_report_and_refuses_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store, code = finished_store(tmp_path, range(1, 21))
    assert code == 1  # four items fail on purpose
    report = _report(store, capsys)
    with served(tmp_path, store) as (url, process):
        status, headers, body = fetch(f"{url}/metrics")
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert_metrics_equal_the_report(body.decode(), report)
        assert fetch(f"{url}/healthz")[::2] == (200, b"ok\n")
        served_json = json.loads(fetch(f"{url}/report.json")[2])  # what the page draws
        assert served_json["report"]["pipelines"] == report["pipelines"]
        assert served_json["report"]["attempts"] == report["attempts"]
        assert served_json["live"]["done"] is True
        assert fetch(f"{url}/nothing-here")[0] == 404
        assert fetch(f"{url}/metrics/")[0] == 404
        status, headers, _ = fetch(f"{url}/metrics", method="POST")
        assert (status, headers["Allow"]) == (405, "GET, HEAD")
        status, headers, body = fetch(f"{url}/", method="HEAD")
        assert (status, body) == (200, b"")
        page = fetch(f"{url}/")[2].decode()
        assert int(headers["Content-Length"]) == len(page.encode())  # HEAD says GET's length
        address = (urlsplit(url).hostname, urlsplit(url).port)
        with socket.create_connection(address, timeout=60) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            assert raw.recv(64).startswith(b"HTTP/1.1 400 ")
        assert 'http-equiv="refresh"' not in page  # redrawn in place, never reloaded
        assert '<script src="/assets/page_live.js">' in page
        assert "<script>" not in page  # no inline script: the CSP allows none
        assert "Content-Security-Policy" in headers
        assert "<b id=injected>" not in page
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130


def test_serving_a_store_that_does_not_exist_exits_2_naming_it_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing.db"
    assert run_cli(["serve", str(missing), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "STORE" in err
    assert str(missing) in err
    assert list(tmp_path.iterdir()) == []


_LABEL_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)


@given(task=_LABEL_TEXT, error_class=_LABEL_TEXT)
def test_any_label_value_reads_back_unchanged_through_a_prometheus_parser(
    task: str, error_class: str
) -> None:
    metrics: list[tuple[str, str, str, list[tuple[dict[str, str], float]]]] = [
        ("pyattacker_run_attempts_total", "counter", "Attempts.", [({"task": task}, 3)]),
        ("pyattacker_run_errors_total", "counter", "Errors.", [({"class": error_class}, 2.5)]),
    ]
    found = samples("".join(metric_lines(metrics)))
    assert found["pyattacker_run_attempts_total"] == [({"task": task}, 3.0)]
    assert found["pyattacker_run_errors_total"] == [({"class": error_class}, 2.5)]
