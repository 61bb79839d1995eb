"""The attack report in three forms, all from ``AttackResult.to_dict()``.

One source (the dict) keeps the three in agreement: the terminal table, the Markdown file
and the JSON document show the same numbers. Every latency row says which clock it uses:
``scheduled`` (from when the request should have started: what a user sees) or ``sent``
(from when it left: service time).

Every report quotes what went wrong: the most common kinds of error message requests ended
with (``errors``, messages that differ only in numbers and ids grouped), one example each,
besides the status codes and error classes that only say how often.

"Throttled" is said three ways, each labelled: requests that *ended* throttled (the
outcomes and the ``throttled (ended)`` series columns), requests throttled *at least
once*, and throttled *attempts* (the LLM series' ``throttled (attempts)``); a run with
none says ``throttled: none``.

An LLM attack's header says what was asked (model, API, streaming, prompts, parameters;
never a key). An LLM run (one whose ``to_dict()`` has an ``llm`` section) adds an LLM
section: TTFT,
ITL, TPOT and end-to-end on the clocks that apply, with the requests each covers, tokens
and requests per minute over the span each happened in, throttling, attempts per
request, the utilisation header and a time series in the columns LLM load tools usually print.
Without LLM data nothing of it is printed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.attack import AttackResult, lag_is_large
from pyattacker.report._flows import flow_lines, flow_markdown, flow_schedule
from pyattacker.report._lead import lead_lines
from pyattacker.report._timing import TIMING_NOTE, timing_header, timing_rows
from pyattacker.report._workers import lost_worker_lines, workers_line

__all__ = ["attack_json", "attack_markdown", "attack_text"]

_COLUMNS = ("count", "min", "p50", "p90", "p95", "p99", "p99.9", "max")
_LLM_COLUMNS = ("count", "mean", "min", "p50", "p90", "p95", "p99", "p99.9", "max")
_MAX_WINDOW_ROWS = 120
_MAX_ERROR_LINES = 5
_UNSENT = "never sent (dropped, cancelled or failed before sending)"


def attack_json(result: AttackResult, *, indent: int | None = 2) -> str:
    """The full report as JSON (seconds, counts and rates; no opinions)."""
    return json.dumps(result.to_dict(), indent=indent, allow_nan=False, default=_unserialisable)


def attack_markdown(result: AttackResult) -> str:
    """The report as a Markdown document (headline, latency table, counts, time series)."""
    data = result.to_dict()
    lines = [f"# pyattacker attack — {_title(data)}", ""]
    lines += [*_items(_headline(data)), *_items(lost_worker_lines(data))]
    lines += _items([w for w in [workers_line(data)] if w])
    lines += [*_items(lead_lines(data)), ""]
    latency = _latency_rows(data, nested="total: {}")
    lines += ["## Latency (ms)", "", *_markdown_table(_latency_header(), latency), ""]
    if timing := timing_rows(data):  # the timing section (report/_timing.py)
        lines += [
            "## Timing (ms)",
            "",
            *_markdown_table(timing_header(), timing),
            "",
            TIMING_NOTE,
            "",
        ]
    lines += ["## Counts", "", *(f"- {line}" for line in _count_lines(data))]
    lines += [*_error_markdown(data["errors"]), "", *flow_markdown(data)]
    windows = data["windows"]
    if windows:
        lines += [f"## Time series ({data['plan']['window_s']:g} s windows)", ""]
        lines += _markdown_table(_window_header(), _window_rows(windows))
        lines.append("")
    llm = data.get("llm")
    if llm is not None:
        lines += ["## LLM", "", *_items(_llm_intro(llm)), ""]
        lines += [*_markdown_table(_llm_header(), _llm_rows(llm, nested="{}")), ""]
        lines += [*_items(_llm_lines(llm, data["summary"]["schedule_s"])), ""]
        if llm["windows"]:
            lines += [f"### LLM time series ({data['plan']['window_s']:g} s windows)", ""]
            lines += [_LLM_SERIES_NOTE, ""]
            lines += _markdown_table(_llm_window_header(), _llm_window_rows(llm["windows"]))
            lines.append("")
    return "\n".join(lines)


def attack_text(result: AttackResult) -> str:
    """The report for a terminal: plain aligned text (rich renders it as is)."""
    data = result.to_dict()
    lines = [f"pyattacker attack — {_title(data)}", *_headline(data)]
    workers = [w for w in [workers_line(data)] if w]
    lines += [*lost_worker_lines(data), *workers, *lead_lines(data), ""]  # a lost worker: its gap
    latency = _latency_rows(data, nested="  {}")
    lines += ["Latency (ms)", *_aligned(_latency_header(), latency, labels=2), ""]
    if timing := timing_rows(data):  # the timing section (report/_timing.py)
        lines += ["Timing (ms)", *_aligned(timing_header(), timing, labels=1), TIMING_NOTE, ""]
    lines += _count_lines(data)
    lines += _error_text(data["errors"])
    lines += ["", *flow_lines(data)] if "flows" in data else []
    windows = data["windows"]
    if windows:
        lines += ["", f"Time series ({data['plan']['window_s']:g} s windows)"]
        rows = _window_rows(windows)
        if len(rows) > _MAX_WINDOW_ROWS:
            lines.append(f"(first {_MAX_WINDOW_ROWS} of {len(rows)} windows; --json has all)")
            rows = rows[:_MAX_WINDOW_ROWS]
        lines += _aligned(_window_header(), rows, labels=1)
    llm = data.get("llm")
    if llm is not None:
        table = _aligned(_llm_header(), _llm_rows(llm, nested="  {}"), labels=2)
        lines += ["", "LLM", *_llm_intro(llm), *table, ""]
        lines += _llm_lines(llm, data["summary"]["schedule_s"])
        if llm["windows"]:
            lines += ["", f"LLM time series ({data['plan']['window_s']:g} s windows)"]
            lines.append(_LLM_SERIES_NOTE)
            rows = _llm_window_rows(llm["windows"])
            if len(rows) > _MAX_WINDOW_ROWS:
                lines.append(f"(first {_MAX_WINDOW_ROWS} of {len(rows)} windows; --json has all)")
                rows = rows[:_MAX_WINDOW_ROWS]
            lines += _aligned(_llm_window_header(), rows, labels=1)
    return "\n".join(lines)


# -- pieces ------------------------------------------------------------------------------


def _title(data: Mapping[str, Any]) -> str:
    plan = data["plan"]
    load = plan["load"]
    if load["model"] == "open":
        if load["stages"]:
            shape = " → ".join(f"{r:g}/s over {d:g}s" for d, r in load["stages"])
            what = f"open model, {load['arrival']} arrivals, from {load['rate']:g}/s: {shape}"
        else:
            what = f"open model, {load['arrival']} arrivals at {load['rate']:g}/s"
    else:
        think = f", think {load['think_time']:g}s" if load["think_time"] else ""
        what = f"closed model, {load['clients']} clients{think}"
    targets = plan["targets"]
    where = targets[0] if len(targets) == 1 else f"{len(targets)} targets"
    opened = plan.get("preconnect")  # absent from reports written before it existed
    first = f", {opened} connections per target opened first" if opened else ""
    resolve = plan.get("resolve")  # absent from reports written before it existed
    routed = f", connecting by --resolve {' '.join(resolve)}" if resolve else ""
    source = f", as planned in {plan['file']}" if plan.get("file") else ""
    return f"{_request_words(plan, where)}, {what}, retry {plan['retry']}{first}{routed}{source}"


def _request_words(plan: Mapping[str, Any], where: str) -> str:
    """What each request is and where it goes: the method and ``where``, the flows of
    ``--scenario`` on ``where``, or the mix of ``--targets`` on ``where``; with ``--data``,
    whose rows fill it."""
    if plan.get("scenario"):
        return f"flows {plan['scenario']} on {where}"
    mix = plan.get("mix")
    if not mix:
        return f"{plan['method']} {where}"
    if any(line["name"] is not None for line in mix["lines"]):
        source = f" ({mix['source']})" if mix["source"] else ""
        words = f"a mix of {len(mix['lines'])} requests{source} on {where}"
    else:
        words = f"{plan['method']} {where}"
    data = mix["data"]
    return words + (f" ({data['order']} rows of {data['file']})" if data else "")


def _headline(data: Mapping[str, Any]) -> list[str]:
    s = data["summary"]
    if data.get("flows") is None:
        planned = "" if s["planned"] is None else f"planned {s['planned']:.0f} · "
        rate = f"{s['achieved_rate']:.1f}/s"
        if s["planned_rate"] is not None:
            rate += f" of {s['planned_rate']:.1f}/s planned"
        schedule = f"{planned}scheduled {s['scheduled']} · sent {s['sent']} ({rate})"
    else:  # the plan's arrivals are flows, and what is sent their steps: said apart
        schedule = flow_schedule(s)
    lines = [
        f"Plan span {s['schedule_s']:.2f}s, finished after {s['elapsed_s']:.2f}s: {schedule} · "
        f"late {s['late']} (> {s['late_after_s'] * 1000:g} ms) · dropped {s['dropped']}",
    ]
    llm = data["plan"].get("llm")
    if llm is not None:
        lines.insert(0, _llm_plan_line(llm))
    if s["stop_reason"]:
        lines.append(f"Stopped early: {s['stop_reason']} (figures cover what ran).")
    lag = s.get("loop_lag_s")
    if lag and lag["count"]:
        lines.append(
            f"Generator loop lag: p50 {_ms(lag['p50'])} · p99 {_ms(lag['p99'])} · "
            f"max {_ms(lag['max'])} ms (how late our own event loop ran; under 1 ms is noise)"
        )
        median = _sent_p50(data)
        if lag_is_large(lag["p99"], median):
            lines.append(
                f"WARNING: the generator itself fell behind (loop lag p99 {_ms(lag['p99'])} ms"
                f"{_against(median)}): one answer in a hundred may have been timed up to that "
                "much late, so the upper percentiles include our own delay, not the server's. "
                "Lower the rate, the clients or the streams, or give the generator a CPU of "
                "its own."
            )
    return lines


def _sent_p50(data: Mapping[str, Any]) -> float | None:
    """The sent clock's median latency of the whole attack, None when nothing was timed."""
    sent = (data["total"].get("latency_s") or {}).get("sent") or {}
    return sent.get("p50") if sent.get("count") else None


