"""Artifact backends: where a SQLite store keeps the outputs of tasks.

- ``inline`` (the default): the bytes in the task's row, in the database.
- ``file``: outputs of :data:`SPILL_AT` bytes or more go to content-addressed files in a
  folder beside the store (``eval.db`` -> ``eval.db.artifacts/ab/abcd...``), named by their
  artifact digest: written once (an equal output of another pipeline is the same file),
  atomically (a temporary file, flushed to disk, renamed into place) and before the row
  that names it is committed, so a committed row never names a missing file. The row keeps
  the codec as ``@file:<codec>`` and no bytes; every reader (the Runner resuming, reports,
  exports) reads the file back, so a run or an export cannot tell the difference.
- ``null``: the output is not kept; the row keeps ``@null:<size>:<codec>``, its digest
  and no bytes. A resume needs the outputs it continues from: a pipeline interrupted after
  a step whose output was not kept cannot continue (the codecs say why).

Only task outputs move; the seeds (the input) stay in the database.
See ``docs/run.md`` ("Artifact backends").
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path
from typing import Any

from pyattacker.errors import ConfigError, StoreError
from pyattacker.store._rows import ArtifactRow, Batch

__all__ = ["ARTIFACT_BACKENDS", "SPILL_AT", "ArtifactFiles", "check_backend"]

ARTIFACT_BACKENDS = ("inline", "file", "null")
#: Outputs this large or larger go to files with ``file``; smaller ones stay in their row,
#: where they cost less than a file of their own.
SPILL_AT = 1024
FILE, NULL = "@file:", "@null:"


def check_backend(name: object, field: str) -> str:
    """``name`` when it is a backend; ``ConfigError`` naming ``field`` otherwise."""
    if name not in ARTIFACT_BACKENDS:
        raise ConfigError(
            f"unknown artifact backend {name!r}",
            field=field,
            hint="one of: " + ", ".join(ARTIFACT_BACKENDS),
        )
    return str(name)


class ArtifactFiles:
    """The artifact side of one SQLite store at ``path``: spills outputs when writing
    (``backend``), reads ``@file:`` outputs back whatever the backend."""

    def __init__(self, path: Path, backend: str = "inline") -> None:
        self.backend = check_backend(backend, "artifacts")
        self.folder = Path(f"{path}.artifacts")

    def spilled(self, batch: Batch) -> Batch:
        """``batch`` with the outputs of its task rows moved out as the backend says."""
        if self.backend == "inline" or not batch.tasks:
            return batch
        tasks = [self._task(t) for t in batch.tasks]
        return dataclasses.replace(batch, tasks=tasks)

    def _task(self, task: Any) -> Any:
        data, codec = task.output_data, task.output_codec
        if data is None or codec is None or codec.startswith("@"):
            return task
        if self.backend == "null":
            codec = f"{NULL}{len(data)}:{codec}"
        elif len(data) >= SPILL_AT:
            self._put(task.output_artifact, data)
            codec = FILE + codec
        else:
            return task
        return dataclasses.replace(task, output_codec=codec, output_data=b"")

    def _file(self, digest: str) -> Path:
        if not (digest and all(c in "0123456789abcdef" for c in digest)):
            raise StoreError(f"{digest!r} is not an artifact digest", location=str(self.folder))
        return self.folder / digest[:2] / digest

    def _put(self, digest: str, data: bytes) -> None:
        target = self._file(digest)
        if target.is_file():
            return  # content-addressed: the same digest is the same bytes
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.with_name(f".{digest}.{secrets.token_hex(4)}.tmp")
            with staged.open("wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())  # on disk before the row that names it commits
            os.replace(staged, target)
        except OSError as exc:
            raise StoreError(
                f"could not write artifact {target}: {exc}", location=str(self.folder)
            ) from exc

    def read(self, artifact: ArtifactRow) -> ArtifactRow:
        """``artifact`` with its bytes, read back from its file when it was spilled."""
        if not artifact.codec.startswith(FILE):
            return artifact
        return dataclasses.replace(
            artifact, codec=artifact.codec[len(FILE) :], data=self._get(artifact.digest)
        )

    def read_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """An ``artifacts`` row (a dict with ``codec``, ``data``, ``digest``, ``size``)."""
        codec = row.get("codec")
        if not isinstance(codec, str) or not codec.startswith(FILE):
            return row
        data = self._get(row["digest"])
        return {**row, "codec": codec[len(FILE) :], "data": data, "size": len(data)}

    def _get(self, digest: str) -> bytes:
        try:
            return self._file(digest).read_bytes()
        except OSError as exc:
            raise StoreError(
                f"the output {digest} is stored in {self.folder}, which cannot be read: {exc}",
                location=str(self.folder),
            ) from exc
