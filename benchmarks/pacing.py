"""Pacing against a metered server: 429s with and without a key's declared rpm.

Usage: ``.venv/bin/python benchmarks/pacing.py [--rpm 1200] [--items 1500] [--no-unpaced]``

Starts the mock LLM server (``pyattacker.servers.LlmServer``, on a loopback port the OS
picks) with ``--rpm`` as its limit, then runs ``--items`` one-step pipelines through a
Runner whose task calls the server with a user-built ``openai.AsyncOpenAI`` (the SDK's
default retries, which the pool turns off) and retries 429s with the exponential preset.
Once with the resource declaring the server's rpm (paced), once without (unpaced). Prints,
for each: the server's request count and 429s, how the pipelines ended, and the wall time.
The paced run should see no 429; it takes about ``items / rpm`` minutes (the server's
bucket starts full, the pacer does not spend it in a burst).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import openai

from pyattacker.clock import wall_time
from pyattacker.pool import Pool, Resource, TaskContext
from pyattacker.run import Runner, pipeline, task
from pyattacker.servers import LlmServer


@task(resource="llm", retry="exponential")
async def ask(n: int, ctx: TaskContext) -> int:
    async with ctx.acquire() as lease:
        raw = await lease.client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": f"question {n}"}], max_tokens=3
        )
        lease.report(ok=True, headers=raw.headers)
        return n


async def one(server: LlmServer, items: int, rpm: int | None) -> dict[str, Any]:
    server.reset()
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-bench")
    limits = {} if rpm is None else {"rpm": rpm}
    key = Resource.create("openai", id="key-1", capacity=32, factory=lambda r: client, **limits)
    pool = Pool("llm", [key])
    start = wall_time()
    with Runner(":memory:", pools=[pool], concurrency=32, handle_signals=False) as runner:
        report = await runner.run_async(pipeline("bench", ask).map(range(items)))
    elapsed = wall_time() - start
    await client.close()
    stats = server.stats()
    return {
        "requests": stats["requests"],
        "429": stats["statuses"].get("429", 0),
        "by_state": report.by_state,
        "seconds": round(elapsed, 1),
    }


async def main(rpm: int, items: int, unpaced: bool) -> None:
    async with LlmServer(models="m", rpm=rpm, ttft="fixed:5ms", itl="fixed:1ms") as server:
        print(f"server {server.url} --rpm {rpm}; {items} items, concurrency 32")
        print("paced  ", await one(server, items, rpm))
        if unpaced:
            print("unpaced", await one(server, items, None))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--items", type=int, default=1500)
    parser.add_argument("--no-unpaced", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(args.rpm, args.items, not args.no_unpaced))
