"""What `attack --serve` costs the attack's loop: `/report.json`, `/progress.json`, `/metrics`.

docs/attack.md ("Watching an attack live") quotes these figures. An hour-long attack
(1 s windows) is made on virtual time against a simulated server, then each body is built
the way the live server builds it, and timed on this machine (wall time, median of
`--repeat` builds):

    python benchmarks/live_costs.py [--hours 1] [--rate 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from pyattacker.attack import AttackPlan, OpenModel, Progress, Target, attack
from pyattacker.clock import LoopClock
from pyattacker.measure import Attempt
from pyattacker.report import LiveServer
from pyattacker.testing import run_virtual


class Server:
    """Answers every request 200 after 20 ms."""

    async def send(self, target: Target, attempt: Attempt) -> None:
        clock = LoopClock()
        attempt.sent = clock.now()
        await clock.sleep(0.02)
        attempt.first_byte = attempt.end = clock.now()
        attempt.status = 200


def timed(build: Any, repeat: int) -> tuple[float, int]:
    """Median seconds of ``repeat`` builds, and the size of what one built."""
    seconds, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        body = build()
        seconds.append(time.perf_counter() - start)
        size = len(body)
    return statistics.median(seconds), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--rate", type=float, default=10.0, help="requests per second")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    duration = args.hours * 3600
    plan = AttackPlan.build(
        ["http://127.0.0.1:9/"], OpenModel(rate=args.rate), duration=duration, window=1.0
    )
    live = LiveServer()
    records: list[Any] = []
    result = run_virtual(attack(plan, sender=Server(), on_record=records.append))
    for record in records:
        live.metrics.add(record)
    # The progress history as the server keeps it: two snapshots a second, 20,000 at most.
    for i in range(int(duration * 2)):
        live.record_progress(Progress(
            elapsed=i / 2, planned=None, scheduled=i, sent=i, completed=i, in_flight=0,
            dropped=0, failed=0, throttled=0, latency_p50=0.02, latency_p99=0.02,
            service_p50=0.02, service_p99=0.02,
        ))  # fmt: skip
    live.finish(result)
    print(f"{len(result.windows):,} windows, {result.total.requests:,} requests, "
          f"{len(live.points):,} progress snapshots kept")  # fmt: skip

    def report() -> bytes:
        live._report_cache = None  # build it again each time
        return live.report_body()

    for name, build in (
        ("/report.json", report),
        ("/progress.json (whole history)", lambda: json.dumps(live.progress_json()).encode()),
        (
            "/progress.json (last second)",
            lambda: json.dumps(live.progress_json(duration - 1)).encode(),
        ),
        ("/metrics", lambda: live.metrics.exposition(in_flight=0).encode()),
    ):
        seconds, size = timed(build, args.repeat)
        print(f"{name:32} {seconds * 1000:9.2f} ms  {size / 1e6:7.2f} MB")


if __name__ == "__main__":
    main()
