"""``attack --stages``: ``DURATION:RATE,...``, each stage a linear ramp (moved out of
``_attack.py`` to keep that module within its size budget)."""

from __future__ import annotations

from pyattacker._units import parse_duration, parse_rate
from pyattacker.attack import Stage
from pyattacker.errors import ConfigError

__all__ = ["parse_stages"]


def parse_stages(text: str) -> tuple[Stage, ...]:
    out = []
    for i, part in enumerate(p.strip() for p in text.split(",")):
        duration, sep, rate = part.partition(":")
        if not sep:
            raise ConfigError(
                f"stage {part!r} is not DURATION:RATE",
                field=f"--stages[{i}]",
                hint="e.g. 30s:500/s",
            )
        field = f"--stages[{i}]"
        out.append(Stage(parse_duration(duration, field=field), _rate_or_zero(rate, field)))
    return tuple(out)


def _rate_or_zero(text: str, field: str) -> float:
    """A stage's rate: like ``--rate``, except that 0 (a ramp down to nothing) is allowed."""
    number, slash, unit = text.partition("/")
    try:
        zero = float(number) == 0.0
    except ValueError:
        zero = False  # not a plain number: parse_rate says what is wrong with it
    if zero:
        parse_rate(f"1{slash}{unit}", field=field)  # the unit must still be one we know
        return 0.0
    return parse_rate(text, field=field)
