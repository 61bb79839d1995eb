"""Codecs: artifacts become canonical bytes and come back equal, or fail loudly."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyattacker.errors import CodecError, ConfigError, ErrorClass, error_class_of
from pyattacker.run._codecs import (
    DEFAULT_CODECS,
    Codec,
    CodecRegistry,
    artifact_digest,
    canonical_json,
    default_registry,
    digest,
    is_jsonable,
    register_codec,
)

# -------------------------------------------------------------------------------- values

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Leaf:
    n: int
    label: str
    score: float | None = None


@dataclasses.dataclass
class Tree:
    name: str
    leaves: list[Leaf]
    by_name: dict[str, Leaf]
    pair: tuple[int, str]
    best: Leaf | None
    tags: frozenset[str]
    color: Color
    extra: Any = None


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


leaves = st.builds(
    Leaf,
    n=st.integers(),
    label=st.text(max_size=8),
    score=st.none() | st.floats(allow_nan=False, allow_infinity=False),
)
trees = st.builds(
    Tree,
    name=st.text(max_size=8),
    leaves=st.lists(leaves, max_size=3),
    by_name=st.dictionaries(st.text(max_size=4), leaves, max_size=3),
    pair=st.tuples(st.integers(), st.text(max_size=4)),
    best=st.none() | leaves,
    tags=st.frozensets(st.text(max_size=4), max_size=4),
    color=st.sampled_from(Color),
    extra=json_values,
)
nodes: st.SearchStrategy[Node] = st.deferred(
    lambda: st.builds(Node, value=st.integers(), children=st.lists(nodes, max_size=3))
)


def round_trip(value: Any, registry: CodecRegistry | None = None) -> Any:
    codecs = registry or CodecRegistry()
    name, data = codecs.encode(value)
    return codecs.decode(name, data)


# ---------------------------------------------------------------------------------- json


@given(json_values)
def test_the_json_codec_round_trips_arbitrary_json_values(value: Any) -> None:
    assert CodecRegistry().encode(value)[0] == "json"
    assert round_trip(value) == value


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6))
def test_equal_dicts_have_equal_digests_whatever_the_insertion_order(value: dict[str, Any]) -> None:
    backwards = dict(reversed(list(value.items())))
    codecs = CodecRegistry()
    assert digest(codecs.encode(value)[1]) == digest(codecs.encode(backwards)[1])


def test_json_is_canonical_sorted_compact_and_utf8() -> None:
    assert CodecRegistry().encode({"b": 1, "a": ["é", 2.5]}) == (
        "json",
        '{"a":["é",2.5],"b":1}'.encode(),
    )


def test_tuples_come_back_as_lists() -> None:
    assert round_trip({"pair": (1, 2)}) == {"pair": [1, 2]}


def test_a_lone_surrogate_in_a_string_round_trips() -> None:
    assert round_trip("a\ud800b") == "a\ud800b"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (float("nan"), "nan"),
        ({"x": [float("inf")]}, "value['x'][0]"),
        ({1: "a"}, "int key 1"),
        ({"s": {1, 2}}, "value['s'] is a set"),
    ],
)
def test_json_refuses_what_it_would_change_and_says_where(value: Any, words: str) -> None:
    with pytest.raises(CodecError, match="cannot store as JSON") as caught:
        CodecRegistry().encode(value)
    assert words in str(caught.value)
    assert not is_jsonable(value)


def test_a_value_that_contains_itself_is_a_codec_error_not_a_crash() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(CodecError, match="nested deeper"):
        CodecRegistry().encode(loop)


def test_a_value_no_codec_handles_names_its_type_and_the_fix() -> None:
    with pytest.raises(CodecError) as caught:
        CodecRegistry().encode(object())
    message = str(caught.value)
    assert "object" in message
    assert "register a codec with pyattacker.register_codec" in message


def test_codec_errors_are_fatal_so_they_are_never_retried() -> None:
    with pytest.raises(CodecError) as caught:
        CodecRegistry().encode(object())
    assert error_class_of(caught.value) is ErrorClass.FATAL


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe", b""])
def test_undecodable_json_bytes_are_a_codec_error(data: bytes) -> None:
    with pytest.raises(CodecError):
        CodecRegistry().decode("json", data)


# --------------------------------------------------------------------------------- bytes


def test_bytes_are_stored_as_they_are_and_bytearray_comes_back_as_bytes() -> None:
    codecs = CodecRegistry()
    assert codecs.encode(b"\x00raw") == ("bytes", b"\x00raw")
    assert codecs.encode(bytearray(b"ab")) == ("bytes", b"ab")
    assert codecs.decode("bytes", b"ab") == b"ab"


# ----------------------------------------------------------------------------- dataclass


@given(trees)
def test_the_dataclass_codec_round_trips_nested_dataclasses(tree: Tree) -> None:
    assert CodecRegistry().encode(tree)[0] == "dataclass"
    assert round_trip(tree) == tree


@given(nodes)
def test_recursive_dataclasses_round_trip(node: Node) -> None:
    assert round_trip(node) == node


def test_a_dataclass_is_stored_with_its_importable_type_name() -> None:
    doc = json.loads(CodecRegistry().encode(Leaf(1, "a"))[1])
    assert doc == {"type": f"{__name__}:Leaf", "value": {"n": 1, "label": "a", "score": None}}


def test_equal_sets_inside_a_dataclass_give_equal_bytes() -> None:
    tree = Tree("t", [], {}, (1, "a"), None, frozenset({"x", "y", "z"}), Color.RED)
    again = dataclasses.replace(tree, tags=frozenset(["z", "y", "x"]))
    assert CodecRegistry().encode(tree) == CodecRegistry().encode(again)


def test_a_dataclass_defined_inside_a_function_is_refused_when_encoding() -> None:
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(CodecError, match="cannot be imported") as caught:
        CodecRegistry().encode(Local(1))
    assert "module level" in str(caught.value)


def test_a_dataclass_that_cannot_be_imported_any_more_is_a_codec_error() -> None:
    data = canonical_json({"type": "no_such_module_anywhere:Gone", "value": {}})
    with pytest.raises(CodecError, match="cannot be imported any more"):
        CodecRegistry().decode("dataclass", data)


def test_stored_fields_the_class_no_longer_has_are_a_codec_error() -> None:
    data = canonical_json({"type": f"{__name__}:Leaf", "value": {"n": 1, "renamed": "a"}})
    with pytest.raises(CodecError, match="cannot rebuild Leaf"):
        CodecRegistry().decode("dataclass", data)


def test_an_enum_value_that_no_longer_exists_is_a_codec_error() -> None:
    tree = Tree("t", [], {}, (1, "a"), None, frozenset(), Color.RED)
    doc = json.loads(CodecRegistry().encode(tree)[1])
    doc["value"]["color"] = "green"
    with pytest.raises(CodecError, match="no longer a Color"):
        CodecRegistry().decode("dataclass", canonical_json(doc))


def test_a_nan_in_a_dataclass_field_is_refused_naming_the_field() -> None:
    with pytest.raises(CodecError, match=r"value\.score is nan"):
        CodecRegistry().encode(Leaf(1, "a", float("nan")))


def test_a_dataclass_field_holding_an_unstorable_value_names_the_field() -> None:
    with pytest.raises(CodecError, match=r"value\.extra"):
        CodecRegistry().encode(Tree("t", [], {}, (1, "a"), None, frozenset(), Color.RED, object()))


# ------------------------------------------------------------------------------ registry


class Upper:
    """A user codec for ``str`` values: proves user codecs come before the built-ins."""

    name = "upper"

    def handles(self, value: Any) -> bool:
        return isinstance(value, str)

    def encode(self, value: Any) -> bytes:
        return str(value).upper().encode()

    def decode(self, data: bytes) -> Any:
        return data.decode().lower()


class Broken(Upper):
    name = "broken"

    def encode(self, value: Any) -> bytes:
        raise RuntimeError("boom")


class Stringy(Upper):
    name = "stringy"

    def encode(self, value: Any) -> bytes:
        return "not bytes"  # type: ignore[return-value]


def test_user_codecs_are_tried_before_the_built_ins() -> None:
    codecs = CodecRegistry()
    codecs.register(Upper())
    assert codecs.encode("abc") == ("upper", b"ABC")
    assert codecs.decode("upper", b"ABC") == "abc"
    assert codecs.encode(1) == ("json", b"1")
    assert [c.name for c in codecs.codecs] == ["upper", "bytes", "dataclass", "json"]


def test_a_user_codec_that_raises_is_wrapped_in_a_codec_error() -> None:
    codecs = CodecRegistry()
    codecs.register(Broken())
    with pytest.raises(CodecError, match="'broken' could not encode: boom") as caught:
        codecs.encode("x")
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_user_codec_that_returns_something_else_than_bytes_is_a_codec_error() -> None:
    codecs = CodecRegistry()
    codecs.register(Stringy())
    with pytest.raises(CodecError, match="not bytes"):
        codecs.encode("x")


@pytest.mark.parametrize("codec", [Upper, object(), type("Named", (Upper,), {"name": "json"})()])
def test_registering_a_class_a_non_codec_or_a_built_in_name_is_a_config_error(
    codec: Any,
) -> None:
    with pytest.raises(ConfigError):
        CodecRegistry().register(codec)


def test_an_unknown_codec_name_is_a_codec_error_with_the_fix() -> None:
    with pytest.raises(CodecError, match="no codec named 'pickle'") as caught:
        CodecRegistry().decode("pickle", b"")
    assert "register_codec" in str(caught.value)


def test_a_copy_does_not_see_later_registrations() -> None:
    codecs = CodecRegistry()
    twin = codecs.copy()
    codecs.register(Upper())
    assert "upper" in codecs
    assert "upper" not in twin


def test_register_codec_adds_to_the_process_wide_registry() -> None:
    class OnlySentinels:
        name = "test-only-sentinels"  # handles nothing anyone else stores

        def handles(self, value: Any) -> bool:
            return value is OnlySentinels

        def encode(self, value: Any) -> bytes:
            return b""

        def decode(self, data: bytes) -> Any:
            return OnlySentinels

    codec = register_codec(OnlySentinels())
    assert isinstance(codec, Codec)
    assert default_registry() is DEFAULT_CODECS
    assert DEFAULT_CODECS.encode(OnlySentinels) == ("test-only-sentinels", b"")


# -------------------------------------------------------------------------------- digest


def test_digest_is_blake2b_128_in_hex() -> None:
    assert digest(b"abc") == hashlib.blake2b(b"abc", digest_size=16).hexdigest()
    assert len(digest(b"")) == 32


def test_the_same_bytes_under_two_codecs_have_two_artifact_digests() -> None:
    as_bytes = CodecRegistry().encode(b'"a"')
    as_json = CodecRegistry().encode("a")
    assert as_bytes[1] == as_json[1]
    assert artifact_digest(*as_bytes) != artifact_digest(*as_json)
