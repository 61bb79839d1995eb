"""Targets files: JSON Lines and the text format read into mix lines; every bad line is
refused naming the file, the line and the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyattacker.attack import METHODS, MixLine, read_targets
from pyattacker.errors import ConfigError

segment = st.from_regex(r"[a-z0-9_{}-]{1,8}", fullmatch=True)
paths = st.lists(segment, min_size=0, max_size=3).map(lambda parts: "/" + "/".join(parts))
header_names = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,10}", fullmatch=True)
header_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
lines = st.fixed_dictionaries(
    {"url": paths},
    optional={
        "method": st.sampled_from(METHODS),
        "headers": st.dictionaries(header_names, header_values, max_size=3),
        "body": st.one_of(st.text(max_size=20), st.dictionaries(segment, st.integers())),
        "weight": st.one_of(st.integers(1, 1000), st.floats(0.001, 1e6)),
        "name": st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                        max_size=20),
    },
)  # fmt: skip


def expected(obj: dict[str, Any], where: str) -> MixLine:
    body = obj.get("body")
    headers = tuple((k, v.strip()) for k, v in obj.get("headers", {}).items())
    typed = any(k.lower() == "content-type" for k, _ in headers)
    if body is not None and not isinstance(body, str) and not typed:  # sent as JSON, typed so
        headers += (("Content-Type", "application/json"),)
    return MixLine(
        url=obj["url"],
        method=obj.get("method"),
        headers=headers,
        body=None
        if body is None
        else body.encode()
        if isinstance(body, str)
        else json.dumps(body, separators=(",", ":")).encode(),
        weight=float(obj.get("weight", 1)),
        name=obj.get("name"),
        where=where,
    )


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(st.lists(lines, min_size=1, max_size=6))
def test_every_valid_jsonl_line_reads_back_as_the_request_it_describes(
    tmp_path: Path, objects: list[dict[str, Any]]
) -> None:
    path = tmp_path / "targets.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in objects) + "\n")
    read = read_targets(str(path))
    assert read == tuple(expected(o, f"{path} line {i}") for i, o in enumerate(objects, 1))


def test_the_text_format_reads_methods_urls_headers_bodies_names_and_weights(
    tmp_path: Path,
) -> None:
    (tmp_path / "order.json").write_text('{"item": 7}')
    path = tmp_path / "targets.txt"
    path.write_text(
        "# the home page\nGET http://127.0.0.1:8080/\n\n"
        "# name: order\n# weight: 2.5\nPOST /orders\nContent-Type: application/json\n"
        "@order.json\n"
    )
    first, second = read_targets(str(path))
    assert (first.method, first.url, first.weight, first.name) == (
        "GET", "http://127.0.0.1:8080/", 1.0, None,
    )  # fmt: skip
    assert (second.method, second.url, second.name, second.weight) == (
        "POST", "/orders", "order", 2.5,
    )  # fmt: skip
    assert second.headers == (("Content-Type", "application/json"),)
    assert second.body == b'{"item": 7}'
    assert second.where == f"{path} line 6"


def as_text(obj: dict[str, Any]) -> str:
    """``obj`` (no body) in the text format: comments, request line, headers."""
    lines = [f"# name: {obj['name']}"] if "name" in obj else []
    lines += [f"# weight: {obj['weight']!r}"] if "weight" in obj else []
    lines.append(f"{obj.get('method', 'GET')} {obj['url']}")
    lines += [f"{k}: {v}" for k, v in obj.get("headers", {}).items()]
    return "\n".join(lines) + "\n"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(
    st.lists(lines.map(lambda o: {k: v for k, v in o.items() if k != "body"}), min_size=1,
             max_size=6),
    st.data(),
)  # fmt: skip
def test_text_requests_read_the_same_with_or_without_blank_lines_between_them(
    tmp_path: Path, objects: list[dict[str, Any]], data: st.DataObject
) -> None:
    # vegeta's files often run one request into the next: a METHOD URL line starts one.
    gaps = data.draw(st.lists(st.sampled_from(["", "\n", "\n# a comment alone\n\n"]),
                              min_size=len(objects), max_size=len(objects)))  # fmt: skip
    path = tmp_path / "targets.txt"
    path.write_text("".join(as_text(o) + gap for o, gap in zip(objects, gaps, strict=True)))
    read = read_targets(str(path))
    assert len(read) == len(objects)
    for line, obj in zip(read, objects, strict=True):
        want = expected({**obj, "method": obj.get("method", "GET")}, line.where)
        assert line == want
        assert path.read_text().splitlines()[int(line.where.rsplit(" ", 1)[1]) - 1] == (
            f"{want.method} {want.url}"
        )  # where: the request's METHOD URL line


def test_a_vegeta_file_without_blank_lines_reads_request_by_request(tmp_path: Path) -> None:
    (tmp_path / "order.json").write_text('{"item": 7}')
    path = tmp_path / "targets.txt"
    path.write_text(
        "GET http://127.0.0.1:8080/a\nGET http://127.0.0.1:8080/b\n"
        "POST http://127.0.0.1:8080/c\n@order.json\nDELETE /d\nX-Why: 1\n"
    )
    read = read_targets(str(path))
    assert [(r.method, r.url, r.headers, r.body) for r in read] == [
        ("GET", "http://127.0.0.1:8080/a", (), None),
        ("GET", "http://127.0.0.1:8080/b", (), None),
        ("POST", "http://127.0.0.1:8080/c", (), b'{"item": 7}'),
        ("DELETE", "/d", (("X-Why", "1"),), None),
    ]
    assert [r.where.rsplit(" ", 1)[1] for r in read] == ["1", "2", "3", "5"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"url": "/a"}\n{"url": "/b", "wieght": 2}\n', "line 2: key 'wieght': unknown key"),
        ('{"url": "/a", "weight": 0}\n', "line 1: key 'weight': must be a number > 0"),
        ('{"url": "/a", "weight": "3"}\n', "line 1: key 'weight'"),
        ('{"url": "/a", "weight": true}\n', "line 1: key 'weight'"),
        ('{"method": "GET"}\n', "line 1: key 'url': required"),
        ('{"url": "users/1"}\n', "line 1: key 'url': 'users/1' is neither"),
        ('{"url": "/a b"}\n', "line 1: key 'url'"),
        ('{"url": "/a", "method": "BREW"}\n', "line 1: key 'method': unknown method"),
        ('{"url": "/a", "headers": {"Bad Name": "x"}}\n', "line 1: key 'headers'"),
        ('{"url": "/a", "headers": {"X": "a\\nb"}}\n', "line 1: key 'headers'"),
        ('{"url": "/a", "headers": 3}\n', "line 1: key 'headers'"),
        ('{"url": "/a", "body": "x", "body_file": "f"}\n', "line 1: key 'body_file'"),
        ('{"url": "/a", "body_file": "missing.bin"}\n', "line 1: key 'body_file'"),
        ('{"url": "/a", "name": ""}\n', "line 1: key 'name'"),
        ('{"url": "/a"}\n{"url": \n', "line 2: not JSON"),
        ('{"url": "/a"}\n[1]\n', "line 2: a request must be an object"),
        ("[1, 2]\n", "line 1: a request must be an object, got list"),
        ('{"url": 5}\n', "line 1: key 'url': must be a string, got int"),
        ("GET /a\n\n# weight: lots\nGET /b\n", "line 3: key 'weight'"),
        ("GET /a\n@body.bin\nX-After: 1\n", "line 3: key 'body_file': the @FILE line ends"),
        ("\n\n", "no requests"),
    ],
)
def test_a_bad_targets_file_is_refused_naming_the_file_line_and_key(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"{path}.*{says}".replace("(", r"\(")) as info:
        read_targets(str(path))
    assert info.value.field == "--targets"


def test_an_unknown_key_gets_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"url": "/a", "wieght": 2}\n')
    with pytest.raises(ConfigError) as info:
        read_targets(str(path))
    assert info.value.hint == "did you mean 'weight'?"


def test_the_text_format_example_in_the_docs_reads_as_the_docs_say(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "attack.md").read_text()
    after = page.index("read in a plain-text format instead")
    example = page[
        page.index("```\n", after) + 4 : page.index("```\n", page.index("```\n", after) + 4)
    ]
    (tmp_path / "order.json").write_text('{"item": 7}')
    path = tmp_path / "targets.txt"
    path.write_text(example)
    read = read_targets(str(path))
    assert [(r.method, r.url, r.name, r.weight) for r in read] == [
        ("GET", "http://127.0.0.1:8080/", "home", 1.0),
        ("POST", "/orders", None, 2.0),
        ("GET", "/users/1", None, 1.0),
        ("GET", "/users/2", None, 1.0),
    ]
    assert read[1].body == b'{"item": 7}'


def test_a_json_value_body_is_typed_as_json_unless_the_line_types_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"url": "/a", "body": {"item": 7}}\n'
        '{"url": "/b", "body": [1], "headers": {"content-type": "application/x-ndjson"}}\n'
        '{"url": "/c", "body": "plain"}\n'
    )
    a, b, c = read_targets(str(path))
    assert a.headers == (("Content-Type", "application/json"),)
    assert b.headers == (("content-type", "application/x-ndjson"),)
    assert c.headers == ()
