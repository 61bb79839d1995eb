"""``LazyRandom``: a ``random.Random`` that seeds itself on its first draw.

Every attempt gets a ``Random`` seeded from its identity, so that a rerun draws the same
numbers (backoff jitter, an algorithm's choices, anything a task draws from ``ctx.rng``).
Seeding a Mersenne Twister fills 624 words of state, and most attempts never draw, so a
durable run spent a visible share of its time seeding generators nobody used (the figures
are in ``benchmarks/README.md``). This one is cheap to build; the seeding happens on the
first draw, with the same seed, so the numbers are exactly those of ``random.Random(seed)``.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["LazyRandom"]

_SEEDED = object()


class LazyRandom(random.Random):
    """``random.Random(seed)``, seeded on first use. Every draw goes through ``random()`` or
    ``getrandbits()`` (the C primitives the rest of ``random.Random`` is built on), and
    each of those seeds first if it has not yet; ``getstate``/``setstate``/``seed`` too."""

    def __init__(self, seed: int | str | bytes | None = None) -> None:
        # Deliberately not super().__init__(seed): that is the seeding we put off.
        self._lazy_seed: object = seed
        self.gauss_next = None

    def _seeded(self) -> None:
        seed, self._lazy_seed = self._lazy_seed, _SEEDED
        super().seed(seed)  # type: ignore[arg-type]

    def random(self) -> float:
        if self._lazy_seed is not _SEEDED:
            self._seeded()
        return super().random()

    def getrandbits(self, k: int, /) -> int:
        if self._lazy_seed is not _SEEDED:
            self._seeded()
        return super().getrandbits(k)

    def getstate(self) -> tuple[Any, ...]:
        if self._lazy_seed is not _SEEDED:
            self._seeded()
        return super().getstate()

    def setstate(self, state: tuple[Any, ...]) -> None:
        self._lazy_seed = _SEEDED
        super().setstate(state)

    def seed(self, a: Any = None, version: int = 2) -> None:
        self._lazy_seed = _SEEDED
        super().seed(a, version)
