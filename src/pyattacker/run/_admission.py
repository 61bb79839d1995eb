"""Admission: reading the input, finding each pipeline in the store, starting it or not.

The part of an ``Execution`` (``pyattacker.run._execute``, which has one and hands it a
way to start a pipeline) that decides what runs: it pulls
the input in chunks as large as the free room (so a generator is never materialised), looks
each chunk up in the store with one query, refuses bad input before anything of it runs
(a pool nobody has, a seed no codec stores, a key over another input row), and continues
stored pipelines from their last readable checkpoint on resume, or reruns an edited one
from its first changed step (``_reuse``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pyattacker.clock import epoch_time
from pyattacker.errors import CodecError, ConfigError
from pyattacker.pool import Pool
from pyattacker.run._codecs import CodecRegistry
from pyattacker.run._commit import Committer
from pyattacker.run._input import Tracked
from pyattacker.run._job import Job
from pyattacker.run._live import LivePipelines
from pyattacker.run._pipeline import PipelineSpec, PipelineTemplate
from pyattacker.run._records import Recorder
from pyattacker.run._reuse import StepReuse
from pyattacker.run._scrub import Scrubber
from pyattacker.run._stats import RunCounters
from pyattacker.store import (
    ArtifactRow,
    AttemptRow,
    PipelineRow,
    PipelineState,
    RowKind,
    Store,
)
from pyattacker.store._tables import ok_attempt  # a task row's carried attempt, as a row

__all__ = ["Admission"]

_CHUNK = 64  # input items read (and looked up in the store) at a time, at most


class Admission:
    """Decides which pipelines of the input (and, on resume, of the store) run; see the
    module docstring. ``start`` runs an admitted job as a live pipeline; ``live`` holds the
    run's live pipelines (the room, and whether the run is stopping)."""

    def __init__(
        self,
        *,
        run_id: str,
        store: Store,
        committer: Committer,
        pools: Mapping[str, Pool],
        codecs: CodecRegistry,
        counters: RunCounters,
        scrubber: Scrubber,
        records: Recorder,
        live: LivePipelines,
        start: Callable[[Job], None],
        fresh: bool = False,
        held_templates: frozenset[str] | None = None,
        tracker: Tracked | None = None,
    ) -> None:
        self.run_id = run_id
        self._store = store
        self._commit = committer
        self._pools = pools
        self._codecs = codecs
        self.counters = counters
        self._scrub = scrubber
        self._records = records
        self._live = live
        self._start = start
        self._reuse = StepReuse(
            run_id=run_id, store=store, committer=committer, records=records, fresh=fresh,
            held_templates=held_templates,
        )  # fmt: skip
        self.tracker = tracker  # follows the run's input (None: not recorded)
        self.input_error: BaseException | None = None
        self._ordinal = 0

    @property
    def stopping(self) -> bool:
        return self._live.stopping

    async def admit(self, specs: Iterable[Any], *, resume: bool) -> None:
        """Admit every spec (then, on resume, the store's unfinished pipelines of the same
        templates) and return; the admitted pipelines may still be running. Raises
        ``ConfigError`` for a key whose stored digests differ.

        The input is read in chunks as large as the room free at that moment (at most
        ``_CHUNK``), each looked up in the store with one query.
        """
        templates: dict[str, PipelineTemplate] = {}
        items = _each(specs, self)
        while True:
            room = await self._wait_room()
            if self.stopping:
                break
            chunk = list(itertools.islice(items, min(room, _CHUNK)))
            if not chunk:
                if self.tracker is not None and self.input_error is None:
                    self.tracker.ended()  # a shard's input ends on rows of other shards
                break
            for item in chunk:
                template = item if isinstance(item, PipelineTemplate) else item.template
                if template.chain_digest not in templates:
                    self._check_template(template)
                    templates[template.chain_digest] = template
            specs_of_chunk = [i for i in chunk if isinstance(i, PipelineSpec)]
            _refuse_key_clash(specs_of_chunk)  # before any of the chunk starts
            self._admit_chunk(specs_of_chunk)
            if self.tracker is not None and isinstance(chunk[-1], PipelineSpec):
                # Staged, all of them: their rows count as read (at the next flush).
                self.tracker.admitted(chunk[-1])
        # A failing input ends admission; what was admitted finishes (Runner raises after).
        if resume and not self.stopping and self.input_error is None:
            await self._admit_stored(templates)

    def _check_template(self, template: PipelineTemplate) -> None:
        """Every pool a task of ``template`` (or a fanout branch) names exists: a typo is
        bad input, found before anything of that template runs or is written."""
        self._reuse.check_held(template)
        missing = template.missing_pool(self._pools)
        if missing is not None:
            known = ", ".join(sorted(self._pools)) or "none: pass pools=[...]"
            raise ConfigError(
                f"task {missing[0]!r} of {template.name!r} names pool {missing[1]!r}",
                field="resource",
                hint=f"the Runner's pools are: {known}",
            )

    async def _wait_room(self) -> int:
        return await self._live.wait_room()

    def _event(
        self, kind: str, pipeline_id: str | None, seq: int | None, data: Mapping[str, Any]
    ) -> None:
        self._records.event(kind, pipeline_id, seq, data)

    async def _admit_stored(self, templates: Mapping[str, PipelineTemplate]) -> None:
        # Pipelines admitted above were staged with this run's id: flush so that the store
        # does not offer them again.
        await self._commit.checkpoint()
        await self._admit_revisited(templates.values())

    async def _admit_revisited(self, templates: Iterable[PipelineTemplate]) -> None:
        """On resume, the store's pipelines of ``templates`` that are unfinished, were
        edited, or (fresh) every one of them: continued or rerun, a chunk at a time."""
        for template in templates:
            for chunk in self._reuse.stale(template):
                prior = self._store.last_attempts([row.pipeline_id for row in chunk])
                for row in chunk:
                    if row.run_id == self.run_id or row.pipeline_id in self._live:
                        continue
                    await self._wait_room()
                    if self.stopping:
                        return
                    job = self._job_for(template, row)
                    if job is not None:
                        job.prior = prior.get(row.pipeline_id)
                        self._start(job)

    def _job_for(self, template: PipelineTemplate, row: PipelineRow) -> Job | None:
        if self._reuse.revisits(template, row):
            return self._revisit_job(template, row)
        return self._resume_job(template, row)

    def _revisit_job(
        self, template: PipelineTemplate, stored: PipelineRow, *, seed: Any = None
    ) -> Job | None:
        """The job that reruns ``stored`` from its first changed step (every step when
        fresh), continuing from the checkpoint before it."""
        pid = stored.pipeline_id
        edited = self._reuse.replan(template, stored, lambda seq: self._load(pid, seq)[2] is None)
        return self._resume_job(template, edited, seed=seed)

    def _admit_chunk(self, specs: list[PipelineSpec]) -> None:
        """Start the pipelines of ``specs`` that need running; there is room for all."""
        prepared = [self._prepare(spec) for spec in specs]
        stored = self._store.pipelines([p.pipeline_id for p in prepared])
        prior = self._reuse.prior_attempts(specs, prepared, stored) if stored else {}
        for spec, prep in zip(specs, prepared, strict=True):
            pid = prep.pipeline_id
            if pid in self._live:
                if spec.key is not None and self._live.seed_of(pid) != prep.seed_digest:
                    raise ConfigError(
                        f"key {spec.key!r} names two different rows of the input",
                        field="key",
                        hint="keys must be unique per row (or per row and repeat)",
                    )
                self.counters.duplicates += 1
                continue
            row = stored.get(pid)
            if row is None:
                self._start(self._new_job(spec, prep))
                continue
            self._check_key(spec, prep.seed_digest, row)
            if self._reuse.revisits(spec.template, row):
                job = self._revisit_job(spec.template, row, seed=spec.seed)
            elif row.state is PipelineState.SUCCEEDED:
                self.counters.skipped += 1
                self.counters.reused += row.cursor
                continue
            elif row.run_id == self.run_id:
                self.counters.duplicates += 1
                continue
            else:
                job = self._resume_job(spec.template, row, seed=spec.seed)
            if job is not None:
                job.prior = prior.get(pid)
                self._start(job)

    def _prepare(self, spec: PipelineSpec) -> Any:
        if spec.key is not None and not _storable(spec.key):
            raise ConfigError(
                f"key {spec.key!r} of {spec.template.name!r} cannot be stored as text",
                field="key",
                hint="keys are text: decode bytes properly (a lone surrogate is not text)",
            )
        try:
            return spec.prepare(self._codecs)
        except CodecError as exc:
            raise ConfigError(
                f"an input row of {spec.template.name!r} cannot be stored: {exc.message}",
                field="seed",
                hint="pass JSON-able rows, dataclasses or bytes, or register a codec",
            ) from exc

    def _check_key(self, spec: PipelineSpec, seed_digest: str, stored: PipelineRow) -> None:
        """A key names one input row: refuse it over another row (edited tasks are not
        refused: they rerun what changed, see ``_reuse``)."""
        if spec.key is None or stored.seed_digest == seed_digest:
            return
        raise ConfigError(
            f"key {spec.key!r} is already in the store with a different input row",
            field="key",
            hint=(
                "a key names one input row: use a new key (or a new template name) for "
                "another row, or a new store; the stored pipeline was left as it is"
            ),
        )

    def _new_job(self, spec: PipelineSpec, prepared: Any) -> Job:
        now = epoch_time()
        seed_artifact = ArtifactRow(
            pipeline_id=prepared.pipeline_id,
            seq=-1,
            digest=prepared.seed_digest,
            codec=prepared.seed_codec,
            data=prepared.seed_bytes,
            created_at=now,
        )
        row = PipelineRow(
            pipeline_id=prepared.pipeline_id,
            template=spec.template.name,
            chain_digest=spec.template.chain_digest,
            seed_digest=prepared.seed_digest,
            seed_artifact=prepared.seed_digest,
            repeat=spec.repeat,
            key=spec.key,
            row=spec.row,
            state=PipelineState.PENDING,
            cursor=0,
            ntasks=len(spec.template.tasks),
            run_id=self.run_id,
            ordinal=self._next_ordinal(),
            created_at=now,
            updated_at=now,
        )
        self._commit.stage(artifacts=[seed_artifact], pipeline=row)
        return Job(spec.template, row, spec.seed, prepared.seed_digest)

    def _resume_job(
        self, template: PipelineTemplate, stored: PipelineRow, *, seed: Any = None
    ) -> Job | None:
        """Continue ``stored`` at its cursor, reading the input from the store; from the seed
        (with a ``pipeline.restarted`` event) when that checkpoint cannot be read."""
        now = epoch_time()
        pid, cursor = stored.pipeline_id, stored.cursor
        if cursor >= len(template.tasks):  # every checkpoint is in: it only lacked the label
            done = stored.replaced(
                state=PipelineState.SUCCEEDED, run_id=self.run_id, updated_at=now
            )
            self._commit.checkpoint(pipeline=done)
            self.counters.skipped += 1
            self.counters.reused += cursor
            return None
        value, digest_in, problem = self._load(pid, cursor - 1)
        carried: dict[int, AttemptRow] = {}
        if problem is not None and cursor > 0:
            self._event("pipeline.restarted", pid, None, {"reason": problem})
            self.counters.restarted += 1
            carried = self._carried_attempts(pid)
            cursor = 0
            value, digest_in, problem = self._load(pid, -1)
        self.counters.reused += cursor
        row = stored.replaced(
            state=PipelineState.PENDING,
            cursor=cursor,
            run_id=self.run_id,
            updated_at=now,
            error=None,
        )
        if problem is None:
            self._commit.checkpoint(pipeline=row)
        elif seed is not None and cursor == 0:  # the input has it: store it again
            codec, data = self._codecs.encode(seed)
            again = ArtifactRow(
                pipeline_id=pid, seq=-1, digest=stored.seed_artifact, codec=codec, data=data,
                created_at=now,
            )  # fmt: skip
            self._commit.checkpoint(artifacts=[again], pipeline=row)
            value, digest_in = seed, stored.seed_artifact
        else:
            self._fail_unreadable(stored, problem, now)
            return None
        return Job(template, row, value, digest_in, carried)

    def _carried_attempts(self, pipeline_id: str) -> dict[int, AttemptRow]:
        found = (ok_attempt(t) for t in self._store.rows(RowKind.TASKS, pipeline_id=pipeline_id))
        return {a["seq"]: AttemptRow(**a) for a in found if a is not None}

    def _load(self, pipeline_id: str, seq: int) -> tuple[Any, str, str | None]:
        """``(value, digest, None)`` for the stored output of task ``seq`` (-1: the seed),
        or ``(None, "", why not)``."""
        what = "the seed" if seq < 0 else f"the output of task {seq}"
        stored = self._store.artifact(pipeline_id, seq)
        if stored is None:
            return None, "", f"{what} is missing"
        try:
            return self._codecs.decode(stored.codec, stored.data), stored.digest, None
        except CodecError as exc:
            return None, "", f"{what} does not decode: {exc}"

    def _fail_unreadable(self, stored: PipelineRow, problem: str, now: float) -> None:
        error = self._scrub.text(f"cannot resume: {problem}, and the seed is not in the input")
        row = stored.replaced(
            state=PipelineState.FAILED, run_id=self.run_id, updated_at=now, error=error
        )
        self._commit.checkpoint(pipeline=row)
        self.counters.pipelines[PipelineState.FAILED.value] += 1

    def _next_ordinal(self) -> int:
        self._ordinal += 1
        return self._ordinal


