"""Pipelines: a named chain of tasks (a template), bound to seeds (specs).

``pipeline("judge", fetch, judge)`` (or ``fetch | judge``) is a :class:`PipelineTemplate`:
tasks in order, checked when it is built — not empty, task names unique (they identify a
pipeline's rows in the store), and annotated types that chain (see :func:`chains`).

``template.bind(seed)`` is one :class:`PipelineSpec`; ``template.map(rows)`` is a lazy
:class:`PipelineSpecs`, pulling one row at a time, so ten million rows from a generator are
never held in memory.

**Identity.** ``spec.prepare(codecs)`` encodes the seed and names the pipeline. A pipeline
is a row of the input through a *named* template, and stays one pipeline while its steps
are edited:

- without a key, ``pipeline_id`` is a digest of ``("pipeline", template name,
  seed_digest, repeat)``;
- with ``key``, a digest of ``("key", template name, key, repeat)``; the Runner refuses
  a key whose stored seed differs (a key names one input row).

Neither covers the tasks: editing a step keeps the pipeline, and the Runner reruns the
steps whose own fingerprint (or input) changed, taking the others from the store
(``pyattacker.run._reuse``). ``chain_digest`` (the task fingerprints in order, not the
name) is recorded with each pipeline to notice such edits. Renaming the template makes
other pipelines. Every digest input is a JSON array, which keeps ``("ab", "c")`` and
``("a", "bc")`` apart.
"""

from __future__ import annotations

import itertools
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pyattacker._checks import check_whole
from pyattacker.errors import CodecError, ConfigError
from pyattacker.run._codecs import CodecRegistry, artifact_digest, canonical_json, digest
from pyattacker.run._codecs import default_registry as _default_registry
from pyattacker.run._step import Step

if TYPE_CHECKING:
    from pyattacker.run._shard import Shard
    from pyattacker.run._task import (
        Task,
    )  # a task builds pipelines (task_a | task_b): the pipeline sees a Step

__all__ = [
    "PipelineSpec",
    "PipelineSpecs",
    "PipelineTemplate",
    "PreparedSpec",
    "chains",
    "pipeline",
]


class PipelineTemplate:
    """A named, checked chain of tasks; see :func:`pipeline` for the checks."""

    __slots__ = ("chain_digest", "name", "tasks")

    def __init__(self, name: str, tasks: Sequence[Task]) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"a pipeline name must be a non-empty str, got {name!r}", field="name"
            )
        self.name = name
        self.tasks: tuple[Task, ...] = tuple(tasks)
        _check_chain(name, self.tasks)
        self.chain_digest = digest(canonical_json(["chain", [t.fingerprint for t in self.tasks]]))

    def bind(self, seed: Any, *, key: str | None = None, repeat: int = 0) -> PipelineSpec:
        """One pipeline over ``seed``; ``key`` names it stably, ``repeat`` tells apart
        runs of the same seed (0, 1, ...). ``ConfigError`` for a non-str key or a negative
        repeat."""
        if key is not None and not isinstance(key, str):
            raise ConfigError(f"a key must be a str or None, got {type(key).__name__}", field="key")
        check_whole(repeat, "repeat", at_least=0)
        return PipelineSpec(self, seed, key, repeat)

    def map(
        self,
        rows: Iterable[Any],
        *,
        repeats: int = 1,
        key_of: Callable[[Any], str] | None = None,
        shard: Shard | None = None,
    ) -> PipelineSpecs:
        """``repeats`` specs per row, lazily; see :class:`PipelineSpecs`."""
        return PipelineSpecs(self, rows, repeats=repeats, key_of=key_of, shard=shard)

    def describe(self) -> dict[str, Any]:
        """Name, chain digest and each task's :meth:`Task.describe`, JSON-able."""
        return {
            "name": self.name,
            "chain_digest": self.chain_digest,
            "tasks": [t.describe() for t in self.tasks],
        }

    def missing_pool(self, pools: Iterable[str]) -> tuple[str, str] | None:
        """``(task name, pool)`` of the first task — or fanout branch, at any depth — that
        leases from a pool not in ``pools``; None when every pool it names is there."""
        known = set(pools)
        found = (t for t in _every_task(self.tasks) if t.resource not in (None, *known))
        first = next(found, None)
        return None if first is None or first.resource is None else (first.name, first.resource)

    def __or__(self, other: object) -> PipelineTemplate:
        if not isinstance(other, Step | PipelineTemplate):
            return NotImplemented
        return pipeline(f"{self.name}|{other.name}", self, cast("Task | PipelineTemplate", other))

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        names = " | ".join(t.name for t in self.tasks)
        return f"<PipelineTemplate {self.name!r}: {names} chain={self.chain_digest[:12]}>"


