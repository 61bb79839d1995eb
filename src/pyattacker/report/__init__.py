"""Renderers: turn measured facts into text, Markdown and JSON. Opinions live here."""

from pyattacker.report._attack import attack_json, attack_markdown, attack_text

__all__ = ["attack_json", "attack_markdown", "attack_text"]
