"""``Job``: one admitted pipeline, as the run carries it from task to task."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pyattacker.run._pipeline import PipelineTemplate
from pyattacker.store import AttemptRow, PipelineRow

__all__ = ["Job"]


@dataclasses.dataclass(slots=True)
class Job:
    """One admitted pipeline: its identity, its row as last staged, and where it stands."""

    template: PipelineTemplate
    row: PipelineRow
    value: Any  # the input of task `row.cursor`
    input_digest: str
    # On a restart from the seed: the successful attempts that the old task rows carry,
    # by seq. Each becomes an attempts row of its own when its task row is replaced.
    carried: dict[int, AttemptRow] = dataclasses.field(default_factory=dict)
    # A stored pipeline's highest attempt number recorded per seq, which this run's
    # attempts of that step continue after (None: a new pipeline, nothing recorded).
    prior: Mapping[int, int] | None = None
