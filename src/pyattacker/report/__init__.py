"""Renderers: turn measured facts into text, Markdown and JSON. Opinions live here."""

from pyattacker.report._attack import attack_json, attack_markdown, attack_text
from pyattacker.report._run import summarize
from pyattacker.report._run_text import render_run_text

__all__ = [
    "attack_json",
    "attack_markdown",
    "attack_text",
    "render_run_text",
    "summarize",
]
