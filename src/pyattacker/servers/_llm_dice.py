"""The mock LLM server's dice: completion lengths, failures and storms.

Every request has its own random stream, ``LazyRandom(f"{seed}:{model}:{n}")`` where ``n``
counts from 0 that model's completion requests that passed the checks (key, body, model,
``x-mock-*`` headers), the refused and failed ones included, received since the server
started or was last reset (a request received before a reset goes on counting in its own
epoch): the world model's rule, so a seed and a request's ordinal fix its dice whatever
the other streams do meanwhile. Draws, in this order, each only when it is
not fixed: the completion length, the failure (two uniforms: whether, then which status;
drawn only for a request the capacity and the rate limits admitted), the TTFT, then one
ITL per token after the first. A fixed distribution draws nothing, and a request that
draws nothing never pays for seeding its stream.

Storms are the world's (:meth:`pyattacker.world.ProviderModel.storm_until`): time since the
server started (or was last reset) is cut into windows of ``storm_duration_s``; a window is
stormy for a model with probability ``storm_rate``, decided by ``(seed, model, window)``
alone, so the same seed gives the simulator and the mock server the same weather. In a
storm a request fails with probability ``storm_error_rate`` instead of the blip rate.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from pyattacker._units import parse_duration
from pyattacker.errors import ConfigError
from pyattacker.servers._delays import _params
from pyattacker.world import EndpointProfile, FailureProfile, ProviderModel, Scenario

__all__ = ["TOKEN_FORMS", "Failures", "TokenCount", "parse_storms"]

TOKEN_FORMS = "N | fixed:N | uniform:min=A,max=B | lognormal:median=N,sigma=S | max"
STORM_FORM = "rate=0.05,duration=30s,error_rate=0.5"
#: what ``max`` generates for a request that sets no max_tokens (OpenAI's completions default)
UNBOUNDED_MAX = 16


@dataclass(frozen=True)
class TokenCount:
    """How many completion tokens a request generates before ``max_tokens`` cuts it.

    ``kind`` is ``fixed`` (``low``), ``uniform`` (an integer from ``low`` to ``high``,
    both included), ``lognormal`` (``round(median * exp(sigma * Z))``, at least 1) or
    ``max`` (exactly the request's ``max_tokens``; :data:`UNBOUNDED_MAX` without one).
    """

    kind: str
    low: int = 1
    high: int = 1
    sigma: float = 0.0

    @classmethod
    def parse(cls, spec: str | int, *, field: str = "output_tokens") -> TokenCount:
        """The ``TokenCount`` of a spec (:data:`TOKEN_FORMS`); ``ConfigError`` naming ``field``."""
        if isinstance(spec, int) and not isinstance(spec, bool):
            return cls("fixed", _count(str(spec), field))
        if not isinstance(spec, str):
            raise _bad(f"must be a token count spec, got {spec!r}", field)
        text = spec.strip().lower()
        if text == "max":
            return cls("max")
        kind, colon, rest = text.partition(":")
        if not colon:
            return cls("fixed", _count(text, field))
        if kind == "fixed":
            return cls("fixed", _count(rest, field))
        if kind == "uniform":
            args = _args(rest, field, ("min", "max"), TOKEN_FORMS)
            low, high = _count(args["min"], f"{field}.min"), _count(args["max"], f"{field}.max")
            if high < low:
                raise _bad(f"max ({high}) is below min ({low})", f"{field}.max")
            return cls("uniform", low, high)
        if kind == "lognormal":
            args = _args(rest, field, ("median", "sigma"), TOKEN_FORMS)
            sigma = _float(args["sigma"], f"{field}.sigma", at_most=5.0, hint=TOKEN_FORMS)
            return cls("lognormal", _count(args["median"], f"{field}.median"), sigma=sigma)
        raise _bad(f"unknown kind {kind!r}", field)

    def sample(
        self, rng: random.Random, max_tokens: int | None, most: int | None = None
    ) -> tuple[int, str]:
        """``(completion tokens, finish_reason)``: ``"length"`` when ``max_tokens`` (or,
        when the request set none, ``most``, the server's limit) cut it."""
        if self.kind == "max":
            tokens = max_tokens or UNBOUNDED_MAX
            return (tokens if most is None else min(tokens, most)), "length"
        return cut(self.draw(rng), max_tokens or most)

    def largest(self) -> int | None:
        """The longest length it can draw (``None``: unbounded, or ``max``)."""
        if self.kind in ("fixed", "uniform"):
            return self.high if self.kind == "uniform" else self.low
        return None

    def draw(self, rng: random.Random) -> int:
        """One length, ``>= 1``, before any ``max_tokens`` (``max`` draws nothing)."""
        if self.kind == "uniform":
            return rng.randint(self.low, self.high)
        if self.kind == "lognormal":
            return max(1, round(self.low * math.exp(self.sigma * rng.gauss())))
        return self.low

    def describe(self) -> str:
        """Canonical spec text; ``TokenCount.parse(c.describe()) == c``."""
        if self.kind == "uniform":
            return f"uniform:min={self.low},max={self.high}"
        if self.kind == "lognormal":
            return f"lognormal:median={self.low},sigma={self.sigma!r}"
        return "max" if self.kind == "max" else f"fixed:{self.low}"


def cut(tokens: int, max_tokens: int | None) -> tuple[int, str]:
    """``tokens`` capped at ``max_tokens``, with the finish_reason that says which won."""
    if max_tokens is not None and tokens > max_tokens:
        return max_tokens, "length"
    return tokens, "stop"


def parse_storms(spec: str | FailureProfile | None, *, field: str = "storms") -> FailureProfile:
    """A :class:`FailureProfile` from ``rate=R,duration=D,error_rate=E`` (or itself).

    ``None`` is no storm at all. The profile's ``error_rate`` (independent blips) is kept as
    given; from text it is 0 (blips are given by ``fail``).
    """
    if spec is None:
        return FailureProfile(error_rate=0.0, storm_rate=0.0)
    if isinstance(spec, FailureProfile):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(f"must be storm text or a FailureProfile, got {spec!r}", field=field)
    args = _args(spec, field, ("rate", "duration", "error_rate"), STORM_FORM)
    duration = parse_duration(args["duration"], field=f"{field}.duration")
    if duration <= 0:
        raise ConfigError(
            f"must be a duration > 0, got {args['duration']!r}", field=f"{field}.duration"
        )
    return FailureProfile(
        error_rate=0.0,
        storm_rate=_float(args["rate"], f"{field}.rate", at_most=1.0),
        storm_duration_s=duration,
        storm_error_rate=_float(args["error_rate"], f"{field}.error_rate", at_most=1.0),
    )


class Failures:
    """Which status, if any, a request fails with: blips from ``fail``, storms from ``profile``.

    ``fail`` maps statuses to the fraction of requests answered with them outside storms;
    in a storm the failure rate is ``profile.storm_error_rate`` and the status is drawn in
    the same proportions (503 when ``fail`` is empty).
    """

    def __init__(
        self, fail: Mapping[int, float], profile: FailureProfile, models: tuple[str, ...], seed: int
    ) -> None:
        self.fail = dict(fail)
        self.profile = profile
        blips = math.fsum(fail.values())
        self.blip_rate = blips if fail else profile.error_rate
        mix = fail if blips > 0 else {503: 1.0}
        total, table = math.fsum(mix.values()), []
        running = 0.0
        for status in sorted(mix):
            running += mix[status] / total
            table.append((running, status))
        self._mix = tuple(table)
        self.stormy = profile.storm_rate > 0 and profile.storm_error_rate > 0
        self.active = self.blip_rate > 0 or self.stormy
        endpoints = tuple(EndpointProfile(id=model, failures=profile) for model in models)
        self._world = ProviderModel(Scenario(name="llm-server", endpoints=endpoints), seed)

    def status(self, model: str, t: float, rng: random.Random) -> tuple[int, bool] | None:
        """``(status, in a storm)`` for a failing request at ``t`` seconds, else ``None``."""
        if not self.active:
            return None
        u, which = rng.random(), rng.random()
        storm = self.storm_until(model, t) is not None
        if u >= (self.profile.storm_error_rate if storm else self.blip_rate):
            return None
        status = next((s for edge, s in self._mix if which < edge), self._mix[-1][1])
        return status, storm

    def storm_until(self, model: str, t: float) -> float | None:
        """When the storm over ``model`` at ``t`` ends (``None``: no storm)."""
        if not self.stormy:
            return None
        return self._world.storm_until(model, t)

    def describe(self) -> str:
        fails = ", ".join(f"{s}: {f:g}" for s, f in sorted(self.fail.items()))
        text = fails or (f"503: {self.blip_rate:g}" if self.blip_rate else "none")
        if self.stormy:
            p = self.profile
            text += (
                f"; storms rate={p.storm_rate:g},duration={p.storm_duration_s:g}s,"
                f"error_rate={p.storm_error_rate:g}"
            )
        return text


def _count(text: str, field: str) -> int:
    value = text.strip()
    if not value.isdigit() or int(value) < 1:
        raise _bad(f"must be a whole number of tokens >= 1, got {text!r}", field)
    return int(value)


def _args(text: str, field: str, names: tuple[str, ...], forms: str) -> dict[str, str]:
    """``name=value`` pairs, every one of ``names`` and no other (``ConfigError`` else)."""
    try:
        return _params(text, field, required=names)
    except ConfigError as exc:
        raise ConfigError(exc.message, field=field, hint=f"forms: {forms}") from None


def _float(text: str, field: str, *, at_most: float, hint: str = STORM_FORM) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= at_most:
        raise ConfigError(
            f"must be a number from 0 to {at_most:g}, got {text!r}",
            field=field,
            hint=f"forms: {hint}",
        )
    return value


def _bad(message: str, field: str) -> ConfigError:
    return ConfigError(message, field=field, hint=f"forms: {TOKEN_FORMS}")
