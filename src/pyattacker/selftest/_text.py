"""The selftest's words: one text block per part, and the JSON document."""

from __future__ import annotations

from typing import Any

from pyattacker.selftest._accuracy import AccuracyCheck
from pyattacker.selftest._scale import ScaleCheck

__all__ = [
    "busy_note",
    "render_accuracy",
    "render_machine",
    "render_scale",
    "selftest_document",
]


def render_machine(machine: dict[str, Any]) -> str:
    """``machine: 2 CPUs (2 usable), CPython 3.11.7, Linux 6.1 x86_64, uvloop 0.21.0``."""
    usable = machine.get("cpus_usable")
    cpus = f"{machine['cpus']} CPUs" + (f" ({usable} usable)" if usable is not None else "")
    load = machine.get("load_average")
    return (
        f"machine: {cpus}, {machine['python']}, {machine['system']} {machine['machine']}, "
        f"{machine['loop']}" + (f"; load average {load[0]:.2f}" if load else "")
    )


def busy_note(machine: dict[str, Any]) -> str | None:
    """A warning when the 1-minute load average had reached the usable CPU count: other
    work was waiting for a CPU, and it shows in every figure as latency and lag."""
    load = machine.get("load_average")
    cpus = machine.get("cpus_usable") or machine.get("cpus")
    if not load or not cpus or load[0] < cpus:
        return None
    return (
        f"note: the load average ({load[0]:.1f}) had reached the CPU count ({cpus}) when "
        "the check started: other work on this machine was waiting for a CPU, and it shows "
        "in these figures; run the selftest again on an idle machine"
    )


#: Other processes' CPUs above which a failed check says they may be why.
BUSY_OTHERS_CPUS = 0.1


def others_lines(others_cpus: float | None, passed: bool) -> list[str]:
    """What other processes took while a check ran, and on a failure with them busy, that
    the failure may be theirs (see ``selftest/_neighbours.py``)."""
    if others_cpus is None:
        return []
    lines = [f"  other processes: {others_cpus:.2f} CPUs busy on average while it ran"]
    if not passed and others_cpus >= BUSY_OTHERS_CPUS:
        lines.append(
            "    note: other work held this machine's CPUs during the check, and a CPU it "
            "holds when our loop or the echo server wants one shows as lag and latency: "
            "the failure may be the machine's; run the selftest again when it is idle"
        )
    return lines


def _from(workers: int, server_processes: int) -> str:
    """``, from 2 workers`` (and the server's processes past one); nothing for the
    default, one process against one server process."""
    said = "" if workers == 1 else f", from {workers} workers"
    if server_processes > 1:
        said += f", echo server of {server_processes} processes"
    return said


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def render_accuracy(check: AccuracyCheck) -> str:
    """The accuracy part: settings, one line per clock and percentile, counts, verdict."""
    lines = [
        f"accuracy: echo server {check.delay}, {check.rate:g}/s for {check.duration:g} s "
        f"(open model{_from(check.workers, check.server_processes)}); "
        f"rule |ours - truth| <= {check.rule}",
        f"  {'clock':<10} {'pct':<4} {'ours ms':>9} {'truth ms':>9} {'error ms':>9} "
        f"{'error %':>8} {'allowed ms':>10}",
    ]
    for f in check.figures:
        share = f.error / f.truth * 100 if f.truth else 0.0
        lines.append(
            f"  {f.clock:<10} {f.quantile:<4} {f.ours * 1e3:>9.3f} {f.truth * 1e3:>9.3f} "
            f"{f.error * 1e3:>+9.3f} {share:>+7.2f}% {f.tolerance * 1e3:>10.3f}"
            + ("" if f.passed else "  FAIL")
        )
    lines.append(
        f"  requests: ours {check.requests:,}, server {check.server_count:,}; "
        f"dropped {check.dropped}, not ok {check.not_ok - check.dropped}"
    )
    lines.append(f"  accuracy: {_verdict(check.passed)}")
    lines.extend(f"    - {problem}" for problem in check.problems())
    lines.extend(others_lines(check.others_cpus, check.passed))
    return "\n".join(lines)


def render_scale(check: ScaleCheck) -> str:
    """The scale part: one line per level climbed, the highest clean rate, verdict."""
    lines = [
        f"scale: echo server {check.delay}, {check.hold:g} s per level, open model"
        f"{_from(check.workers, check.server_processes)}, "
        "clean = nothing dropped, rate within 2 %, < 0.1 % not ok, p99 lag < 10 ms"
    ]
    for level in check.levels:
        state = "clean" if level.clean else "NOT clean: " + "; ".join(level.problems)
        cpu = level.cpu_per_request
        lines.append(
            f"  {level.rate:>9,.0f}/s  achieved {level.achieved_rate:>10,.1f}/s  "
            f"lag p99 {level.lag_p99 * 1e3:7.3f} ms  latency p99 {level.latency_p99 * 1e3:7.3f} ms"
            + ("" if cpu is None else f"  CPU {cpu * 1e6:6.1f} us/req")
            + f"  {state}"
        )
    if check.every_level_clean:
        # The climb stopped because the levels ran out, not at a level that failed.
        lines.append(
            f"  clean at every level tried, up to {check.highest_clean:,.0f} req/s; "
            "the ceiling may be higher: add higher --levels"
        )
    else:
        lines.append(f"  highest clean rate: {check.highest_clean:,.0f} req/s")
    lines.append(
        f"  scale: {_verdict(check.passed)}"
        + ("" if check.passed else " (the first level was not clean)")
    )
    lines.extend(others_lines(check.others_cpus, check.passed))
    return "\n".join(lines)


def selftest_document(
    machine: dict[str, Any], accuracy: AccuracyCheck | None, scale: ScaleCheck | None
) -> dict[str, Any]:
    """The ``--json`` document: the machine, each part run (``null`` when not), ``passed``."""
    parts = [part for part in (accuracy, scale) if part is not None]
    return {
        "machine": machine,
        "accuracy": None if accuracy is None else accuracy.to_dict(),
        "scale": None if scale is None else scale.to_dict(),
        "passed": all(part.passed for part in parts),
    }