def _against(median: float | None) -> str:
    return "" if median is None else f"; median latency {_ms(median)} ms"


def _llm_plan_line(llm: Mapping[str, Any]) -> str:
    """``LLM: model m, chat API, streamed; prompts: ...``: what an LLM attack asked for."""
    model = "deployment's model" if llm["model"] is None else f"model {llm['model']}"
    stream = "streamed" if llm["stream"] else "whole body (not streamed)"
    parts = [f"LLM: {model}, {llm['api']} API, {stream}", f"prompts: {_prompts(llm['prompts'])}"]
    if llm["max_tokens"] is not None and llm["prompts"]["kind"] != "synthetic":
        parts.append(f"max_tokens {llm['max_tokens']}")
    if llm["azure_deployment"] is not None:
        parts.append(f"Azure deployment {llm['azure_deployment']}")
    if llm["api_version"] is not None:
        parts.append(f"api-version {llm['api_version']}")
    if llm["extra"]:
        parts.append("extra: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in llm["extra"].items()))
    return "; ".join(parts)


def _prompts(prompts: Mapping[str, Any]) -> str:
    if prompts["kind"] == "synthetic":
        return (
            f"{prompts['note']} (synthetic, seed {prompts['seed']}), "
            f"max_tokens {prompts['max_tokens']}"
        )
    if prompts["kind"] == "jsonl":
        return f"file {prompts['file']}, {prompts['lines']} lines"
    return str(prompts["kind"])


def _latency_header() -> list[str]:
    return ["", "clock", *_COLUMNS]


def _latency_rows(data: Mapping[str, Any], *, nested: str) -> list[list[str]]:
    """The latency table; ``nested`` formats the labels of the rows under ``total``
    (indented for a terminal, ``total: ...`` in Markdown, which drops the indent)."""
    rows: list[list[str]] = []
    sections = [("total", data["total"])]
    if len(data["targets"]) > 1:
        sections += list(data["targets"].items())
    sections += [(f"name: {name}", stats) for name, stats in data.get("names", {}).items()]
    for name, stats in sections:
        rows.append([name, "scheduled", *_cells(stats["latency_s"]["scheduled"])])
        rows.append(["", "sent", *_cells(stats["latency_s"]["sent"])])
        if name == "total":
            rows.append([nested.format("ok only"), "scheduled", *_cells(stats["latency_ok_s"])])
            delay = _cells(stats["dispatch_delay_s"])
            rows.append([nested.format("dispatch delay"), "sched→sent", *delay])
            rows.append([nested.format("first byte"), "sent", *_cells(stats["ttfb_s"])])
    return rows


def _cells(summary: Mapping[str, Any]) -> list[str]:
    cells = [str(summary.get("count", 0))]
    for key in _COLUMNS[1:]:
        value = summary.get(key)
        cells.append(_ms(value))
    return cells


def _ms(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return "-"
    return f"{value * 1000:.2f}"


def _count_lines(data: Mapping[str, Any]) -> list[str]:
    total = data["total"]
    per_request = total["requests"] and total["attempts"] / total["requests"]
    lines = [
        "Outcomes (how requests ended): " + _pairs(total["outcomes"]),
        "Status codes: " + _pairs(total["status"]),
        "Error classes: " + _pairs(total["error_classes"]),
        f"Attempts: {_attempts(total)} "
        f"({per_request:.2f} per request; histogram {_pairs(total['attempts_per_request'])}); "
        f"{_throttled(total)}",
        "Retry decisions: " + _pairs(data["retry_decisions"]),
    ]
    if total["early_sends"]:
        lines.append(
            f"WARNING: {total['early_sends']} requests were sent before their scheduled time "
            "(a timer fired early); their dispatch delay counts as 0"
        )
    if len(data["targets"]) > 1:
        for target, stats in data["targets"].items():
            lines.append(
                f"  {target}: {_pairs(stats['outcomes'])}; status {_pairs(stats['status'])}"
            )
    for name, stats in data.get("names", {}).items():
        lines.append(
            f"  name {name}: {_pairs(stats['outcomes'])}; status {_pairs(stats['status'])}"
        )
    return lines


def _throttled(stats: Mapping[str, Any]) -> str:
    """``requests throttled at least once: 16 (12 still throttled at the end), throttled
    attempts 30``, or ``throttled: none``."""
    at_least_once, attempts = stats["throttled_requests"], stats["throttled_attempts"]
    if not at_least_once and not attempts:
        return "throttled: none"
    ended = stats["outcomes"].get("throttled", 0)
    return (
        f"requests throttled at least once: {at_least_once} ({ended} still throttled at the "
        f"end), throttled attempts {attempts}"
    )


def _pairs(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items()) or "none"


def _attempts(stats: Mapping[str, Any]) -> str:
    """``20 for 20 requests, 8 sent, 12 never sent (...)``: how many reached a server."""
    attempts, sent = stats["attempts"], stats["sent_attempts"]
    text = f"{attempts} for {stats['requests']} requests"
    if sent == attempts:
        return f"{text}, all sent" if attempts else text
    return f"{text}, {sent} sent, {attempts - sent} {_UNSENT}"


def _error_lines(
    errors: Sequence[Mapping[str, Any]],
) -> tuple[str, list[tuple[int, str]], str | None]:
    """A title, ``(count, example)`` of the most common kinds of message, and a line for
    the requests those leave out (``None`` when none is left out)."""
    if not errors:
        return "Errors: none", [], None
    total = sum(group["count"] for group in errors)
    shown = [g for g in errors if g["example"] is not None][:_MAX_ERROR_LINES]
    rest = total - sum(group["count"] for group in shown)
    title = (
        "Errors (requests by the kind of message they ended with, most common first, "
        f"one example each; {total} in all):"
    )
    more = f"{rest} more of other kinds (--json lists every kind kept)" if rest else None
    return title, [(group["count"], group["example"]) for group in shown], more


def _error_text(errors: Sequence[Mapping[str, Any]]) -> list[str]:
    title, shown, more = _error_lines(errors)
    width = max((len(str(count)) for count, _ in shown), default=0)
    lines = [title, *(f"  {count:>{width}}  {message}" for count, message in shown)]
    return lines if more is None else [*lines, f"  {more}"]


def _error_markdown(errors: Sequence[Mapping[str, Any]]) -> list[str]:
    title, shown, more = _error_lines(errors)
    lines = [f"- {title}", *(f"  - {count}: {_code(message)}" for count, message in shown)]
    return lines if more is None else [*lines, f"  - {more}"]


def _code(text: str) -> str:
    """``text`` as Markdown inline code, so that a message's ``*`` or ``_`` stays as is
    (double backticks when it holds one)."""
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def _window_header() -> list[str]:
    return [
        "t (s)",
        "sched",
        "sent",
        "ok",
        "failed",
        "throttled (ended)",
        "dropped",
        "max in flight",
        "p50 sched",
        "p99 sched",
        "p99 sent",
    ]


def _window_rows(windows: list[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for w in windows:
        rows.append(
            [
                f"{w['start']:g}",
                str(w["scheduled"]),
                str(w["sent"]),
                str(w["ok"]),
                str(w["failed"]),
                str(w["throttled"]),
                str(w["dropped"]),
                str(w["max_in_flight"]),
                _ms(w["latency"].get("p50")),
                _ms(w["latency"].get("p99")),
                _ms(w["service_time"].get("p99")),
            ]
        )
    return rows


# -- LLM ---------------------------------------------------------------------------------


_LLM_SERIES_NOTE = (
    "rpm: requests sent per minute of the window (of the part of it sending covered, as the "
    "summary's sent rate); max in flight: the most requests in progress at once; answered: "
    "requests that got an answer (OK, failed or throttled), of which failed: an error other "
    "than a throttle, and throttled (ended): the last attempt refused, each request in the "
    "window it ended in; throttled (attempts): refused attempts, each in the window it ended "
    "in (a retried request may count several); TTFT on the sent clock, of the answers that "
    "streamed; e2e on the scheduled clock, of the OK answers; times in ms."
)
_CLOCKS = (
    "Clocks: sent = from the request's first send, scheduled = from when it should have "
    "started; both span every attempt of a retried request."
)


def _llm_intro(llm: Mapping[str, Any]) -> list[str]:
    streamed, ok, answers = llm["streamed_requests"], llm["ok_streams"], llm["ok_answers"]
    if not streamed:
        return [
            f"No answer streamed: time to first token, inter-token latency and time per "
            f"output token need a streamed answer. End to end covers the {answers} OK "
            "answers. Times in ms.",
            _CLOCKS,
        ]
    return [
        f"{streamed} answers streamed (answered requests whose last attempt got a first "
        f"token): {ok} OK, failed after first token: {llm['failed_after_first_token']}.",
        f"Time to first token covers all {streamed}; inter-token latency and time per "
        f"output token the {ok} OK streams; end to end the {answers} OK answers (a stream "
        "that broke has a TTFT but no end to end). Times in ms.",
        _CLOCKS,
    ]


def _llm_header() -> list[str]:
    return ["", "clock", *_LLM_COLUMNS]


def _llm_rows(llm: Mapping[str, Any], *, nested: str) -> list[list[str]]:
    """The LLM table; without a streamed answer, only end to end (the intro says why).
    ``nested`` formats the per-target rows' labels (as in :func:`_latency_rows`)."""
    rows = [
        ["end to end", "sent", *_llm_cells(llm["e2e_s"]["sent"])],
        ["", "scheduled", *_llm_cells(llm["e2e_s"]["scheduled"])],
    ]
    if not llm["streamed_requests"]:
        return rows
    rows[:0] = [
        ["time to first token", "sent", *_llm_cells(llm["ttft_s"]["sent"])],
        ["", "scheduled", *_llm_cells(llm["ttft_s"]["scheduled"])],
        ["inter-token latency", "chunk gaps", *_llm_cells(llm["itl_s"])],
        ["time per output token", "first→end", *_llm_cells(llm["tpot_s"])],
    ]
    for target, stats in llm.get("targets", {}).items():
        rows.append(
            [nested.format(f"{target}: TTFT"), "sent", *_llm_cells(stats["ttft_s"]["sent"])]
        )
    return rows


def _llm_cells(summary: Mapping[str, Any]) -> list[str]:
    return [str(summary.get("count", 0)), *(_ms(summary.get(k)) for k in _LLM_COLUMNS[1:])]


def _llm_lines(llm: Mapping[str, Any], schedule: float) -> list[str]:
    """Tokens, rates and what the server saw; the throttling and attempt counts are the
    ``Attempts:`` line's, not repeated here."""
    tokens, rate = llm["tokens"], llm["per_minute"]
    lines = [
        f"Tokens: {tokens['prompt']} prompt, {tokens['completion']} completion "
        f"(usage of {tokens['requests_with_usage']} OK requests)",
        f"Per minute: {_num(rate['sent'])} requests sent "
        f"({_span(rate['sending_span_s'], schedule, 'the last send')}); "
        f"{_num(rate['ok_requests'])} answered OK, "
        f"{_num(rate['prompt_tokens'])} context and {_num(rate['completion_tokens'])} "
        f"generated tokens ({_span(rate['answer_span_s'], schedule, 'the end of the run')})",
        f"Sent attempts per request that was sent (what the server saw): "
        f"{_num(llm['sent_attempts_per_sent_request'], '.2f')}",
    ]
    util = llm["utilisation_pct"]
    if util is not None:
        figures = ", ".join(f"{k} {_num(util[k], '.1f')} %" for k in ("mean", "p50", "p95", "max"))
        lines.append(f"Utilisation header of {util['count']} attempts: {figures}")
    waits = llm.get("retry_after_s")
    if waits is not None:
        figures = ", ".join(f"{k} {_num(waits[k], '.3f')} s" for k in ("mean", "p50", "p95", "max"))
        lines.append(f"Retry-After waits asked for by {waits['count']} refusals: {figures}")
    return lines


def _span(span_s: float, schedule_s: float, until: str) -> str:
    """``over the 60.00 s schedule`` or ``over the 45.00 s from the start to the last send``:
    each rate's span is from the start to ``until``, or the schedule when longer."""
    if span_s == schedule_s:
        return f"over the {span_s:.2f} s schedule"
    return f"over the {span_s:.2f} s from the start to {until}"


def _num(value: object, spec: str = ".1f") -> str:
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return "-"
    return format(value, spec)


def _llm_window_header() -> list[str]:
    return [
        "t (s)",
        "rpm",
        "max in flight",
        "answered",
        "failed",
        "throttled (ended)",
        "throttled (attempts)",
        "ttft avg (sent)",
        "ttft p95 (sent)",
        "e2e avg (sched)",
        "e2e p95 (sched)",
        "ctx tokens",
        "gen tokens",
    ]


def _llm_window_rows(windows: list[Mapping[str, Any]]) -> list[list[str]]:
    return [
        [
            f"{w['start']:g}",
            _num(w["rpm"]),
            str(w["max_in_flight"]),
            str(w["completed"]),
            str(w["failed"]),
            str(w["throttled"]),
            str(w["throttled_attempts"]),
            _ms(w["ttft_sent_s"].get("mean")),
            _ms(w["ttft_sent_s"].get("p95")),
            _ms(w["e2e_scheduled_s"].get("mean")),
            _ms(w["e2e_scheduled_s"].get("p95")),
            str(w["prompt_tokens"]),
            str(w["completion_tokens"]),
        ]
        for w in windows
    ]


def _aligned(header: list[str], rows: list[list[str]], *, labels: int) -> list[str]:
    """A plain-text table: the first ``labels`` columns (row names, clocks) left-aligned,
    the figures after them right-aligned; columns two spaces apart."""
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    out = []
    for row in table:
        cells = [
            cell.ljust(widths[i]) if i < labels else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def _items(lines: list[str]) -> list[str]:
    """``lines`` as a Markdown list: single newlines would join them into one paragraph."""
    return [f"- {line}" for line in lines]


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _unserialisable(value: object) -> object:
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
