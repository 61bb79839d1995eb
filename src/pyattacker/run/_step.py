"""``Step``: what a pipeline is made of, as the modules below the task module see it.

``Task`` is the one kind of step. The base exists so that the pipeline module (which a
task needs for ``task_a | task_b``) and the identity module (which a task needs for its
fingerprint) can recognise a task without importing the task module: the dependencies
run one way, from tasks down to pipelines and identities.
"""

from __future__ import annotations

__all__ = ["Step"]


class Step:
    """A step of a pipeline (a ``Task``): it has a ``name`` and a ``fingerprint``."""

    __slots__ = ()

    name: str
    fingerprint: str  # the digest of everything that makes the step what it is
