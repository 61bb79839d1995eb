"""``pyattacker selftest``: the quick accuracy and clean-rate checks of this machine."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pyattacker._atomic import check_output, write_atomically
from pyattacker._units import DURATION_HINT, parse_duration, parse_rate
from pyattacker.attack import usable_cores
from pyattacker.cli._attack_workers import AUTO, WORKERS
from pyattacker.errors import ConfigError
from pyattacker.selftest import (
    LEVELS,
    Setup,
    busy_note,
    check_accuracy_settings,
    check_scale_settings,
    check_setup,
    machine,
    render_accuracy,
    render_machine,
    render_scale,
    run_accuracy,
    run_scale,
    selftest_document,
)

__all__ = ["selftest_command"]


@click.command(
    "selftest",
    short_help="Check this machine: accuracy and the highest clean rate.",
)
@click.argument("part", required=False, type=click.Choice(["accuracy", "scale"]))
@click.option(
    "--rate",
    default="200/s",
    show_default=True,
    metavar="RATE",
    help="accuracy: arrivals per second.",
)
@click.option(
    "--duration",
    default="3s",
    show_default=True,
    metavar="DURATION",
    help="accuracy: how long the attack lasts.",
)
@click.option(
    "--delay",
    default="fixed:20ms",
    show_default=True,
    metavar="SPEC",
    help="accuracy: the echo server's delay (as echo-server --delay).",
)
@click.option(
    "--levels",
    default=",".join(f"{rate:g}" for rate in LEVELS),
    show_default=True,
    metavar="RATES",
    help="scale: rates (req/s) separated by commas, climbed in rising order.",
)
@click.option(
    "--hold",
    default="1s",
    show_default=True,
    metavar="DURATION",
    help="scale: how long each level lasts.",
)
@click.option(
    "--workers",
    type=WORKERS,
    default="1",
    show_default=True,
    metavar="N|auto",
    help="Attack from N worker processes, as attack --workers N (auto: one per usable "
    "core); each level's CPU per request then counts every worker's.",
)
@click.option(
    "--server-processes",
    type=int,
    default=1,
    show_default=True,
    metavar="N",
    help="Run the echo server as N processes behind its one port (as echo-server "
    "--processes N), so that it is not the limit. Workers and server processes together "
    "should not outnumber the cores.",
)
@click.option(
    "--json",
    "json_path",
    metavar="PATH",
    help="Also write the results as JSON to PATH ('-': stdout, and the text to stderr).",
)
def selftest_command(
    part: str | None,
    rate: str,
    duration: str,
    delay: str,
    levels: str,
    hold: str,
    workers: int,
    server_processes: int,
    json_path: str | None,
) -> int:
    """Check this machine: how accurate pyattacker's figures are here, and the highest
    open-model rate one process keeps cleanly. PART is accuracy or scale (default: both).

    Each part starts pyattacker's echo server in its own process on 127.0.0.1 and attacks
    it from this one; nothing leaves the machine. accuracy: an open-model attack at a
    fixed delay; our p50/p90/p99 on both clocks (from the scheduled time and from the
    send) are judged against the server's exact hold times under max(1 %, 0.5 ms), and
    our request count against the server's. scale: short levels at rising rates, up to
    the first that is not clean (something dropped, rate off plan by over 2 %, 0.1 % not
    OK, or p99 scheduling lag of 10 ms or more). The output names the CPU count, Python
    and event loop, so figures from different machines compare. Run it on an otherwise
    idle machine: other work shows up as lag.

    With --workers N, each attack runs on N worker processes, as attack --workers N does
    (its schedule shared, its figures merged), and each scale level also gives the CPU
    per request of all of them: run scale with and without workers to see how far the
    clean rate rises with cores, and what the split costs per request.

    \b
    Exit codes: 0 every check passed, 1 a check failed, 2 bad input.

    \b
    Examples:
      pyattacker selftest
      pyattacker selftest accuracy --rate 500/s --duration 5s
      pyattacker selftest scale --levels 1000,5000,20000 --hold 2s --json -
      pyattacker selftest scale --workers 4 --server-processes 4   # 8 cores
    """
    accuracy_settings = (
        parse_rate(rate, field="--rate"),
        _duration(duration, "--duration"),
        delay,
    )
    climb, held = _levels(levels), _duration(hold, "--hold")
    setup = Setup(usable_cores() if workers == AUTO else workers, server_processes)
    check_accuracy_settings(*accuracy_settings)
    check_scale_settings(climb, held)
    check_setup(setup)
    if json_path not in (None, "-"):
        check_output(Path(json_path), "--json")
    to_stderr = json_path == "-"  # stdout carries the JSON alone
    about = machine()
    click.echo(render_machine(about), err=to_stderr)
    accuracy = scale = None
    if part in (None, "accuracy"):
        accuracy = run_accuracy(
            rate=accuracy_settings[0], duration=accuracy_settings[1], delay=delay, setup=setup
        )
        click.echo(render_accuracy(accuracy), err=to_stderr)
    if part in (None, "scale"):
        scale = run_scale(climb, hold=held, setup=setup)
        click.echo(render_scale(scale), err=to_stderr)
    document = selftest_document(about, accuracy, scale)
    click.echo("selftest: " + ("PASS" if document["passed"] else "FAIL"), err=to_stderr)
    note = busy_note(about)
    if note is not None:
        click.echo(note, err=to_stderr)
    if json_path is not None:
        _write_json(json_path, document)
    return 0 if document["passed"] else 1


def _write_json(path: str, document: dict[str, object]) -> None:
    text = json.dumps(document, indent=2, allow_nan=False) + "\n"
    if path == "-":
        click.echo(text, nl=False)
    else:
        write_atomically(Path(path), lambda temporary: temporary.write_text(text))


def _levels(text: str) -> list[float]:
    rates = []
    for part in text.split(","):
        try:
            rates.append(parse_rate(part.strip(), field="--levels"))
        except ConfigError as exc:
            raise ConfigError(
                f"--levels has {part.strip()!r}: each level must be a rate above 0 (req/s), "
                "levels separated by commas",
                field="--levels",
                hint="e.g. --levels 500,1000,2000",
            ) from exc
    return rates


def _duration(text: str, flag: str) -> float:
    """Seconds from ``text``; a negative or garbled one is refused in the words the range
    check uses for 0 (``above 0``), so the two refusals do not disagree."""
    try:
        return parse_duration(text, field=flag)
    except ConfigError as exc:
        raise ConfigError(
            f"{flag} must be a duration above 0, not {text!r}", field=flag, hint=DURATION_HINT
        ) from exc
