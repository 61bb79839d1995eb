"""``compare_html`` on hand-built attack reports: the page embeds the ``compare --json``
document unchanged, says who each run is, and keeps a hostile file name as data."""

from __future__ import annotations

import json
import re
from typing import Any

from pyattacker.report import compare_html, compare_reports
from test_report_compare import attack_report


def _document(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> dict[str, Any]:
    """What ``compare --json`` writes for ``a`` and ``b`` read from files ``names``."""
    return {"a": names[0], "b": names[1], **compare_reports(a, b, names=names).to_dict()}


def _payload(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                      html, re.S)  # fmt: skip
    assert found is not None
    payload: dict[str, Any] = json.loads(found.group(1))
    return payload


def test_the_page_embeds_the_compare_json_document_and_who_each_run_is() -> None:
    a, b = attack_report(base=0.002), attack_report(base=0.006)
    a["started_at"], b["started_at"] = "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"
    document = _document(a, b, ("before.json", "after.json"))
    payload = _payload(compare_html(document, a, b))
    assert payload["kind"] == "compare"
    assert payload["report"] == document
    runs = payload["extra"]["runs"]
    assert [run["file"] for run in runs] == ["before.json", "after.json"]
    assert [run["started_at"] for run in runs] == [a["started_at"], b["started_at"]]
    assert runs[1]["dists"]["latency"] == b["total"]["latency_s"]["scheduled"]
    assert payload["extra"]["counts"]["regressions"] == len(document["regressions"]) > 0


def test_a_file_name_holding_markup_stays_inside_the_json() -> None:
    hostile = "</script><script>alert(1)</script>.json"
    a = attack_report()
    html = compare_html(_document(a, a, (hostile, "b.json")), a, a)
    assert "alert(1)</script>" not in html
    assert _payload(html)["report"]["a"] == hostile
