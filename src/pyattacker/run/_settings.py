"""``Settings``: the knobs of one run's execution, checked once by the Runner."""

from __future__ import annotations

import dataclasses

__all__ = ["Settings"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    concurrency: int
    admission: int
    grace_s: float
    strict_leases: bool
    stop_after_failures: int | None
    report_failures: int
