"""Several stores read as one: the shards of a run (``pyattacker report A.db B.db``,
``export A.db B.db OUT``), or a run continued elsewhere.

A pipeline may be in more than one store (a shard rerun with another N, a store copied
and continued). Each pipeline's story is taken whole from one store, the one where its
state ranks highest by :data:`STATE_RANK` (succeeded > failed > interrupted > running >
pending); between equal states the store named later wins. Its tasks, attempts,
artifacts and events come from that store only, so nothing is counted twice. Rows of no
pipeline (runs, resources, run-level events) come from every store.

Read-only: the writing half of :class:`~pyattacker.store.Store` raises.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any

from pyattacker.errors import ConfigError
from pyattacker.store._protocol import Store
from pyattacker.store._rows import ArtifactRow, PipelineRow, RowKind, RunRow

__all__ = ["STATE_RANK", "MergedStore"]

#: A pipeline's state -> its rank when stores disagree: the highest wins.
STATE_RANK = {"succeeded": 4, "failed": 3, "interrupted": 2, "running": 1, "pending": 0}


class MergedStore:
    """``stores`` (opened read-only, in order) as one read-only store; closes them."""

    read_only = True

    def __init__(self, stores: Sequence[Store]) -> None:
        if not stores:
            raise ConfigError("no store to read", field="STORE")
        self.stores = list(stores)
        self.location = " + ".join(s.location for s in stores)
        self._winner: dict[str, int] | None = None

    def winners(self) -> dict[str, int]:
        """pipeline id -> the index of the store its story is read from."""
        if self._winner is None:
            best: dict[str, tuple[int, int]] = {}
            for index, store in enumerate(self.stores):
                for row in store.rows(RowKind.PIPELINES):
                    rank = (STATE_RANK.get(str(row["state"]), -1), index)
                    pid = row["pipeline_id"]
                    if pid not in best or rank >= best[pid]:
                        best[pid] = rank
            self._winner = {pid: index for pid, (_, index) in best.items()}
        return self._winner

    def rows(self, kind: RowKind, *, pipeline_id: str | None = None) -> Iterator[dict[str, Any]]:
        winners = self.winners()
        if pipeline_id is not None:
            index = winners.get(pipeline_id)
            if index is None:
                return iter(())
            return self.stores[index].rows(kind, pipeline_id=pipeline_id)
        return self._all(kind, winners)

    def _all(self, kind: RowKind, winners: dict[str, int]) -> Iterator[dict[str, Any]]:
        for index, store in enumerate(self.stores):
            for row in store.rows(kind):
                pid = row.get("pipeline_id")
                if pid is None or winners.get(pid, index) == index:
                    yield row

    def runs(self) -> list[RunRow]:
        found = [run for store in self.stores for run in store.runs()]
        return sorted(found, key=lambda run: run.started_at)

    def lock_held(self) -> bool | None:
        held = [store.lock_held() for store in self.stores]
        return True if True in held else None if None in held else False

    def pipeline(self, pipeline_id: str) -> PipelineRow | None:
        index = self.winners().get(pipeline_id)
        return None if index is None else self.stores[index].pipeline(pipeline_id)

    def pipelines(self, pipeline_ids: Sequence[str]) -> dict[str, PipelineRow]:
        found = {pid: self.pipeline(pid) for pid in pipeline_ids}
        return {pid: row for pid, row in found.items() if row is not None}

    def artifact(self, pipeline_id: str, seq: int) -> ArtifactRow | None:
        index = self.winners().get(pipeline_id)
        return None if index is None else self.stores[index].artifact(pipeline_id, seq)

    def count_pipelines(self) -> int:
        return len(self.winners())

    def count_by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows(RowKind.PIPELINES):
            counts[str(row["state"])] = counts.get(str(row["state"]), 0) + 1
        return counts

    def templates(self) -> list[str]:
        return sorted({t for store in self.stores for t in store.templates()})

    def unfinished(self, chain_digests: Collection[str]) -> Iterator[PipelineRow]:
        raise ConfigError("merged stores are read-only", field="STORE")

    def stale(self, template: str, chain_digest: str | None) -> Iterator[PipelineRow]:
        raise ConfigError("merged stores are read-only", field="STORE")

    def last_attempts(self, pipeline_ids: Sequence[str]) -> dict[str, dict[int, int]]:
        raise ConfigError("merged stores are read-only", field="STORE")

    def begin_run(self, run: RunRow, *, resume: bool) -> list[RunRow]:
        raise ConfigError("merged stores are read-only", field="STORE")

    def end_run(self, *args: Any, **kwargs: Any) -> None:
        raise ConfigError("merged stores are read-only", field="STORE")

    def write(self, batch: Any) -> None:
        raise ConfigError("merged stores are read-only", field="STORE")

    def close(self) -> None:
        for store in self.stores:
            store.close()
