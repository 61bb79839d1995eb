"""Quick checks a user runs on their own machine: ``pyattacker selftest``.

``accuracy`` attacks our echo server (its own process, on loopback) at a fixed delay and
judges our percentiles on both clocks against the server's exact truth under the accuracy
budget, max(1 %, 0.5 ms). ``scale`` finds the highest open-model rate one process keeps
cleanly in a few short levels. Either attacks from this process or, as a :class:`Setup`
says, from worker processes against an echo server of several processes. Every report
names the machine (CPU count, Python, loop) so figures from different machines compare.
See ``docs/attack.md`` ("Checking your machine").
"""

from pyattacker.selftest._accuracy import (
    QUANTILES,
    AccuracyCheck,
    Figure,
    check_accuracy_settings,
    run_accuracy,
)
from pyattacker.selftest._machine import machine
from pyattacker.selftest._rule import (
    GOAL,
    MAX_ERROR_FRACTION,
    MAX_P99_LAG_S,
    MAX_RATE_ERROR,
    Rule,
    level_problems,
)
from pyattacker.selftest._scale import LEVELS, Level, ScaleCheck, check_scale_settings, run_scale
from pyattacker.selftest._setup import MAX_PROCESSES, Setup, check_setup
from pyattacker.selftest._text import (
    busy_note,
    render_accuracy,
    render_machine,
    render_scale,
    selftest_document,
)

__all__ = [
    "GOAL",
    "LEVELS",
    "MAX_ERROR_FRACTION",
    "MAX_P99_LAG_S",
    "MAX_PROCESSES",
    "MAX_RATE_ERROR",
    "QUANTILES",
    "AccuracyCheck",
    "Figure",
    "Level",
    "Rule",
    "ScaleCheck",
    "Setup",
    "busy_note",
    "check_accuracy_settings",
    "check_scale_settings",
    "check_setup",
    "level_problems",
    "machine",
    "render_accuracy",
    "render_machine",
    "render_scale",
    "run_accuracy",
    "run_scale",
    "selftest_document",
]
