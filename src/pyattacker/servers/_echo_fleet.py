"""The echo server as N processes behind one port: ``/stats``, ``/reset`` and ``/stall`` of
the whole (``echo-server --processes N``; the supervisor is :mod:`._fleet`).

Each member is a whole :class:`EchoServer` with its own random stream
(``f"{seed}:{lane}:{lanes}"``: no two members draw the same delays). A control request
lands on whichever member the kernel gave the connection to; that member asks every
sibling over its private Unix socket (``?part=1``) for its raw hold times, status counts,
drops and requests in flight, or passes ``/reset`` and ``/stall`` on, and answers for all.

**Exact merge** (:func:`merge_echo_parts`): counts are sums and the distribution is
computed from the union of every member's hold times, so ``count``, ``min``, ``max`` and
every nearest-rank percentile are what one process would report for the same requests.
``samples`` are every member's hold times, member by member (each in the order its
requests finished; hold times carry no clock reading to order them across members).
The reply is written once the siblings answered; the member's loop goes on serving
meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode

from pyattacker.servers._fleet import (
    Asking,
    Member,
    member_path,
    pack,
    run_member,
    serve_fleet,
    unpack,
)
from pyattacker.servers._llm_values import Values
from pyattacker.servers.echo import EchoServer

__all__ = ["merge_echo_parts", "serve_echo_fleet"]

_CONTROL = {(b"GET", b"/stats"), (b"GET", b"/reset"), (b"POST", b"/reset"), (b"POST", b"/stall")}
Reply = tuple[int, bytes]


def serve_echo_fleet(
    make: Callable[[int], EchoServer],
    processes: int,
    *,
    host: str,
    port: int,
    announce: Callable[[str], None],
) -> None:
    """Run ``processes`` echo servers behind ``host:port`` (``SO_REUSEPORT``; Linux) until
    SIGINT or SIGTERM; ``make(port)`` builds one, ``announce(url)`` runs once all listen.
    ``ConfigError`` when one refused the address or this system cannot share a port;
    ``PyAttackerError`` when one died."""

    def member(lane: int, lanes: int, directory: str, bound: int, ready: Any) -> None:
        server = make(bound)
        control = _EchoFleetControl(server, lane, lanes, directory)
        server._core.control = control.control
        server._core.rng = random.Random(f"{server.seed}:{lane}:{lanes}")
        run_member(server, member_path(directory, lane), ready)

    run: Member = member
    serve_fleet(run, processes, host, port, announce)


class _EchoFleetControl:
    """The control paths of one member: its own part, or the whole fleet's answer."""

    def __init__(self, server: EchoServer, lane: int, lanes: int, directory: str) -> None:
        self.server, self.lane, self.lanes = server, lane, lanes
        self.siblings = [member_path(directory, i) for i in range(lanes) if i != lane]

    def control(
        self, method: bytes, path: bytes, query: bytes
    ) -> Reply | asyncio.Future[Reply] | None:
        if (method, path) not in _CONTROL:
            return None
        params = parse_qs(query.decode("latin-1"))
        wanted = params.get("samples", ["0"])[-1].lower() in ("1", "true", "yes")
        if path == b"/stats":
            if "part" in params:
                return 200, _json(echo_part(self.server, samples=wanted, lane=self.lane))
            mine = echo_part(self.server, samples=wanted, lane=self.lane)
            target = "/stats?part=1" + ("&samples=1" if wanted else "")
            return self._later("GET", target, lambda theirs: self._stats(mine, theirs))
        local = self.server._control(method, path, query)  # checks /stall's seconds
        if "part" in params or local is None or local[0] != 200:
            return local
        forwarded = {key: values[-1] for key, values in params.items()}
        target = path.decode() + "?" + urlencode({**forwarded, "part": "1"})
        mine_body = json.loads(local[1])
        return self._later(method.decode(), target, lambda theirs: _passed_on(mine_body, theirs))

    def _stats(self, mine: dict[str, Any], theirs: list[dict[str, Any]]) -> Reply:
        result = merge_echo_parts([mine, *theirs])
        result["delay"] = self.server.delay.describe()
        result["seed"] = self.server.seed
        result["processes"] = self.lanes
        return 200, _json(result)

    def _later(
        self, method: str, target: str, finish: Callable[[list[dict[str, Any]]], Reply]
    ) -> asyncio.Future[Reply]:
        """A future of ``finish(every sibling's answer)``, set on this loop."""
        loop = self.server._core.loop
        future: asyncio.Future[Reply] = loop.create_future()

        def settle(asking: Asking) -> None:
            if future.done():
                return
            try:
                future.set_result(finish(asking.answers()))
            except Exception as exc:
                future.set_result((500, _json({"error": str(exc)})))

        asking = Asking(self.siblings, method, target, {}, start=False)

        def wake() -> None:
            loop.call_soon_threadsafe(settle, asking)

        asking.on_done = wake
        asking.start()
        return future


def echo_part(server: EchoServer, *, samples: bool, lane: int = 0) -> dict[str, Any]:
    """This member's raw figures: hold times, failed statuses, drops, requests in flight."""
    core = server._core
    part: dict[str, Any] = {
        "lane": lane,
        "holds": pack(core.samples[:]),
        "failed": {str(status): count for status, count in core.statuses.items()},
        "dropped": core.dropped,
        "in_flight": sum(protocol.holding() for protocol in core.connections),
    }
    part["samples"] = samples
    return part


def merge_echo_parts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The echo ``/stats`` of the whole from every member's :func:`echo_part`: the exact
    distribution of the union of the hold times, statuses, drops and in-flight summed."""
    ordered = sorted(parts, key=lambda p: int(p.get("lane", 0)))
    holds = [unpack(part["holds"]) for part in ordered]
    values = Values()
    for one in holds:
        values.extend(one)
    result: dict[str, Any] = values.summary()
    count = result["count"]
    failed: dict[int, int] = {}
    for part in ordered:
        for status, n in part["failed"].items():
            failed[int(status)] = failed.get(int(status), 0) + n
    statuses = {200: count - sum(failed.values())} if count > sum(failed.values()) else {}
    statuses.update(failed)
    result["statuses"] = {str(status): statuses[status] for status in sorted(statuses)}
    result["dropped"] = sum(part["dropped"] for part in ordered)
    result["in_flight"] = sum(part["in_flight"] for part in ordered)
    result["count_by_process"] = [len(one) for one in holds]
    if all(part.get("samples") for part in ordered):
        result["samples"] = [value for one in holds for value in one.tolist()]
    return result


def _passed_on(mine: dict[str, Any], theirs: list[dict[str, Any]]) -> Reply:
    """``/reset`` (cleared: the total) or ``/stall`` (every member's answer alike)."""
    if "cleared" in mine:
        return 200, _json({"cleared": mine["cleared"] + sum(t["cleared"] for t in theirs)})
    return 200, _json(mine)


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