def pipeline(name: str, *tasks: Task | PipelineTemplate) -> PipelineTemplate:
    """A template of ``tasks`` in order; templates among them are flattened into it.

    Raises ``ConfigError`` when there is no task, when something is neither a task nor a
    template (a plain function: decorate it with ``@task``), when two tasks share a name,
    or when one task's annotated output cannot feed the next task's annotated input.
    """
    flat: list[Task] = []
    for position, item in enumerate(tasks, 1):
        if isinstance(item, PipelineTemplate):
            flat.extend(item.tasks)
        elif isinstance(item, Step):  # a task
            flat.append(item)
        else:
            raise ConfigError(
                f"item {position} of pipeline {name!r} is a {type(item).__name__}, not a task",
                field="tasks",
                hint="decorate functions with @pyattacker.task",
            )
    return PipelineTemplate(name, flat)


def _check_chain(name: str, tasks: tuple[Task, ...]) -> None:
    if not tasks:
        raise ConfigError(
            f"pipeline {name!r} has no tasks", field="tasks", hint="give it at least one"
        )
    seen: set[str] = set()
    for t in tasks:
        if t.name in seen:
            raise ConfigError(
                f"pipeline {name!r} has two tasks named {t.name!r}",
                field="tasks",
                hint="task names identify a pipeline's rows in the store: rename one "
                "(task(fn, name=...))",
            )
        seen.add(t.name)
    for before, after in itertools.pairwise(tasks):
        if not chains(before.output_type, after.input_type):
            raise ConfigError(
                f"task {before.name!r} returns {_show(before.output_type)} but the next "
                f"task {after.name!r} takes {_show(after.input_type)}",
                field=f"pipeline {name}",
                hint="fix the annotations, or annotate one side as Any",
            )


# ------------------------------------------------------------------------- type chaining

_UNIONS = (typing.Union, types.UnionType)
#: int is acceptable where float is, and both where complex is (PEP 484's numeric tower).
_PROMOTIONS = {(int, float), (int, complex), (float, complex)}


def chains(output: Any, input: Any) -> bool:
    """Whether a value annotated ``output`` may feed a parameter annotated ``input``.

    Lenient where it cannot tell: ``None`` (unannotated), ``Any``, type variables,
    ``Literal`` and other special forms pass. Otherwise: equal types; a subclass of the
    input; int into float; an input union with a member the output chains to; an output
    union whose every member chains; generics whose origins chain (``list[int]`` into
    ``list`` or ``Sequence``) and, when both give arguments, arguments that chain
    (``list[int]`` into ``list[str]`` fails).
    """
    if output is None or input is None or output is Any or input is Any or output == input:
        return True
    if typing.get_origin(input) in _UNIONS:
        return any(chains(output, member) for member in typing.get_args(input))
    if typing.get_origin(output) in _UNIONS:
        return all(chains(member, input) for member in typing.get_args(output))
    out_cls, in_cls = typing.get_origin(output) or output, typing.get_origin(input) or input
    if not (isinstance(out_cls, type) and isinstance(in_cls, type)):
        return True
    if (out_cls, in_cls) not in _PROMOTIONS and not _is_subclass(out_cls, in_cls):
        return False
    out_args, in_args = typing.get_args(output), typing.get_args(input)
    if out_args and in_args and len(out_args) == len(in_args):
        return all(chains(o, i) for o, i in zip(out_args, in_args, strict=True))
    return True


def _is_subclass(cls: type, parent: type) -> bool:
    try:
        return issubclass(cls, parent)
    except TypeError:
        return True  # a class that refuses issubclass (some protocols): cannot tell


def _show(hint: Any) -> str:
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


