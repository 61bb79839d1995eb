"""Reports you open in a browser: one self-contained HTML file per attack, run, bench or
comparison (the last in :mod:`pyattacker.report._html_compare`).

Each page is built from the same dict its JSON report is made of (``AttackResult.to_dict()``,
``BenchmarkReport.to_dict()``, the run summary of ``pyattacker report --json``), embedded
whole, so every figure the page shows is a value of the JSON report, formatted. What the
page adds is labelled as such: warnings put into words, the machine the page was written
on, and for a run the timeline and failed items read from its store.

Safety: no user data is ever inserted as HTML. The data goes into one
``<script type="application/json">`` element with ``<``, ``>`` and ``&`` escaped as
``\\u003c`` and friends (so a target URL or error message holding ``</script>`` cannot end
the element), and the page's own script builds the DOM with ``textContent`` only.

Self-contained: the charting library, the page's script and its styles are inlined; the page
asks the network for nothing, so it opens from disk and travels as a mail attachment.

Why uPlot (https://github.com/leeoniya/uPlot, MIT, shipped in ``assets/`` with its
licence): it is made for time series, draws 100,000+ points on a canvas in milliseconds,
and is one 50 kB file with no dependencies, so a page stays small enough to mail. The
heavier charting kits (Plotly, ECharts, Chart.js with plugins) weigh 200 kB to 3 MB and
bring features these pages do not use; drawing SVG by hand would mean maintaining axes,
log scales, legends and tooltips ourselves.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from pyattacker.report._html_run import store_extras
from pyattacker.report._html_words import attack_warnings
from pyattacker.report._run import summarize
from pyattacker.store import Store

if TYPE_CHECKING:  # the benchmark is not loaded for an attack's page
    from pyattacker.benchmark import BenchmarkReport

__all__ = [
    "attack_html",
    "attack_payload",
    "bench_html",
    "bench_notes",
    "embeddable",
    "machine",
    "page",
    "page_payload",
    "run_html",
]

#: the JSON element's id; the page's scripts read the report from it
DATA_ID = "report-data"

#: the page's own scripts, in order: the kit, then one per kind of page (assets/)
_SCRIPTS = ("page_kit.js", "page_attack.js", "page_run.js", "page_bench.js", "page_compare.js",
            "page_sweep.js")  # fmt: skip

_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def attack_html(report: Mapping[str, Any], *, machine_info: Mapping[str, Any] | None = None) -> str:
    """The page of one attack (HTTP or LLM) from its ``AttackResult.to_dict()``.

    ``machine_info`` describes where the attack ran (default: this machine, see
    :func:`machine`): the JSON report does not say, and the page is written where it ran.
    """
    payload = attack_payload(report, machine_info=machine_info)
    return page("attack", payload["title"], report, payload["extra"])


def attack_payload(
    report: Mapping[str, Any], *, machine_info: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What an attack's page draws (``kind``, ``title``, ``version``, ``report``,
    ``extra``): embedded by :func:`attack_html`, served by ``attack --serve``."""
    extra = {
        "warnings": attack_warnings(report),
        "machine": dict(machine() if machine_info is None else machine_info),
    }
    llm = report.get("plan", {}).get("llm")
    title = "pyattacker attack report" + (" (LLM)" if llm else "")
    return page_payload("attack", title, report, extra)


def bench_html(report: BenchmarkReport) -> str:
    """The page of one ``pyattacker bench`` sweep: its ``to_dict()`` (the ``--json``
    report), and the rules the table's notes state (who may claim a row, and why)."""
    data = report.to_dict()
    title = f"pyattacker bench report: {data['scenario']['name']}"
    return page("bench", title, data, {"notes": bench_notes(report.render_table())})


def bench_notes(table: str) -> list[str]:
    """The notes under the bench table (its lines after the first blank one): the rules
    for who may claim a row are stated once, by the report, and quoted here."""
    _, _, notes = table.strip("\n").partition("\n\n")
    return [line.strip() for line in notes.splitlines() if line.strip()]


def run_html(store: Store, *, errors: int = 5) -> str:
    """The page of one run's store: the summary ``pyattacker report --json --errors N``
    prints, and the timeline, retry delays and failed items read from the store."""
    summary = summarize(store, errors=errors)
    return page("run", "pyattacker run report", summary, store_extras(store))


def page(kind: str, title: str, report: Mapping[str, Any], extra: Mapping[str, Any]) -> str:
    """A whole HTML document: ``report`` (the JSON report) and ``extra`` (what the page
    adds) embedded as JSON for the page's scripts, which draw the ``kind`` of page.

    Raises ``ValueError`` for a report holding NaN or infinity (JSON has neither), as the
    JSON writers do.
    """
    payload = page_payload(kind, title, report, extra)
    data = json.dumps(payload, allow_nan=False, separators=(",", ":"), default=str)
    return _TEMPLATE.format(
        title=_text(title),
        uplot_css=_asset("uPlot.min.css"),
        page_css=_asset("page.css"),
        data_id=DATA_ID,
        data=embeddable(data),
        uplot_js=_asset("uPlot.iife.min.js"),
        page_js="\n".join(_asset(name) for name in _SCRIPTS),
    )


def page_payload(
    kind: str, title: str, report: Mapping[str, Any], extra: Mapping[str, Any]
) -> dict[str, Any]:
    """What a page's scripts draw: ``kind``, ``title``, ``version``, ``report`` (the JSON
    report) and ``extra`` (what the page adds); embedded by :func:`page`, served live as
    ``/report.json``."""
    from pyattacker._version import __version__

    return {"kind": kind, "title": title, "version": __version__, "report": report,
            "extra": extra}  # fmt: skip


def embeddable(text: str) -> str:
    """``text`` (JSON) safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` become
    ``\\u003c``, ``\\u003e``, ``\\u0026`` (still the same JSON once parsed), and so do
    U+2028/U+2029, which some parsers take for line ends."""
    return text.translate(_ESCAPES).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def machine() -> dict[str, Any]:
    """Where this process runs: host name, OS, CPU, cores usable, Python and pyattacker."""
    from pyattacker._version import __version__

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "host": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "pyattacker": __version__,
    }


@cache
def _asset(name: str) -> str:
    """A file shipped in ``pyattacker/report/assets`` (package data)."""
    return (resources.files("pyattacker.report") / "assets" / name).read_text(encoding="utf-8")


def _text(value: str) -> str:
    """``value`` as HTML text (the title is ours, but escape it all the same)."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# The inlined scripts hold no "</script" (checked by the tests), so they cannot end early.
_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>{uplot_css}</style>
<style>{page_css}</style>
</head>
<body>
<main id="page"><noscript>This report draws itself with JavaScript; \
the same figures are in the JSON below.</noscript></main>
<script type="application/json" id="{data_id}">{data}</script>
<script>{uplot_js}</script>
<script>{page_js}
pyattackerKit.draw();</script>
</body>
</html>
"""
