"""Renderers: turn measured facts into text, Markdown, JSON and HTML. Opinions live here."""

from pyattacker.report._attack import attack_json, attack_markdown, attack_text
from pyattacker.report._html import attack_html, bench_html, run_html

__all__ = ["attack_html", "attack_json", "attack_markdown", "attack_text", "bench_html", "run_html"]
