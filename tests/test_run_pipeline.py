"""Pipelines: templates are checked when built, specs are lazy, and ids mean identity."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import CodecError, ConfigError
from pyattacker.run._codecs import CodecRegistry, artifact_digest, canonical_json
from pyattacker.run._pipeline import (
    PipelineSpec,
    PipelineSpecs,
    PipelineTemplate,
    chains,
    pipeline,
)
from pyattacker.run._task import Task, task


def step(name: str, add: int = 1) -> Task:
    return task(lambda v: v + add, name=name)


@task
def fetch(value: int) -> str:
    return str(value)


@task
def judge(value: str) -> dict[str, Any]:
    return {"text": value}


def judge_v1(value: str) -> dict[str, Any]:
    # first version
    return {"text": value}


def judge_v1_recommented(value: str) -> dict[str, Any]:
    """Now with a docstring."""
    # the comment was rewritten
    return {"text": value}


def judge_v2(value: str) -> dict[str, Any]:
    return {"text": value.strip()}


def chain_with(fn: Any) -> PipelineTemplate:
    return pipeline("eval", fetch, task(fn, name="judge"))


# ------------------------------------------------------------------------------ building


def test_pipeline_keeps_the_order_and_flattens_templates() -> None:
    a, b, c = step("a"), step("b"), step("c")
    built = pipeline("abc", a, pipeline("bc", b, c))
    assert built.name == "abc"
    assert built.tasks == (a, b, c)
    assert len(built) == 3


def test_an_empty_pipeline_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no tasks"):
        pipeline("empty")


def test_a_plain_function_in_a_pipeline_is_a_config_error_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="item 2 of pipeline 'p' is a function") as caught:
        pipeline("p", step("a"), lambda v: v)  # type: ignore[arg-type]
    assert "@pyattacker.task" in str(caught.value)


def test_two_tasks_with_one_name_in_a_chain_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="two tasks named 'a'"):
        pipeline("p", step("a"), step("b"), step("a", 2))


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_pipeline_needs_a_name(name: Any) -> None:
    with pytest.raises(ConfigError, match="pipeline name"):
        pipeline(name, step("a"))


def test_or_extends_a_template() -> None:
    built = pipeline("ab", step("a"), step("b")) | step("c")
    assert built.name == "ab|c"
    assert [t.name for t in built.tasks] == ["a", "b", "c"]


def test_describe_lists_the_tasks_and_the_chain_digest() -> None:
    built = fetch | judge
    described = built.describe()
    assert described["chain_digest"] == built.chain_digest
    assert [t["name"] for t in described["tasks"]] == ["fetch", "judge"]


# ------------------------------------------------------------------------- type chaining


class Base:
    pass


class Derived(Base):
    pass


@pytest.mark.parametrize(
    ("output", "input"),
    [
        (int, int),
        (bool, int),
        (int, float),
        (Derived, Base),
        (int, Optional[int]),  # noqa: UP045 - the typing spelling must work too
        (int, int | None),
        (str, int | str),
        (list[int], list),
        (list[int], Sequence[int]),
        (dict[str, Any], Mapping[str, Any]),
        (dict[str, Any], dict),
        (list, list[int]),
        (Any, str),
        (str, Any),
        (None, int),
        (int, None),
    ],
)
def test_types_that_chain(output: Any, input: Any) -> None:
    assert chains(output, input)


@pytest.mark.parametrize(
    ("output", "input"),
    [
        (int, str),
        (Base, Derived),
        (float, int),
        (int | None, int),
        (list[int], list[str]),
        (list[int], dict),
        (dict[str, Any], list[Any]),
    ],
)
def test_types_that_do_not_chain(output: Any, input: Any) -> None:
    assert not chains(output, input)


def test_a_type_mismatch_names_both_tasks_and_both_types() -> None:
    @task
    def count(value: str) -> int:
        return len(value)

    @task
    def shout(value: str) -> str:
        return value.upper()

    with pytest.raises(ConfigError) as caught:
        pipeline("p", count, shout)
    message = str(caught.value)
    assert "'count' returns int" in message
    assert "'shout' takes str" in message


def test_unannotated_tasks_chain_with_anything() -> None:
    assert pipeline("p", fetch, step("free"), judge).tasks[1].name == "free"


# ---------------------------------------------------------------------------- identity


def test_renaming_a_template_keeps_its_chain_digest() -> None:
    assert pipeline("a", fetch, judge).chain_digest == pipeline("b", fetch, judge).chain_digest


def test_the_order_of_tasks_is_part_of_the_chain_digest() -> None:
    a, b = step("a"), step("b")
    assert pipeline("p", a, b).chain_digest != pipeline("p", b, a).chain_digest


def test_editing_a_comment_keeps_the_pipeline_id() -> None:
    before = chain_with(judge_v1).bind(7).prepare()
    after = chain_with(judge_v1_recommented).bind(7).prepare()
    assert before.pipeline_id == after.pipeline_id


def test_changing_a_task_body_keeps_the_pipeline_id_and_changes_the_chain_digest() -> None:
    # A pipeline is a row through a named template: an edited step reruns in it.
    before = chain_with(judge_v1).bind(7).prepare()
    after = chain_with(judge_v2).bind(7).prepare()
    assert before.pipeline_id == after.pipeline_id
    assert before.chain_digest != after.chain_digest  # what the Runner notices the edit by


def test_renaming_a_template_makes_other_pipelines() -> None:
    one = pipeline("a", fetch, judge).bind(7).prepare()
    two = pipeline("b", fetch, judge).bind(7).prepare()
    assert one.pipeline_id != two.pipeline_id


def test_changing_the_seed_or_the_repeat_makes_a_new_pipeline_id() -> None:
    template = chain_with(judge_v1)
    ids = {template.bind(seed, repeat=r).prepare().pipeline_id for seed in (1, 2) for r in (0, 1)}
    assert len(ids) == 4


def test_equal_seeds_give_one_pipeline_id_whatever_the_dict_order() -> None:
    template = chain_with(judge_v1)
    one = template.bind({"a": 1, "b": 2}).prepare()
    two = template.bind({"b": 2, "a": 1}).prepare()
    assert one.pipeline_id == two.pipeline_id
    assert one.seed_digest == two.seed_digest


def test_prepare_encodes_the_seed_and_exposes_the_digests() -> None:
    template = chain_with(judge_v1)
    prepared = template.bind({"q": "hi"}).prepare(CodecRegistry())
    assert (prepared.seed_codec, prepared.seed_bytes) == ("json", b'{"q":"hi"}')
    assert prepared.seed_digest == artifact_digest("json", b'{"q":"hi"}')
    assert prepared.chain_digest == template.chain_digest
    assert prepared.template is template
    assert len(prepared.pipeline_id) == 32


def test_a_bytes_seed_and_its_json_look_alike_are_two_pipelines() -> None:
    template = chain_with(judge_v1)
    assert template.bind(b"1").prepare().pipeline_id != template.bind(1).prepare().pipeline_id


def test_a_keyed_pipeline_id_survives_code_and_seed_changes() -> None:
    before = chain_with(judge_v1).bind(7, key="row-7").prepare()
    after = chain_with(judge_v2).bind(8, key="row-7").prepare()
    assert before.pipeline_id == after.pipeline_id
    assert before.chain_digest != after.chain_digest  # an edit: the Runner reruns it
    assert before.seed_digest != after.seed_digest  # another row: the Runner refuses it


def test_a_keyed_pipeline_id_depends_on_template_name_key_and_repeat() -> None:
    a = pipeline("ab", fetch, judge)
    ids = {
        a.bind(1, key="c").prepare().pipeline_id,
        pipeline("a", fetch, judge).bind(1, key="bc").prepare().pipeline_id,
        a.bind(1, key="c", repeat=1).prepare().pipeline_id,
        a.bind(1, key="d").prepare().pipeline_id,
        a.bind(1).prepare().pipeline_id,
    }
    assert len(ids) == 5


def test_a_seed_no_codec_can_store_is_a_codec_error_naming_the_pipeline() -> None:
    with pytest.raises(CodecError, match="seed of pipeline 'eval'"):
        chain_with(judge_v1).bind(object()).prepare()


def test_prepare_uses_the_given_registry() -> None:
    class Tagged:
        name = "tagged"

        def handles(self, value: Any) -> bool:
            return isinstance(value, set)

        def encode(self, value: Any) -> bytes:
            return ",".join(sorted(value)).encode()

        def decode(self, data: bytes) -> Any:
            return set(data.decode().split(","))

    codecs = CodecRegistry()
    codecs.register(Tagged())
    prepared = chain_with(judge_v1).bind({"b", "a"}).prepare(codecs)
    assert (prepared.seed_codec, prepared.seed_bytes) == ("tagged", b"a,b")


@pytest.mark.parametrize(("key", "repeat"), [(3, 0), (None, -1), (None, 1.5)])
def test_bind_refuses_a_non_str_key_and_a_bad_repeat(key: Any, repeat: Any) -> None:
    with pytest.raises(ConfigError):
        chain_with(judge_v1).bind(1, key=key, repeat=repeat)


seeds = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "b", ""]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from("xyz"), children, max_size=3)
    ),
    max_leaves=8,
)


@given(seeds, seeds)
def test_two_seeds_share_a_pipeline_id_exactly_when_they_encode_alike(a: Any, b: Any) -> None:
    template = pipeline("p", fetch, judge)
    same_id = template.bind(a).prepare().pipeline_id == template.bind(b).prepare().pipeline_id
    assert same_id == (canonical_json(a) == canonical_json(b))


# ---------------------------------------------------------------------------------- map


@given(st.lists(st.integers(), max_size=5), st.integers(1, 4))
def test_map_is_every_row_times_every_repeat_in_row_major_order(
    rows: list[int], repeats: int
) -> None:
    specs = pipeline("p", fetch).map(rows, repeats=repeats)
    assert [(s.seed, s.repeat) for s in specs] == [(r, k) for r in rows for k in range(repeats)]


def test_map_yields_repeats_per_row_row_major() -> None:
    specs = list(chain_with(judge_v1).map(["a", "b"], repeats=2))
    assert [(s.seed, s.repeat) for s in specs] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert all(isinstance(s, PipelineSpec) and s.key is None for s in specs)


def test_map_pulls_rows_lazily() -> None:
    pulled: list[int] = []

    def rows() -> Iterator[int]:
        for n in range(100):
            pulled.append(n)
            yield n

    specs = chain_with(judge_v1).map(rows(), repeats=2)
    assert pulled == []
    iterator = iter(specs)
    assert next(iterator).seed == 0
    assert pulled == [0]
    assert next(iterator).seed == 0
    assert pulled == [0]
    assert next(iterator).seed == 1
    assert pulled == [0, 1]


def test_a_ten_million_row_generator_is_not_materialised() -> None:
    pulled = itertools.count()
    rows = (next(pulled) for _ in range(10_000_000))
    specs = chain_with(judge_v1).map(rows)
    first = list(itertools.islice(specs, 3))
    assert [s.seed for s in first] == [0, 1, 2]
    assert next(pulled) == 3
    assert specs.total is None


def test_map_over_a_list_can_be_iterated_again_and_knows_its_size() -> None:
    specs = chain_with(judge_v1).map([1, 2, 3], repeats=2)
    assert list(specs) == list(specs)
    assert specs.total == 6
    assert len(list(specs)) == 6
    assert "total=6" in repr(specs)


def test_map_over_a_generator_is_iterated_once() -> None:
    specs = chain_with(judge_v1).map(n for n in range(3))
    assert len(list(specs)) == 3
    assert list(specs) == []


@pytest.mark.parametrize("repeats", [0, -1, 1.5, True])
def test_fewer_than_one_repeat_is_a_config_error(repeats: Any) -> None:
    with pytest.raises(ConfigError, match="repeats"):
        chain_with(judge_v1).map([1], repeats=repeats)


@pytest.mark.parametrize("rows", ["abc", b"abc", 3])
def test_rows_must_be_an_iterable_of_seeds(rows: Any) -> None:
    with pytest.raises(ConfigError, match="rows"):
        chain_with(judge_v1).map(rows)


def test_key_of_names_each_rows_pipelines() -> None:
    specs = list(chain_with(judge_v1).map([{"id": 1}, {"id": 2}], key_of=lambda r: f"r{r['id']}"))
    assert [s.key for s in specs] == ["r1", "r2"]


def test_a_key_of_returning_a_non_str_fails_while_iterating_naming_the_row() -> None:
    specs = chain_with(judge_v1).map([{"id": 1}, {"id": 2}], key_of=lambda r: r["id"])
    iterator = iter(specs)
    with pytest.raises(ConfigError, match="returned a int for row 0"):
        next(iterator)


def test_a_key_of_that_raises_fails_while_iterating_naming_the_row() -> None:
    specs = chain_with(judge_v1).map([{"id": 1}, {}], key_of=lambda r: str(r["id"]))
    iterator = iter(specs)
    assert next(iterator).key == "1"
    with pytest.raises(ConfigError, match="key_of failed on row 1: KeyError") as caught:
        next(iterator)
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_non_callable_key_of_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="key_of"):
        PipelineSpecs(chain_with(judge_v1), [1], key_of="id")  # type: ignore[arg-type]