# --------------------------------------------------------------------------------- specs


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    """One pipeline to run: ``template`` over ``seed``, optionally named by ``key``.

    ``row`` is the 0-based index of the seed's row in its input (``template.map``), None
    for ``template.bind``; it is recorded with the pipeline, not part of its identity."""

    template: PipelineTemplate
    seed: Any
    key: str | None = None
    repeat: int = 0
    row: int | None = None

    def prepare(self, codecs: CodecRegistry | None = None) -> PreparedSpec:
        """Encode the seed (with ``codecs``, default the process-wide registry) and compute
        the digests and the ``pipeline_id``. ``CodecError`` if the seed cannot be stored."""
        registry = codecs if codecs is not None else _default_registry()
        try:
            codec, data = registry.encode(self.seed)
        except CodecError as exc:
            raise CodecError(
                f"the seed of pipeline {self.template.name!r} cannot be stored: {exc.message}",
                field="seed",
                hint=exc.context.get("hint"),
            ) from exc
        seed_digest = artifact_digest(codec, data)
        return PreparedSpec(
            spec=self,
            seed_codec=codec,
            seed_bytes=data,
            seed_digest=seed_digest,
            pipeline_id=self._pipeline_id(seed_digest),
        )

    def _pipeline_id(self, seed_digest: str) -> str:
        if self.key is not None:
            parts: list[Any] = ["key", self.template.name, self.key, self.repeat]
        else:
            parts = ["pipeline", self.template.name, seed_digest, self.repeat]
        return digest(canonical_json(parts))


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedSpec:
    """A spec with its seed encoded: what the Runner stores and looks pipelines up by.

    ``seed_digest`` is :func:`~pyattacker.run._codecs.artifact_digest` of the seed's
    codec and bytes, so it also serves as the seed artifact's address.
    """

    spec: PipelineSpec
    seed_codec: str
    seed_bytes: bytes
    seed_digest: str
    pipeline_id: str

    @property
    def chain_digest(self) -> str:
        return self.spec.template.chain_digest

    @property
    def template(self) -> PipelineTemplate:
        return self.spec.template


class PipelineSpecs:
    """``repeats`` specs per row of ``rows``, produced lazily, row-major.

    Iterating pulls one row from ``rows`` at a time and yields its specs (row 0 repeat 0,
    row 0 repeat 1, row 1 repeat 0, ...); nothing is read before iteration starts.
    Iterable again exactly when ``rows`` is (a list is, a generator is not).
    ``key_of(row)`` names each row's pipelines; a ``key_of`` that raises or returns a
    non-str raises ``ConfigError`` naming the row's ordinal (0-based), while iterating.
    Duplicate keys are not checked here: the Runner sees them as one pipeline.
    With ``shard``, only the specs whose ``pipeline_id`` falls in it (``run._shard``; the
    id is computed with the default codecs) are yielded.
    """

    __slots__ = ("key_of", "repeats", "rows", "shard", "template")

    def __init__(
        self,
        template: PipelineTemplate,
        rows: Iterable[Any],
        *,
        repeats: int = 1,
        key_of: Callable[[Any], str] | None = None,
        shard: Shard | None = None,
    ) -> None:
        if isinstance(rows, str | bytes) or not isinstance(rows, Iterable):
            raise ConfigError(
                f"rows must be an iterable of seeds, got a {type(rows).__name__}",
                field="rows",
                hint="pass a list, a generator or any iterable (wrap a single seed in a list)",
            )
        self.template = template
        self.rows = rows
        self.repeats = check_whole(repeats, "repeats", at_least=1)
        if key_of is not None and not callable(key_of):
            raise ConfigError("key_of must be a callable row -> str", field="key_of")
        self.key_of = key_of
        self.shard = shard

    def __iter__(self) -> Iterator[PipelineSpec]:
        # A source re-opened by a resume starts after the rows it already read.
        first = getattr(self.rows, "first_row", 0)
        for ordinal, row in enumerate(self.rows, first):
            key = None if self.key_of is None else self._key(row, ordinal)
            for repeat in range(self.repeats):
                spec = PipelineSpec(self.template, row, key, repeat, ordinal)
                if self.shard is None or self.shard.holds(spec.prepare().pipeline_id):
                    yield spec

    def _key(self, row: Any, ordinal: int) -> str:
        assert self.key_of is not None
        try:
            key = self.key_of(row)
        except Exception as exc:
            raise ConfigError(
                f"key_of failed on row {ordinal}: {type(exc).__name__}: {exc}", field="key_of"
            ) from exc
        if not isinstance(key, str):
            raise ConfigError(
                f"key_of returned a {type(key).__name__} for row {ordinal}, not a str",
                field="key_of",
                hint="return a str, e.g. str(row['id'])",
            )
        return key

    @property
    def total(self) -> int | None:
        """How many specs iteration will yield, when ``rows`` knows its length (not known
        for a shard)."""
        if self.shard is not None and self.shard.count > 1:
            return None
        return len(self.rows) * self.repeats if isinstance(self.rows, Sized) else None

    def __length_hint__(self) -> int:
        total = self.total
        return NotImplemented if total is None else total

    def __repr__(self) -> str:
        size = "?" if self.total is None else self.total
        return f"<PipelineSpecs {self.template.name!r} x{self.repeats} total={size}>"


def _every_task(tasks: Iterable[Task]) -> Iterator[Task]:
    """``tasks`` and, depth first, the branches of every fanout among them."""
    for task in tasks:
        yield task
        yield from _every_task(getattr(task, "tasks", ()))
