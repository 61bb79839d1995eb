"""The mock LLM server as N processes behind one port: ``/stats`` and ``/reset`` of the whole.

Each member (:func:`serve_llm_member`) is a whole :class:`LlmServer` of its own (its
capacity, RPM/TPM buckets, storms and queue are its own: per process), numbering its dice
streams ``lane, lane + lanes, ...`` so no two members share one. A control request lands on
whichever member the kernel gave the connection to; that member then asks every sibling,
over its private Unix socket, for its raw part (``/stats?part=1``: counts, and every value
of the four distributions as little-endian doubles) or passes the reset on
(``/reset?part=1``), and answers for all of them.

**Exact merge.** Counts are sums; each distribution is rebuilt from the union of every
member's values (:func:`merge_parts`), so ``count``, ``min``, ``max`` and every
nearest-rank percentile are exactly what one process would report for the same requests
(``mean`` to a few units in the last place, as in one process). Samples are merged in the
order the records ended (one monotonic clock for the whole machine).

Asking costs: the siblings' values travel over the socket (8 bytes each, in base64), and
the answering member's loop turns without sleeping while it waits for them (its streams
keep their timing, at the price of CPU). Poll sparingly during a measurement.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs

from pyattacker.errors import ConfigError
from pyattacker.servers._fleet import (
    Asking,
    Member,
    member_path,
    pack,
    run_member,
    serve_fleet,
    unpack,
)
from pyattacker.servers._llm_core import Work
from pyattacker.servers._llm_values import Values
from pyattacker.servers._llm_wire import error_body
from pyattacker.servers._ranges import request_whole
from pyattacker.servers.llm import LlmServer

__all__ = ["merge_parts", "serve_llm_fleet", "serve_llm_member"]

_SUMMED = (
    "requests",
    "throttled",
    "prompt_tokens",
    "completion_tokens",
    "discarded_after_reset",
    "received",
    "in_flight",
    "queued",
    "pending",
    "before_reset",
)
_DISTRIBUTIONS = ("ttft", "e2e", "itl", "tpot")


def serve_llm_member(server: LlmServer, lane: int, lanes: int, directory: str, ready: Any) -> None:
    """Run ``server`` as member ``lane`` of ``lanes`` (see the module docstring)."""
    core = server._core
    core.lane, core.lanes = lane, lanes
    core.control = _FleetControl(server, lane, lanes, directory).control
    run_member(server, member_path(directory, lane), ready)


def serve_llm_fleet(
    make: Callable[[int], LlmServer],
    processes: int,
    *,
    host: str,
    port: int,
    announce: Callable[[str], None],
) -> None:
    """Run ``processes`` mock LLM servers behind ``host:port`` (``SO_REUSEPORT``; Linux)
    until SIGINT or SIGTERM; ``make(port)`` builds one (on that port), ``announce(url)``
    runs once all of them listen. ``ConfigError`` when one refused its settings or the
    address, or this system cannot share a port; ``PyAttackerError`` when one died."""

    def member(lane: int, lanes: int, directory: str, bound: int, ready: Any) -> None:
        serve_llm_member(make(bound), lane, lanes, directory, ready)

    run: Member = member
    serve_fleet(run, processes, host, port, announce)


class _FleetControl:
    """The control paths of one member: its own part, or the whole fleet's answer."""

    def __init__(self, server: LlmServer, lane: int, lanes: int, directory: str) -> None:
        self.server, self.lane, self.lanes = server, lane, lanes
        self.siblings = [member_path(directory, i) for i in range(lanes) if i != lane]
        keys = server.settings.api_keys
        self.headers = {"Authorization": f"Bearer {keys[0]}"} if keys else {}

    def control(self, path: bytes, query: bytes) -> Work:
        params = parse_qs(query.decode("latin-1"))
        samples = params.get("samples", ["0"])[-1].lower() in ("1", "true", "yes")
        if "part" in params:
            return _now(self._part_reply(path, samples))
        if path == b"/reset":
            return self._reset_all()
        try:
            offset = _whole(params, "offset") or 0
            limit = _whole(params, "limit")
        except ConfigError as exc:
            return _now(error_body(str(exc), "invalid_request_error", param=exc.field), 400)
        return self._stats_all(samples, offset, limit)

    def _part_reply(self, path: bytes, samples: bool) -> bytes:
        if path == b"/reset":
            return _json({"cleared": self.server.reset()})
        return _json(own_part(self.server, samples=samples, lane=self.lane))

    def _reset_all(self) -> Work:
        cleared = self.server.reset()
        parts = yield from self._ask("POST", "/reset?part=1")
        return 200, [_json({"cleared": cleared + sum(p["cleared"] for p in parts)})]

    def _stats_all(self, samples: bool, offset: int, limit: int | None) -> Work:
        mine = own_part(self.server, samples=samples, lane=self.lane)
        theirs = yield from self._ask("GET", "/stats?part=1" + ("&samples=1" if samples else ""))
        result = yield from merge_steps([mine, *theirs])
        result["settings"] = self.server.settings.describe()
        result["processes"] = self.lanes
        if samples:
            stop = None if limit is None else offset + limit
            result["samples"] = result["samples"][offset:stop]
        return 200, [_json(result)]

    def _ask(self, method: str, target: str) -> Generator[None, None, list[dict[str, Any]]]:
        """Every sibling's JSON answer to ``method target``, fetched by a thread while the
        loop keeps turning."""
        thread = Asking(self.siblings, method, target, self.headers)
        while not thread.done():
            yield
        return thread.answers()


