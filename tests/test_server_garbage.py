"""Our servers leave no cyclic garbage behind a closed connection.

A closed connection that stays in a reference cycle is freed only by a full collection,
and a full collection pauses the server while it holds other clients' answers: the pause
shows in every hold time it catches. ``gc.DEBUG_SAVEALL`` keeps what a collection finds
in ``gc.garbage``, so the test sees exactly what only the collector could free.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator

import pytest

from llm_server_helpers import chat, exchange, pinned, post, until
from pyattacker.servers import EchoServer, LlmServer
from pyattacker.servers._guard import Guarded

GET = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n"


@pytest.fixture
def garbage_kept() -> Iterator[Callable[[], list[object]]]:
    """``collect()``: a full collection's finds (nothing is freed while the test runs)."""
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)

    def collect() -> list[object]:
        gc.collect()
        return list(gc.garbage)

    try:
        yield collect
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        gc.collect()


def protocols(objects: list[object]) -> list[object]:
    return [thing for thing in objects if isinstance(thing, Guarded)]


def test_a_closed_echo_connection_is_freed_without_the_collector(
    garbage_kept: Callable[[], list[object]],
) -> None:
    async def main() -> None:
        async with EchoServer() as server:
            for _ in range(3):
                replies = await exchange(server.url, GET, GET)
                assert [reply.status for reply in replies] == [200, 200]
            await until(lambda: not list(server._open()))

    asyncio.run(main())
    assert protocols(garbage_kept()) == []


def test_a_closed_llm_connection_is_freed_without_the_collector(
    garbage_kept: Callable[[], list[object]],
) -> None:
    async def main() -> None:
        async with LlmServer(models="m") as server:
            for _ in range(3):
                reply = await post(server.url, "/v1/chat/completions", chat("hi"), **pinned())
                assert reply.status == 200
            await until(lambda: not list(server._open()))

    asyncio.run(main())
    assert protocols(garbage_kept()) == []
