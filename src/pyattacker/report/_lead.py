"""The lines every attack report leads with, before its tables: the headline figures of
an LLM run (``headline`` in the JSON report) and what a warmup sent and left out
(``warmup``). Text and Markdown print the same lines; the HTML page draws the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["headline_text", "lead_lines", "warmup_text", "warmup_what"]


def lead_lines(data: Mapping[str, Any]) -> list[str]:
    """The headline line (LLM runs) and the warmup line (runs with one), in that order."""
    lines = []
    if data.get("headline") is not None:
        lines.append(headline_text(data["headline"]))
    if data.get("warmup") is not None:
        lines.append(warmup_text(data["warmup"]))
    return lines


def headline_text(h: Mapping[str, Any]) -> str:
    """``Headline: 812.0 output tokens/s · 4.1 requests/s · TTFT p50 .. ms, p99 .. ms
    (scheduled clock) · ITL p50 .. ms, p99 .. ms``."""
    return (
        f"Headline: {_num(h['output_tokens_per_s'])} output tokens/s · "
        f"{_num(h['requests_per_s'], 2)} requests/s (OK answers) · "
        f"TTFT p50 {_ms(h['ttft_p50_s'])}, p99 {_ms(h['ttft_p99_s'])} "
        f"({h['ttft_clock']} clock) · ITL p50 {_ms(h['itl_p50_s'])}, p99 {_ms(h['itl_p99_s'])}"
    )


def warmup_text(w: Mapping[str, Any]) -> str:
    """``Warmup: 10 requests in the first 5s, excluded from every figure (...)``."""
    return (
        f"Warmup: {warmup_what(w)}, excluded from every figure below; it sent "
        f"{w['sent_attempts']:,} attempts for {w['sent']:,} requests (count them against "
        "the server's own count)"
    )


def warmup_what(w: Mapping[str, Any]) -> str:
    """What a warmup set apart: ``10 requests in the first 5s`` or ``the first 10 requests
    (0.50s)``."""
    if w["seconds"] is not None:
        return f"{w['scheduled']:,} requests in the first {w['seconds']:g}s"
    return f"the first {w['scheduled']:,} requests ({w['skipped_s']:.2f}s)"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:,.1f} ms"
