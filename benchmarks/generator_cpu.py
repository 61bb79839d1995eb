"""How much CPU the open model's generator uses per request, at rates far below its capacity.

Usage: ``.venv/bin/python benchmarks/generator_cpu.py [--rates 100,1000,4000] [--hold 5]
[--delay fixed:1ms] [--repeat 1] [--no-pin] [--early-us N [--poll-share F]]``

One echo server process (CPU 0) and, for each rate, a fresh open-model attack from this
process (CPU 1; the public API, uvloop, default plan) for ``--hold`` seconds. Each line is
the generator's user and system CPU seconds over the attack (``getrusage``, this process
only: the server's work is not in it), the share of one core that is, the CPU per request,
and the p99 dispatch delay (sent minus scheduled): what waking up less precisely would
cost. A generator that polls for each arrival's instant burns a core whatever the rate; one
that sleeps to it spends about the same CPU on each request at every rate.
A measurement, not a test: the machine's other work shows in it.
"""

from __future__ import annotations

import argparse
import resource

from _early_wake import wake_early
from accuracy import cpu_pair, pin_generator, pin_server

from pyattacker.attack import AttackPlan, OpenModel, run_attack
from pyattacker.servers import EchoServerProcess


def usage() -> tuple[float, float]:
    got = resource.getrusage(resource.RUSAGE_SELF)
    return got.ru_utime, got.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,1000,4000", help="arrivals per second")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds per rate")
    parser.add_argument("--delay", default="fixed:1ms", help="the echo server's delay")
    parser.add_argument("--repeat", type=int, default=1, help="runs per rate")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to CPUs")
    parser.add_argument("--early-us", type=float, help="wake (at most) N us early, poll the rest")
    parser.add_argument(
        "--poll-share", type=float, help="with --early-us: poll at most this share of a wait"
    )
    args = parser.parse_args()
    if args.early_us is not None:
        wake_early(args.early_us, args.poll_share)
    cpus = None if args.no_pin else cpu_pair()
    if cpus is not None:
        pin_generator(cpus)
    with EchoServerProcess(delay=args.delay) as server:
        if cpus is not None:
            pin_server(server.pid, cpus)
        for rate in [float(r) for r in args.rates.split(",")] * args.repeat:
            plan = AttackPlan.build([server.url + "/"], OpenModel(rate=rate), duration=args.hold)
            user, system = usage()
            result = run_attack(plan, stop_on_signals=False)
            user, system = usage()[0] - user, usage()[1] - system
            total = result.total
            requests = max(total.requests, 1)
            print(
                f"{rate:8,.0f}/s  requests {total.requests:7,}  user {user:6.2f} s  "
                f"sys {system:5.2f} s  = {(user + system) / args.hold:5.0%} of a core  "
                f"{(user + system) / requests * 1e6:7.1f} us/req  "
                f"dispatch p50/p95/p99 {total.dispatch_delay.percentile(50) * 1e3:.3f} "
                f"{total.dispatch_delay.percentile(95) * 1e3:.3f} "
                f"{total.dispatch_delay.percentile(99) * 1e3:.3f} ms  "
                f"late {result.late}",
                flush=True,
            )


if __name__ == "__main__":
    main()
