"""Renderers: turn measured facts into text, Markdown, JSON and HTML. Opinions live here.

Also the opinions that gate a run: thresholds and goodput (:class:`Gate`), and the
comparison of two reports; and what ``attack --serve`` shows live (:class:`LiveServer`,
its ``/metrics``: :class:`AttackMetrics`) and what ``pyattacker serve STORE`` shows
(:func:`serve_store`, its ``/metrics``: :func:`prometheus_text`).
"""

from pyattacker.report._attack import attack_json, attack_markdown, attack_text
from pyattacker.report._compare import Comparison, Row, compare_reports, comparison_text
from pyattacker.report._gate import EXIT_BREACHED, Gate
from pyattacker.report._html import attack_html, bench_html, run_html
from pyattacker.report._html_compare import compare_html
from pyattacker.report._live import LiveServer, serve_attack
from pyattacker.report._live_workers import serve_workers
from pyattacker.report._metrics import AttackMetrics
from pyattacker.report._run import summarize
from pyattacker.report._run_metrics import prometheus_text
from pyattacker.report._run_text import render_run_text
from pyattacker.report._serve_store import serve_store
from pyattacker.report._sweep import sweep_dict, sweep_html, sweep_json, sweep_markdown, sweep_text
from pyattacker.report._thresholds import Threshold, parse_threshold
from pyattacker.report._workers import clock_text, worker_now_line, workers_now

__all__ = [
    "EXIT_BREACHED",
    "AttackMetrics",
    "Comparison",
    "Gate",
    "LiveServer",
    "Row",
    "Threshold",
    "attack_html",
    "attack_json",
    "attack_markdown",
    "attack_text",
    "bench_html",
    "clock_text",
    "compare_html",
    "compare_reports",
    "comparison_text",
    "parse_threshold",
    "prometheus_text",
    "render_run_text",
    "run_html",
    "serve_attack",
    "serve_store",
    "serve_workers",
    "summarize",
    "sweep_dict",
    "sweep_html",
    "sweep_json",
    "sweep_markdown",
    "sweep_text",
    "worker_now_line",
    "workers_now",
]
