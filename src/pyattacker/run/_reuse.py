"""Step reuse: an edited pipeline reruns only the steps that changed.

A pipeline is one row of the input through a named template (``_pipeline``), so editing a
step keeps it one pipeline. When the Runner meets a stored pipeline whose recorded chain
differs from the template's (or on a fresh run), it decides how many leading steps to take
from the store (:func:`reusable_steps`): step ``k`` is reused when its stored task row
succeeded with the same fingerprint (name, code, factory parameters, retry, algorithm,
resource, config, version) and the same input digest as now, and every step before it was
reused. The first step that differs, and every step after it, run again.

Their old task rows, outputs included, move to the ``task_history`` table in the same
transaction that moves the pipeline's cursor back (``Superseded``): history keeps which
version of each step produced what, and nothing is overwritten. A pipeline whose chain is
unchanged costs nothing here: this is admission work, once per edited pipeline.

Also here, because they decide what a resume may touch: the refusal of a store that holds
pipelines of other templates (:func:`check_known`), and the attempt numbers a resumed
step continues after (``Store.last_attempts``, one query per admitted chunk).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pyattacker.clock import epoch_time
from pyattacker.errors import ConfigError
from pyattacker.run._commit import Committer
from pyattacker.run._pipeline import PipelineSpec, PipelineSpecs, PipelineTemplate
from pyattacker.run._records import Recorder
from pyattacker.run._task import Task
from pyattacker.store import PipelineRow, PipelineState, RowKind, Store, Superseded

__all__ = ["StepReuse", "check_known", "known_names", "reusable_steps"]


def reusable_steps(
    tasks: Sequence[Task], stored: Iterable[Mapping[str, Any]], seed: str, *, limit: int
) -> int:
    """How many leading steps of ``tasks`` a pipeline may take from the store.

    ``stored`` are its task rows (``Store.rows("tasks")`` dicts), ``seed`` the digest of
    its seed artifact (the first step's input), ``limit`` its cursor (steps committed).
    Step ``k`` is reusable when every step before it is, and its stored row ``succeeded``
    with ``task_digest`` equal to ``tasks[k].fingerprint`` and ``input_artifact`` equal
    to the output of step ``k - 1`` (``seed`` for the first).
    """
    by_seq = {int(row["seq"]): row for row in stored}
    expected = seed
    for k, task in enumerate(tasks[: max(0, limit)]):
        row = by_seq.get(k)
        if (
            row is None
            or row["state"] != "succeeded"
            or row["task_digest"] != task.fingerprint
            or row["input_artifact"] != expected
            or row["output_artifact"] is None
        ):
            return k
        expected = row["output_artifact"]
    return min(max(0, limit), len(tasks))


def known_names(specs: Any) -> set[str] | None:
    """The template names of ``specs`` when they can be known without reading the input
    (a template, a spec, ``template.map(rows)``, or a list or tuple of those); None for a
    lazy iterable, whose templates are checked as admission meets them."""
    one = template_of(specs)
    if one is not None:
        return {one.name}
    if isinstance(specs, list | tuple):
        found = [template_of(item) for item in specs]
        if all(t is not None for t in found):
            return {t.name for t in found if t is not None}
    return None


def template_of(item: Any) -> PipelineTemplate | None:
    """The template of a template, a spec or ``template.map(rows)``; else None."""
    if isinstance(item, PipelineTemplate):
        return item
    if isinstance(item, PipelineSpec | PipelineSpecs):
        return item.template
    return None


def check_known(names: Collection[str], held: Collection[str], location: str) -> None:
    """Refuse (``ConfigError``, field ``add_pipeline``) a template name that a store
    holding pipelines of other templates does not hold: two workloads never mix by
    accident. ``held`` empty (a new store) refuses nothing."""
    if not held:
        return
    other = sorted(set(names) - set(held))
    if other:
        stored = ", ".join(repr(name) for name in sorted(held))
        raise ConfigError(
            f"the store {location} holds pipelines of {stored}, not of {other[0]!r}",
            field="add_pipeline",
            hint="pass add_pipeline=True (CLI: --add-pipeline) to add this pipeline to the "
            "store, or use another store; nothing was written",
        )


class StepReuse:
    """Which stored pipelines a run plans again, and from which step (see the module
    docstring); an ``Admission`` has one. ``fresh`` reruns every step of the pipelines
    met. ``held_templates``: on resume, the template names the store held when the run
    began, another template being refused (see check_known); None: no such check (not a
    resume, or add_pipeline)."""

    def __init__(
        self,
        *,
        run_id: str,
        store: Store,
        committer: Committer,
        records: Recorder,
        fresh: bool,
        held_templates: frozenset[str] | None,
    ) -> None:
        self.run_id = run_id
        self._store = store
        self._commit = committer
        self._records = records
        self.fresh = fresh
        self.held_templates = held_templates

    def check_held(self, template: PipelineTemplate) -> None:
        """On resume, a template the store does not hold is refused (see check_known)."""
        if self.held_templates is not None:
            check_known((template.name,), self.held_templates, self._store.location)

    def revisits(self, template: PipelineTemplate, stored: PipelineRow) -> bool:
        """Whether ``stored`` must be planned again rather than continued: its chain was
        edited, or the run is fresh; never twice in one run."""
        if stored.run_id == self.run_id:
            return False
        return self.fresh or stored.chain_digest != template.chain_digest

    def replan(
        self, template: PipelineTemplate, stored: PipelineRow, readable: Callable[[int], bool]
    ) -> PipelineRow:
        """``stored`` planned again: its cursor back at its first changed step (the first
        step when fresh, or when the checkpoint before that step is not ``readable``); its
        superseded task rows move to the history with the new cursor, in one transaction,
        and a ``pipeline.rerun`` event says what was reused."""
        pid = stored.pipeline_id
        old = list(self._store.rows(RowKind.TASKS, pipeline_id=pid))
        keep = 0
        if not self.fresh:
            keep = reusable_steps(template.tasks, old, stored.seed_artifact, limit=stored.cursor)
        if keep and not readable(keep - 1):
            keep = 0  # that checkpoint cannot be read: rerun it all, from the seed
        if any(int(row["seq"]) >= keep for row in old):
            moved = Superseded(pipeline_id=pid, from_seq=keep, run_id=self.run_id, at=epoch_time())
            self._commit.supersede(moved)
        output = next((r["output_artifact"] for r in old if r["seq"] == keep - 1), None)
        done = keep >= len(template.tasks)
        edited = stored.replaced(
            chain_digest=template.chain_digest,
            ntasks=len(template.tasks),
            cursor=keep,
            state=PipelineState.SUCCEEDED if done else stored.state,
            output_artifact=output if done else None,
        )
        rerun = None if done else template.tasks[keep].name
        data = {"reused": keep, "rerun_from": rerun, "fresh": self.fresh}
        self._records.event(
            "pipeline.rerun", pid, keep, {**data, "chain_before": stored.chain_digest}
        )
        return edited

    def stale(self, template: PipelineTemplate) -> Iterator[list[PipelineRow]]:
        """On resume, the store's pipelines of ``template`` (by name) that are unfinished,
        were edited, or (fresh) every one of them, a chunk at a time."""
        chain = None if self.fresh else template.chain_digest
        return _chunks(self._store.stale(template.name, chain), 64)

    def prior_attempts(
        self, specs: Sequence[PipelineSpec], prepared: Sequence[Any], stored: Mapping[str, Any]
    ) -> dict[str, dict[int, int]]:
        """The attempt numbers recorded for the ``stored`` pipelines of a chunk that will
        run again (unfinished, edited, or fresh): one query, none if there are none."""
        again = [
            p.pipeline_id
            for spec, p in zip(specs, prepared, strict=True)
            if (row := stored.get(p.pipeline_id)) is not None
            and (row.state is not PipelineState.SUCCEEDED or self.revisits(spec.template, row))
        ]
        return self._store.last_attempts(again) if again else {}


def _chunks(rows: Iterator[PipelineRow], size: int) -> Iterator[list[PipelineRow]]:
    chunk: list[PipelineRow] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
