"""The durable record of a run (docs/run.md): what the Runner writes, what readers read.

* :class:`Store` — the protocol: ``begin_run``/``write``/``end_run`` for the Runner,
  ``unfinished``/``pipeline``/``artifact`` to resume, ``rows`` for readers.
* :class:`SQLiteStore` — the default: one SQLite file, WAL, read-only readers beside a live
  run; :class:`MemoryStore` — the same contract in memory. :func:`open_store` picks one.
* The rows (:class:`RunRow`, :class:`PipelineRow`, ...) and :class:`Batch`, everything one
  transaction writes.
* :func:`export_rows` — one kind of row to JSONL, JSON, CSV or Parquet, atomically.
* :func:`results` — one row per item: key, input, output, state, error, attempts, usage.
"""

from pyattacker.store._artifact_files import ARTIFACT_BACKENDS, SPILL_AT, check_backend
from pyattacker.store._export import EXPORT_FORMATS, EXPORT_KINDS, export_rows, format_for
from pyattacker.store._memory import MemoryStore
from pyattacker.store._merged import STATE_RANK, MergedStore
from pyattacker.store._open import open_store
from pyattacker.store._protocol import Store
from pyattacker.store._results import results
from pyattacker.store._rows import (
    OK_DECISION,
    ROW_KINDS,
    ArtifactRow,
    AttemptRow,
    Batch,
    EventRow,
    PipelineRow,
    PipelineState,
    ResourceRow,
    RowKind,
    RunRow,
    RunState,
    Superseded,
    TaskRow,
    TaskState,
)
from pyattacker.store._schema import SCHEMA_VERSION, user_version
from pyattacker.store._sqlite import SQLiteStore

__all__ = [
    "ARTIFACT_BACKENDS",
    "EXPORT_FORMATS",
    "EXPORT_KINDS",
    "OK_DECISION",
    "ROW_KINDS",
    "SCHEMA_VERSION",
    "SPILL_AT",
    "STATE_RANK",
    "ArtifactRow",
    "AttemptRow",
    "Batch",
    "EventRow",
    "MemoryStore",
    "MergedStore",
    "PipelineRow",
    "PipelineState",
    "ResourceRow",
    "RowKind",
    "RunRow",
    "RunState",
    "SQLiteStore",
    "Store",
    "Superseded",
    "TaskRow",
    "TaskState",
    "check_backend",
    "export_rows",
    "format_for",
    "open_store",
    "results",
    "user_version",
]
