"""Seeded draws by index: draw ``n`` is a pure function of ``(seed, stream, n)``.

An attack's requests ask for their draw by arrival index, possibly out of order (a retry,
a request that waited in a queue), so the draws cannot come from one shared generator
read in turn. They come in blocks of :data:`BLOCK`: block ``b`` is made by a generator
seeded from ``(stream, seed, b)`` (a string seed: the same in every process, whatever
``PYTHONHASHSEED``), and a few recent blocks are kept. The cost is one block's
generation per ``BLOCK`` requests plus an index per request.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

__all__ = ["BLOCK", "Draws"]

BLOCK = 4096
_KEPT = 8  # blocks kept: requests far behind the newest ones (a long retry) still hit


class Draws:
    """``draws(n)``: an index in ``range(len(weights))`` drawn with those weights."""

    __slots__ = ("_blocks", "_cum", "_last", "_last_block", "_population", "seed", "stream")

    def __init__(self, seed: int, stream: str, weights: Sequence[float]) -> None:
        if not weights or any(not w > 0 for w in weights):
            raise ValueError("weights must be positive and at least one")
        self.seed, self.stream = seed, stream
        self._cum = list(itertools.accumulate(weights))
        self._population = range(len(weights))
        self._blocks: dict[int, list[int]] = {}
        self._last_block = -1
        self._last: list[int] = []

    def __call__(self, n: int) -> int:
        block = n // BLOCK
        if block != self._last_block:
            self._last = self._block(block)
            self._last_block = block
        return self._last[n % BLOCK]

    def _block(self, block: int) -> list[int]:
        found = self._blocks.get(block)
        if found is None:
            rng = random.Random(f"{self.stream}:{self.seed}:{block}")
            found = rng.choices(self._population, cum_weights=self._cum, k=BLOCK)
            if len(self._blocks) >= _KEPT:
                del self._blocks[next(iter(self._blocks))]  # the oldest made
            self._blocks[block] = found
        return found
