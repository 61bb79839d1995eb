"""The report's plan says what a mix sends: each line's method, URL, headers and body,
with every secret hidden as the rest of the report hides it, and the ``--data`` rows a mix
or a scenario reads."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyattacker.attack import AttackPlan, DataRows, Mix, MixLine, OpenModel, read_targets
from pyattacker.attack._plan_dict import BODY_SHOWN, plan_dict
from pyattacker.attack._scenario import Scenario

URL = "http://127.0.0.1:9/"


def lines_of(*lines: MixLine, **options: Any) -> list[dict[str, Any]]:
    plan = AttackPlan.build([URL], OpenModel(rate=10), requests=10, mix=Mix(lines), **options)
    described: list[dict[str, Any]] = plan_dict(plan)["mix"]["lines"]
    json.dumps(described)  # every value is JSON
    return described


def test_each_line_says_its_method_url_headers_and_body_beside_its_name_and_share() -> None:
    user = MixLine(url="/users/1?q=1", weight=3, name="user", headers=(("X-Trace", "t1"),))
    order = MixLine(url="/orders", method="post", body=b'{"item":7}')
    assert lines_of(user, order) == [
        {"name": "user", "weight": 3, "share": 0.75, "method": "GET", "url": "/users/1?q=1",
         "headers": ["X-Trace: t1"], "body": None, "body_bytes": 0},
        {"name": "POST /orders", "weight": 1, "share": 0.25, "method": "POST", "url": "/orders",
         "headers": [], "body": '{"item":7}', "body_bytes": 10},
    ]  # fmt: skip


def test_a_line_without_method_or_body_shows_the_plans_which_it_sends() -> None:
    (line,) = lines_of(MixLine(url="/a"), method="PUT", body=b"plain")
    assert (line["method"], line["body"], line["body_bytes"]) == ("PUT", "plain", 5)


def test_templates_are_shown_as_written() -> None:
    line = MixLine(url="/users/{id}", headers=(("X-User", "{id}"),), body=b'{"id": {id}}')
    (shown,) = lines_of(line)
    assert (shown["url"], shown["headers"], shown["body"]) == (
        "/users/{id}", ["X-User: {id}"], '{"id": {id}}',
    )  # fmt: skip


def test_secret_headers_url_parameters_and_body_fields_are_masked_as_elsewhere() -> None:
    line = MixLine(
        url="/a?api_key=sk-1&page=2",
        headers=(("Authorization", "Bearer sk-1"), ("Cookie", "s=1"), ("Referer", "/x?token=t")),
        body=b'{"user": "u", "password": "hunter2"}',
    )
    (shown,) = lines_of(line)
    assert shown["url"] == "/a?api_key=***&page=2"
    assert shown["headers"] == ["Authorization: ***", "Cookie: ***", "Referer: /x?token=***"]
    assert shown["body"] == '{"user":"u","password":"***"}'
    assert "hunter2" not in json.dumps(shown)
    assert "sk-1" not in json.dumps(shown)


def test_a_form_body_has_its_secret_parameters_masked() -> None:
    (shown,) = lines_of(MixLine(url="/login", method="POST", body=b"user=u&password=p&x=1"))
    assert shown["body"] == "user=u&password=***&x=1"


def test_an_api_key_written_out_in_a_line_is_masked_wherever_it_stands() -> None:
    line = MixLine(url="/a", headers=(("X-Api", "sk-live-1"),), body=b"k=1&v=sk-live-1")
    (shown,) = lines_of(line, keys=["sk-live-1"], headers=[("Authorization", "Bearer {key}")])
    assert (shown["headers"], shown["body"]) == (["X-Api: ***"], "k=1&v=***")


def test_a_long_or_binary_body_is_shown_by_its_length_and_digest() -> None:
    long = b"x" * (BODY_SHOWN + 1)
    binary = b"\xff\xfe\x00"
    for body in (long, binary):
        (shown,) = lines_of(MixLine(url="/a", method="POST", body=body))
        digest = hashlib.sha256(body).hexdigest()
        assert (shown["body"], shown["body_bytes"], shown["body_sha256"]) == (
            None, len(body), digest,
        )  # fmt: skip
    (short,) = lines_of(MixLine(url="/a", method="POST", body=b"x" * BODY_SHOWN))
    assert short["body"] == "x" * BODY_SHOWN
    assert "body_sha256" not in short


def test_the_data_rows_are_in_the_plan_for_a_mix_and_for_a_scenario() -> None:
    rows = DataRows([{"id": 1}, {"id": 2}], order="random", path="rows.jsonl")
    expected = {"file": "rows.jsonl", "rows": 2, "order": "random"}
    plan = AttackPlan.build(
        [URL], OpenModel(rate=10), requests=10, mix=Mix([MixLine(url=None)], data=rows)
    )
    assert plan_dict(plan)["data"] == plan_dict(plan)["mix"]["data"] == expected

    async def flow(client: object, row: Mapping[str, Any] | None) -> None:
        return None

    plain = AttackPlan.build([URL], OpenModel(rate=10), requests=10)
    assert "data" not in plan_dict(replace(plain, scenario=Scenario(flow, "f.py:flow")))
    flows = replace(plain, scenario=Scenario(flow, "f.py:flow", rows=rows.row))
    assert (plan_dict(flows)["scenario"], plan_dict(flows)["data"]) == ("f.py:flow", expected)


def test_a_body_read_from_a_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "order.json").write_text('{"item": 7}')
    targets = tmp_path / "targets.jsonl"
    targets.write_text('{"url": "/o", "method": "POST", "body_file": "order.json"}\n{"url": "/"}\n')
    plan = AttackPlan.build(["http://127.0.0.1:9/"], OpenModel(rate=1), requests=1,
                            mix=Mix(read_targets(str(targets))))  # fmt: skip
    with_file, without = plan_dict(plan)["mix"]["lines"]
    assert with_file["body_file"] == str(tmp_path / "order.json")
    assert with_file["body"] == '{"item": 7}'
    assert "body_file" not in without
