"""A look at the first row before anything is paid for: the template fields of the
built-in steps that the row (and the steps before them) will not have.

Judged by one row, so it warns rather than refuses (rows may differ); a row without the
field fails at that step with ``MissingField``, which is never retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyattacker.run import Task
from pyattacker.tasks import shape_of

__all__ = ["missing_fields"]


def missing_fields(tasks: Sequence[Task], first: Any) -> list[tuple[str, str]]:
    """``(field path, message)`` for each built-in step whose templates read a field that
    ``first`` (the first row) and the outputs of the steps before it lack. Stops at the
    first step that is not a built-in: what it returns is not known."""
    have = set(first) if isinstance(first, Mapping) else set()
    row = ", ".join(sorted(have)) or "no fields"
    added: list[str] = []
    found = []
    for n, task in enumerate(tasks):
        shape = shape_of(task.fn)
        if shape is None:
            break
        missing = sorted(shape.reads - have)
        if missing:
            slots = ", ".join("{" + name + "}" for name in missing)
            earlier = f"; the steps before it add {', '.join(added)}" if added else ""
            found.append(
                (
                    f"pipeline.tasks[{n}].args",
                    f"{task.name} reads {slots}, which the first row lacks (it has {row}"
                    f"{earlier}): rows without it fail at this step",
                )
            )
        if not shape.keeps:
            break
        if shape.adds is not None:
            have.add(shape.adds)
            added.append(shape.adds)
    return found
