"""``pyattacker compare --html PATH``: a path that cannot be written exits 2 naming
``--html`` while the command line is parsed, before either report is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyattacker.cli import run_cli


@pytest.mark.parametrize(
    ("html", "says"),
    [
        ("-", "an HTML report needs a file"),
        ("{tmp}", "--html"),  # a directory
        ("{tmp}/no/such/dir/c.html", "--html"),
    ],
)
def test_an_unwritable_html_path_exits_2_before_the_reports_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], html: str, says: str
) -> None:
    # neither report exists: had they been read first, the error would name them
    missing_a, missing_b = tmp_path / "a.json", tmp_path / "b.json"
    argv = ["compare", str(missing_a), str(missing_b), "--html", html.format(tmp=tmp_path)]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "--html" in err
    assert "a.json" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


def test_the_help_tells_what_the_html_page_holds(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["compare", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--html PATH" in out
    assert "within noise" in out