def own_part(server: LlmServer, *, samples: bool, lane: int = 0) -> dict[str, Any]:
    """This member's raw figures: counts, every distribution's values, records if asked."""
    core = server._core
    ledger = core.ledger
    part = ledger.counts()
    tally = core.tally()
    part["received"] = core.epoch.received
    part["in_flight"], part["queued"] = tally.in_flight, tally.queued
    part["pending"], part["before_reset"] = tally.pending, tally.earlier
    part["lane"] = lane
    part["values"] = {name: pack(v.data()) for name, v in ledger.distributions().items()}
    if samples:
        part["samples"] = [record.as_dict() for record in ledger.records]
    return part


def merge_steps(parts: list[dict[str, Any]]) -> Generator[None, None, dict[str, Any]]:
    """:func:`merge_parts` in bounded steps (a turn of the loop between them)."""
    result: dict[str, Any] = {key: sum(p[key] for p in parts) for key in _SUMMED}
    result["statuses"] = _summed((p["statuses"] for p in parts), key=int)
    result["outcomes"] = _summed((p["outcomes"] for p in parts), key=str)
    for name in _DISTRIBUTIONS:
        values = Values()
        for part in parts:
            values.extend(unpack(part["values"][name]))
        yield from values.steps()
        result[name] = values.summary()
    # how the kernel spread the requests: completion requests received, by process
    ordered = sorted(parts, key=lambda p: int(p.get("lane", 0)))
    result["received_by_process"] = [p["received"] for p in ordered]
    if all("samples" in p for p in parts):
        result["samples"] = list(heapq.merge(*(p["samples"] for p in parts), key=_ended))
    return result


def merge_parts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``/stats`` of the whole from every member's raw part (:func:`own_part`): counts
    summed, distributions over the union of the values (exact), samples by end time."""
    steps = merge_steps(parts)
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            merged: dict[str, Any] = stop.value
            return merged


def _summed(counts: Iterable[Mapping[str, int]], key: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in counts:
        for name, count in one.items():
            total[name] = total.get(name, 0) + count
    return {name: total[name] for name in sorted(total, key=key)}


def _ended(sample: Mapping[str, Any]) -> float:
    end = sample["end"]
    return float(sample["received"] if end is None else end)


def _now(body: bytes, status: int = 200) -> Work:
    yield from ()
    return status, [body]


def _whole(params: dict[str, list[str]], name: str) -> int | None:
    return None if name not in params else request_whole(params[name][-1], name)


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