def _refuse_key_clash(specs: list[PipelineSpec]) -> None:
    """``ConfigError`` when two specs of one chunk give one key (and repeat) to different
    rows: found before any of the chunk is admitted, so a refused chunk leaves nothing of
    itself behind (a clash across chunks is found when the later one is admitted)."""
    seeds: dict[tuple[str, str, int], Any] = {}
    for spec in specs:
        if spec.key is None:
            continue
        name = (spec.template.name, spec.key, spec.repeat)
        if name in seeds and _differ(seeds[name], spec.seed):
            raise ConfigError(
                f"key {spec.key!r} names two different rows of the input",
                field="key",
                hint="keys must be unique per row (or per row and repeat)",
            )
        seeds.setdefault(name, spec.seed)


def _differ(a: Any, b: Any) -> bool:
    try:
        return bool(a != b)
    except Exception:  # a value that will not compare (an array): the store's check decides
        return False


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _each(specs: Iterable[Any], execution: Admission) -> Iterator[Any]:
    """The input, item by item; an exception from the user's iterable stops admission and
    is kept (``execution.input_error``) to be raised once the admitted pipelines ended."""
    iterator = iter(specs)
    count = 0
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except ConfigError:
            raise
        except Exception as exc:
            execution.input_error = exc
            return
        count += 1
        if not isinstance(item, PipelineSpec | PipelineTemplate):
            raise ConfigError(
                f"item {count} of the input is a {type(item).__name__}",
                field="specs",
                hint="pass template.map(rows), template.bind(seed) or a list of those",
            )
        yield item
