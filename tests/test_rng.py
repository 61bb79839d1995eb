"""LazyRandom draws exactly what random.Random(seed) draws, whichever way it is drawn from."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from pyattacker._rng import LazyRandom

SEEDS = st.integers(min_value=0, max_value=2**80) | st.text(max_size=20)


@given(SEEDS)
def test_every_kind_of_draw_matches_an_eagerly_seeded_random(seed: int | str) -> None:
    lazy, eager = LazyRandom(seed), random.Random(seed)
    assert lazy.random() == eager.random()
    assert lazy.randint(1, 10**12) == eager.randint(1, 10**12)
    assert lazy.uniform(0.0, 3.0) == eager.uniform(0.0, 3.0)
    assert lazy.gauss(0.0, 1.0) == eager.gauss(0.0, 1.0)
    assert lazy.getrandbits(70) == eager.getrandbits(70)
    first, second = list(range(30)), list(range(30))
    lazy.shuffle(first)
    eager.shuffle(second)
    assert first == second


@given(SEEDS)
def test_a_first_draw_through_a_derived_method_seeds_it(seed: int | str) -> None:
    assert LazyRandom(seed).choice("abcdefgh") == random.Random(seed).choice("abcdefgh")
    assert LazyRandom(seed).randrange(10**9) == random.Random(seed).randrange(10**9)


def test_state_and_reseeding_behave_like_random() -> None:
    assert LazyRandom(7).getstate() == random.Random(7).getstate()
    lazy = LazyRandom(7)
    lazy.setstate(random.Random(99).getstate())
    assert lazy.random() == random.Random(99).random()
    lazy = LazyRandom(7)
    lazy.seed(3)
    assert lazy.random() == random.Random(3).random()


def test_no_seed_means_the_os_entropy_and_two_generators_differ() -> None:
    assert LazyRandom().getrandbits(64) != LazyRandom().getrandbits(64)
