"""An attack against servers that break HTTP on purpose, one script per misbehaviour.

Each case runs a short attack (the library's ``attack()``, in-process, on a loopback port
the OS picks) and checks what a hardened client promises whatever the server does: the
attack ends (within its duration plus the request timeout; a generous bound only catches a
hang), every scheduled request is counted under a named error class (never ``invalid`` or
``unknown``, the classes of our own bugs), nothing reaches the loop's exception handler
(no traceback on stderr), and what the client keeps of a body is bounded however much the
server sends.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from http_helpers import Peer, Server
from pyattacker.attack import AttackPlan, AttackResult, OpenModel, attack
from pyattacker.http import Timeouts
from pyattacker.measure import RequestRecord

MiB = 1024 * 1024
DURATION, RATE = 0.5, 10.0
SHORT = Timeouts(total=1.0)


@dataclass
class Outcome:
    result: AttackResult
    records: list[RequestRecord]
    loop_errors: list[dict[str, Any]] = field(default_factory=list)

    def classes(self) -> set[str | None]:
        return {record.attempts[-1].error_class for record in self.records}


def _attack(handler: Callable[[Peer], Awaitable[None]], timeouts: Timeouts = SHORT) -> Outcome:
    async def main() -> Outcome:
        loop = asyncio.get_running_loop()
        loop_errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: loop_errors.append(context))
        records: list[RequestRecord] = []
        async with Server(handler) as server:
            plan = AttackPlan.build(
                [server.url], OpenModel(rate=RATE), duration=DURATION, timeouts=timeouts
            )
            limit = DURATION + (timeouts.total or timeouts.read or 0) + 10  # a hang, not a time
            result = await asyncio.wait_for(attack(plan, on_record=records.append), limit)
        return Outcome(result, records, loop_errors)

    outcome = asyncio.run(main())
    result = outcome.result
    assert result.stop_reason is None
    assert len(outcome.records) == result.scheduled == result.total.requests > 0
    assert not outcome.loop_errors
    assert not outcome.classes() & {"invalid", "unknown"}
    for record in outcome.records:
        error = record.attempts[-1].error or ""
        assert "AssertionError" not in error
        assert "Traceback" not in error
    return outcome


async def _garbage(peer: Peer) -> None:
    while await peer.read_request() is not None:
        await peer.send(b"\x00\xffSSH-2.0-not-http\r\n\r\n")


async def _reset_mid_body(peer: Peer) -> None:
    await peer.read_request()
    await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
    sock = peer.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.writer.transport.abort()  # with linger 0: a reset, not a close


async def _endless_head(peer: Peer) -> None:
    await peer.read_request()
    await peer.send(b"HTTP/1.1 200 OK\r\n")
    while True:
        await peer.send(b"X-More: " + b"h" * 1000 + b"\r\n")


async def _short_body_then_close(peer: Peer) -> None:
    await peer.read_request()
    await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
    peer.close()


async def _extra_bytes(peer: Peer) -> None:
    while await peer.read_request() is not None:
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA BYTES")


async def _http10_until_close(peer: Peer) -> None:
    await peer.read_request()
    await peer.send(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"z" * 10_000)
    peer.close()


async def _continue_then_nothing(peer: Peer) -> None:
    await peer.read_request()
    await peer.send(b"HTTP/1.1 100 Continue\r\n\r\n")
    await asyncio.Event().wait()


async def _never_responds(peer: Peer) -> None:
    await peer.read_request()
    await asyncio.Event().wait()


async def _drip_feed(peer: Peer) -> None:
    await peer.read_request()
    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
        await peer.send(bytes([byte]))
        await asyncio.sleep(0.2)  # the server's pace, not the client's clock


@pytest.mark.parametrize(
    ("handler", "classes"),
    [
        (_garbage, {"upstream"}),
        (_reset_mid_body, {"upstream"}),
        (_endless_head, {"protocol"}),
        (_short_body_then_close, {"upstream"}),
        (_extra_bytes, {None}),  # each answer stands; its connection is not used again
        (_http10_until_close, {None}),
        (_continue_then_nothing, {"timeout"}),
        (_never_responds, {"timeout"}),
        (_drip_feed, {"timeout"}),  # a byte every 0.2 s: only the total timeout ends it
    ],
    ids=lambda value: getattr(value, "__name__", "")[1:] or None,
)
def test_an_attack_on_a_hostile_server_ends_and_counts_every_request_by_a_named_class(
    handler: Callable[[Peer], Awaitable[None]], classes: set[str | None]
) -> None:
    outcome = _attack(handler)
    assert outcome.classes() == classes


def test_extra_bytes_on_keep_alive_connections_never_fail_a_later_request() -> None:
    outcome = _attack(_extra_bytes)
    assert outcome.result.total.by_outcome == {"ok": outcome.result.scheduled}
    assert {record.attempts[-1].bytes_received for record in outcome.records} == {2}


def test_an_endless_chunked_body_is_counted_and_not_kept() -> None:
    sent = [0]

    async def endless_chunks(peer: Peer) -> None:  # 16 MiB of body, then silence
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"e" * 64 * 1024)
        for _ in range(256):
            await peer.send(chunk)
            sent[0] += len(chunk)
        await asyncio.Event().wait()

    tracemalloc.start()
    try:
        outcome = _attack(endless_chunks, Timeouts(read=0.5, total=60))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.classes() == {"timeout"}  # the read timeout, once the server fell silent
    assert sent[0] >= outcome.result.scheduled * 16 * MiB
    assert peak < 16 * MiB  # the bodies were read, not kept


def test_long_bodies_are_counted_whole_and_kept_to_a_prefix() -> None:
    body = b"f" * (4 * MiB)
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def long_answers(peer: Peer) -> None:  # sends without a copy of its own
        while await peer.read_request() is not None:
            await peer.send(answer)

    tracemalloc.start()
    try:
        outcome = _attack(long_answers, Timeouts(total=60))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert {record.attempts[-1].bytes_received for record in outcome.records} == {len(body)}
    assert peak < len(body) * 3 // 2  # the server's send buffer and reads, not the bodies
