"""The headline figures an LLM report leads with, from its own JSON sections.

Every figure is a value the report already holds, picked and divided, never measured
again: so the headline, the LLM section and a sweep's rows (which are made of headlines)
always agree.

- ``output_tokens_per_s``: completion tokens (the server's usage counts) per second of
  the answer span (``summary.answer_span_s``);
- ``requests_per_s``: OK answers per second of the same span;
- ``ttft_p50_s`` / ``ttft_p99_s``: time to first token on the *scheduled* clock (from
  when the load model meant the request to start: what a user waits; the sent clock's
  is in the LLM section);
- ``itl_p50_s`` / ``itl_p99_s``: inter-token latency of the streams that ended OK.

A figure with no data behind it (nothing streamed, an empty span, no request measured: a
warmup that took them all) is ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["HEADLINE_CLOCK", "headline"]

HEADLINE_CLOCK = "scheduled"


def headline(summary: Mapping[str, Any], llm: Mapping[str, Any]) -> dict[str, Any]:
    """The headline of a report whose ``summary`` and ``llm`` sections are given."""
    span = summary["answer_span_s"] if summary.get("completed", 1) else 0.0
    ok = llm["per_minute"]["ok_requests"] if span else None
    ttft, itl = llm["ttft_s"][HEADLINE_CLOCK], llm["itl_s"]
    return {
        "output_tokens_per_s": llm["tokens"]["completion"] / span if span else None,
        "requests_per_s": None if ok is None else ok / 60.0,
        "ttft_p50_s": ttft["p50"] if ttft["count"] else None,
        "ttft_p99_s": ttft["p99"] if ttft["count"] else None,
        "itl_p50_s": itl["p50"] if itl["count"] else None,
        "itl_p99_s": itl["p99"] if itl["count"] else None,
        "ttft_clock": HEADLINE_CLOCK,
    }
