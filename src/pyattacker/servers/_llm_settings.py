"""The mock LLM server's settings: every argument checked once, when the server is built.

:func:`settings` turns what a caller passed (text specs or values) into a frozen
:class:`Settings`, raising :class:`~pyattacker.errors.ConfigError` naming the argument for
the first bad one. Nothing here runs a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyattacker._checks import check_whole
from pyattacker.errors import ConfigError
from pyattacker.servers._core import check_fail
from pyattacker.servers._delays import Delay
from pyattacker.servers._llm_dice import TokenCount, parse_storms
from pyattacker.world import FailureProfile

__all__ = ["MAX_OUTPUT_TOKENS", "OVERFLOWS", "Settings", "settings"]

OVERFLOWS = ("queue", "refuse")
#: the default ``max_output_tokens``: the most any completion may have (a large model's)
MAX_OUTPUT_TOKENS = 131_072
#: The largest --max-output-tokens: the attack's own --shape cap, far past any model's.
MOST_OUTPUT_TOKENS = 2_000_000
#: The largest --capacity, --rpm or --tpm: beyond it a limit never binds.
MOST_LIMIT = 10**12
#: A seed fits a signed 64-bit integer, as the attack's --seed does.
MOST_SEED = 2**63 - 1


@dataclass(frozen=True)
class Settings:
    """A mock LLM server's validated settings (see :class:`pyattacker.servers.LlmServer`)."""

    models: tuple[str, ...]
    ttft: Delay
    itl: Delay
    output_tokens: TokenCount
    capacity: int | None
    overflow: str
    rpm: int | None
    tpm: int | None
    fail: Mapping[int, float]
    storms: FailureProfile
    api_keys: tuple[str, ...]
    seed: int
    utilization_header: bool
    max_output_tokens: int = MAX_OUTPUT_TOKENS

    def describe(self) -> dict[str, object]:
        """The settings as JSON-ready values (API keys counted, never shown)."""
        storms = self.storms
        return {
            "models": list(self.models),
            "ttft": self.ttft.describe(),
            "itl": self.itl.describe(),
            "output_tokens": self.output_tokens.describe(),
            "capacity": self.capacity,
            "overflow": self.overflow,
            "rpm": self.rpm,
            "tpm": self.tpm,
            "fail": {str(status): fraction for status, fraction in sorted(self.fail.items())},
            "storms": (
                {
                    "rate": storms.storm_rate,
                    "duration_s": storms.storm_duration_s,
                    "error_rate": storms.storm_error_rate,
                }
                if storms.storm_rate > 0
                else None
            ),
            "api_keys": len(self.api_keys),
            "seed": self.seed,
            "utilization_header": self.utilization_header,
            "max_output_tokens": self.max_output_tokens,
        }


def settings(
    *,
    models: str | Sequence[str],
    ttft: Delay | str,
    itl: Delay | str,
    output_tokens: TokenCount | str | int,
    capacity: int | None,
    overflow: str,
    rpm: int | None,
    tpm: int | None,
    fail: Mapping[int, float] | None,
    storms: FailureProfile | str | None,
    api_keys: str | Sequence[str],
    seed: int,
    utilization_header: bool,
    max_output_tokens: int = MAX_OUTPUT_TOKENS,
) -> Settings:
    """Check every argument (``ConfigError`` naming the first bad one) and freeze them."""
    if overflow not in OVERFLOWS:
        raise ConfigError(
            f"must be one of {', '.join(OVERFLOWS)}, got {overflow!r}",
            field="overflow",
            hint="queue: wait for a free slot; refuse: answer 429 at once",
        )
    storm_profile = parse_storms(storms)
    checked_fail = check_fail(fail)
    if checked_fail and storm_profile.error_rate > 0:
        raise ConfigError(
            "blip failures are given twice: by fail and by storms.error_rate",
            field="storms",
            hint="give FailureProfile(error_rate=0, ...) or leave fail empty",
        )
    capacity = _optional_whole(capacity, "capacity")
    if not isinstance(utilization_header, bool):
        raise ConfigError(
            f"must be True or False, got {utilization_header!r}", field="utilization_header"
        )
    if utilization_header and capacity is None:
        raise ConfigError(
            "the utilization header needs a capacity to measure against",
            field="utilization_header",
            hint="set capacity too",
        )
    most = check_whole(max_output_tokens, "max_output_tokens", at_most=MOST_OUTPUT_TOKENS)
    lengths = (
        output_tokens
        if isinstance(output_tokens, TokenCount)
        else TokenCount.parse(output_tokens, field="output_tokens")
    )
    largest = lengths.largest()
    if largest is not None and largest > most:
        raise ConfigError(
            f"{lengths.describe()} goes beyond the longest answer allowed ({most:,} tokens)",
            field="output_tokens",
            hint="lower it, or raise max_output_tokens",
        )
    return Settings(
        models=_names(models, "models"),
        ttft=ttft if isinstance(ttft, Delay) else Delay.parse(ttft, field="ttft"),
        itl=itl if isinstance(itl, Delay) else Delay.parse(itl, field="itl"),
        output_tokens=lengths,
        capacity=capacity,
        overflow=overflow,
        rpm=_optional_whole(rpm, "rpm"),
        tpm=_optional_whole(tpm, "tpm"),
        fail=checked_fail,
        storms=storm_profile,
        api_keys=_keys(api_keys),
        seed=check_whole(seed, "seed", at_least=0, at_most=MOST_SEED),
        utilization_header=utilization_header,
        max_output_tokens=most,
    )


def _optional_whole(value: int | None, field: str) -> int | None:
    if value is None:
        return None
    return check_whole(value, field, at_most=MOST_LIMIT, hint="or None for no limit")


def _names(models: str | Sequence[str], field: str) -> tuple[str, ...]:
    names = (models,) if isinstance(models, str) else tuple(models)
    if not names:
        raise ConfigError("at least one model is needed", field=field, hint="e.g. gpt-4o-mini")
    for name in names:
        if not isinstance(name, str) or not name.strip() or "/" in name:
            raise ConfigError(f"must be a non-empty name without '/', got {name!r}", field=field)
    if len(set(names)) != len(names):
        raise ConfigError(f"a model is named twice: {list(names)}", field=field)
    return names


def _keys(api_keys: str | Sequence[str]) -> tuple[str, ...]:
    keys = (api_keys,) if isinstance(api_keys, str) else tuple(api_keys)
    for index, key in enumerate(keys):
        # Checked without echoing the key: it is a secret even when it is a bad one.
        if not isinstance(key, str) or not key or any(c.isspace() or ord(c) < 33 for c in key):
            raise ConfigError(
                f"key #{index + 1} is empty or holds spaces or control characters",
                field="api_keys",
            )
    return keys
