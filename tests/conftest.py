"""Suite-wide settings.

Hypothesis's per-example deadline is a timed assertion in disguise: on a shared, noisy
machine the first example of a test (cold imports, a busy neighbour) can exceed it and fail
a run that found no bug. We assert on behaviour, never on speed, so the deadline is off.
"""

from hypothesis import settings

settings.register_profile("pyattacker", deadline=None, print_blob=True)
settings.load_profile("pyattacker")
