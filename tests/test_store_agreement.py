"""The memory and the SQLite store agree after any sequence of batches, poisoned ones included."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pyattacker.errors import StoreError
from pyattacker.store import (
    Batch,
    MemoryStore,
    PipelineState,
    RowKind,
    SQLiteStore,
    Store,
    Superseded,
    TaskState,
)
from store_helpers import (
    POISONS,
    _add,
    artifact,
    attempt,
    event,
    live_run,
    pipeline,
    resource,
    snapshot,
    task,
)

# -- the two stores agree -----------------------------------------------------------------

IDS = st.sampled_from(["p0", "p1", "p2"])
DIGESTS = st.sampled_from(["d0", "d1", "d2", "d3"])
TIMES = st.floats(0, 2e9, allow_nan=False)
SHORT = st.text(max_size=6)
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | TIMES | SHORT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SHORT, inner, max_size=3),
    max_leaves=6,
)
JSON_DICTS = st.dictionaries(SHORT, JSON, max_size=3)
SMALL = st.integers(0, 4)

PIPELINES = st.builds(
    pipeline, IDS, chain_digest=st.sampled_from(["chain-1", "chain-2"]),
    template=st.sampled_from(["summarise", "translate"]),
    state=st.sampled_from(PipelineState), cursor=SMALL, ordinal=SMALL, key=st.none() | SHORT,
    updated_at=TIMES, output_artifact=st.none() | DIGESTS, error=st.none() | SHORT,
)  # fmt: skip
TASKS = st.builds(
    task, IDS, SMALL, state=st.sampled_from(TaskState), attempts=SMALL,
    input_artifact=st.none() | DIGESTS, output_artifact=st.none() | DIGESTS,
    traceback=st.none() | SHORT,
)  # fmt: skip
ATTEMPTS = st.builds(
    attempt, IDS, SMALL, SMALL, decision=JSON_DICTS, resources=st.lists(SHORT, max_size=2),
    duration_s=TIMES,
)  # fmt: skip
ARTIFACTS = st.builds(
    artifact, DIGESTS, st.binary(max_size=8), codec=st.sampled_from(["json", "bytes"]),
    pipeline_id=IDS, seq=SMALL,
)  # fmt: skip
EVENTS = st.builds(
    event, SHORT, pipeline_id=st.none() | IDS, seq=st.none() | SMALL, data=JSON_DICTS
)
RESOURCES = st.builds(resource, SHORT, spec=JSON_DICTS)
SUPERSEDED = st.builds(Superseded, pipeline_id=IDS, from_seq=SMALL, run_id=SHORT, at=TIMES)
BATCHES = st.builds(
    Batch,
    artifacts=st.lists(ARTIFACTS, max_size=3),
    tasks=st.lists(TASKS, max_size=3),
    pipelines=st.lists(PIPELINES, max_size=3),
    attempts=st.lists(ATTEMPTS, max_size=2),
    events=st.lists(EVENTS, max_size=2),
    resources=st.lists(RESOURCES, max_size=1),
    heartbeat=st.none() | st.tuples(st.just("r1"), TIMES),
    superseded=st.lists(SUPERSEDED, max_size=1),
)
POISONED = st.sampled_from([None, *POISONS.values()])


def _everything(store: Store) -> dict[str, Any]:
    narrowed = {
        f"{kind.value}/{pid}": list(store.rows(kind, pipeline_id=pid))
        for kind in RowKind
        if kind not in (RowKind.RUNS, RowKind.RESOURCES)
        for pid in ("p0", "p1", "p2")
    }
    return {
        **snapshot(store),
        **narrowed,
        "unfinished": list(store.unfinished(["chain-1"])),
        "stale": list(store.stale("summarise", "chain-1")),
        "of_template": list(store.stale("translate", None)),
        "templates": store.templates(),
        "last_attempts": store.last_attempts(["p0", "p1", "p2"]),
        "by_state": store.count_by_state(),
        "runs": store.runs(),
    }


@settings(max_examples=60)
@given(st.lists(st.tuples(BATCHES, POISONED), max_size=5))
def test_memory_and_sqlite_stores_agree_after_any_sequence_of_batches(
    batches: list[tuple[Batch, Batch | None]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        memory, sqlite = MemoryStore(), SQLiteStore(Path(folder) / "s.db")
        for each in (memory, sqlite):
            each.begin_run(live_run("r1"), resume=False)
            each.write(Batch(pipelines=[pipeline(pid) for pid in ("p0", "p1")]))
        for batch, poison in batches:
            if poison is not None:
                _add(batch, poison)
            outcomes = [_outcome(each, batch) for each in (memory, sqlite)]
            assert outcomes[0] == outcomes[1]
        assert _everything(memory) == _everything(sqlite)
        sqlite.close()


def _outcome(store: Store, batch: Batch) -> str:
    try:
        store.write(batch)
    except StoreError:
        return "refused"
    return "written"
