"""A request mix: the lines an attack's arrivals pick from, by weight, and how each becomes
a request on the target the pool picked.

Lines are *what* to send, the pool's targets *where*: each arrival draws a line (a pure
function of the plan's seed and the arrival's index, see :class:`~pyattacker.attack._draws.Draws`),
the acquire algorithm picks a target as for any attack, and the request is the line's
method, path and query, headers and body, sent to that target's host. A line's URL is a
path (``/users/1``) or an absolute URL on the targets' one origin; so a mix over several
replicas lists them as URLs and writes paths. Every request carries its line's name
(``Attempt.name``), so reports break figures down by name as well as by target.

With :class:`~pyattacker.attack._data.DataRows`, ``{field}`` in a line's URL, header
values and body is filled from the request's row (``_template.py``); every row is checked
against every template before any traffic, so a missing field is a ConfigError, never a
failed request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyattacker.attack._data import DataRows
from pyattacker.attack._draws import Draws
from pyattacker.attack._template import Template, as_text, url_text
from pyattacker.errors import ConfigError
from pyattacker.http import URL, check_request

if TYPE_CHECKING:
    from pyattacker.attack._plan import AttackPlan, Target

__all__ = ["Mix", "MixLine", "Prepared", "check_mix", "name_of", "prepare"]

Headers = tuple[tuple[str, str], ...]
_URLS_KEPT = 4096  # filled URLs kept per line and target


@dataclass(frozen=True, slots=True)
class MixLine:
    """One request of a mix. ``url``: a path with an optional query (``/users?page=2``),
    an absolute URL, or None for each target's own URL; ``method`` and ``body`` default to
    the plan's (None); ``headers`` are added to the plan's, replacing a plan header of the
    same name; ``weight`` > 0 is its share of the arrivals; ``name`` labels it in reports
    (default ``METHOD path``). ``where`` says where it came from in error messages
    (``targets.jsonl line 3``); ``body_file``, the file ``body`` was read from, if any
    (the report's plan names it)."""

    url: str | None
    method: str | None = None
    headers: Headers = ()
    body: bytes | None = None
    weight: float = 1.0
    name: str | None = None
    where: str = "line"
    body_file: str | None = None


class Mix:
    """The lines of a mix, and the rows their templates are filled from (``data``)."""

    __slots__ = ("data", "lines", "source")

    def __init__(
        self, lines: Sequence[MixLine], *, data: DataRows | None = None, source: str | None = None
    ) -> None:
        if not lines:
            raise ConfigError("no request lines", field="--targets", hint="one request per line")
        for line in lines:
            if not isinstance(line, MixLine):
                raise ConfigError(f"must be a MixLine, got {type(line).__name__}", field="mix")
            if not line.weight > 0 or line.weight != line.weight or line.weight == float("inf"):
                raise ConfigError(f"{line.where}: weight must be a number > 0", field="weight")
        self.lines, self.data, self.source = tuple(lines), data, source

    def __repr__(self) -> str:
        return f"Mix({len(self.lines)} lines, source={self.source!r}, data={self.data!r})"

    def draws(self, seed: int) -> Draws:
        """Each arrival's line index, by weight, from ``seed`` (see :class:`Draws`)."""
        return Draws(seed, "mix", [line.weight for line in self.lines])

    def describe(self, method: str = "GET") -> dict[str, Any]:
        """What the report's plan says of the mix: each line's name (as reports show it:
        ``method`` is the plan's), weight and share of arrivals; the data file."""
        total = sum(line.weight for line in self.lines)
        data = self.data
        return {
            "source": self.source,
            "lines": [
                {"name": name_of(line, method), "weight": line.weight, "share": line.weight / total}
                for line in self.lines
            ],
            "data": None if data is None else data.describe(),
        }


@dataclass(frozen=True, slots=True)
class Prepared:
    """One line on one target, ready to send: fixed parts built once. When ``templated``,
    :meth:`fill` builds the request from a row; else the fields are the request."""

    method: str
    url: URL
    headers: Headers
    body: bytes | None
    name: str | None
    templated: bool
    url_template: Template | None = None
    header_templates: tuple[tuple[str, Template], ...] = ()
    body_template: Template | None = None
    # Filled URLs by their target: a URL computes its request-line bytes and its masked
    # text when made, and rows repeat (sequential rows come round again).
    _urls: dict[str, URL] = field(default_factory=dict, compare=False, repr=False)

    def fill(self, row: Mapping[str, Any]) -> tuple[URL, Headers, bytes | None]:
        """The URL, headers and body for ``row`` (checked up front to have every field)."""
        url = self.url
        if self.url_template is not None:
            path = self.url_template.fill(row, url_text)
            made = self._urls.get(path)
            if made is None:
                if len(self._urls) >= _URLS_KEPT:
                    self._urls.clear()
                made = self._urls[path] = URL(url.scheme, url.host, url.port, path)
            url = made
        headers = self.headers
        if self.header_templates:
            headers = tuple((n, t.fill(row)) for n, t in self.header_templates)
        body = self.body
        if self.body_template is not None:
            body = self.body_template.fill(row).encode()
        return url, headers, body


def prepare(plan: AttackPlan, target: Target, line: MixLine, *, templates: bool) -> Prepared:
    """``line`` sent to ``target`` (its templates parsed when ``templates``)."""
    method = (line.method or plan.method).upper()
    path = target.url.target if line.url is None else _path_of(line.url)
    names = {n.lower() for n, _ in line.headers}
    headers = tuple(h for h in target.headers if h[0].lower() not in names) + line.headers
    body = plan.body if line.body is None else line.body
    name = name_of(line, plan.method)
    url = URL(target.url.scheme, target.url.host, target.url.port, path)
    fixed = Prepared(method, url, headers, body, name, False)
    if not templates:
        return fixed
    url_t = Template(path)
    header_ts = tuple((n, Template(v)) for n, v in headers)
    body_t = _body_template(body)
    templated = bool(url_t.fields or body_t or any(t.fields for _, t in header_ts))
    if not templated:
        return fixed
    return Prepared(
        method, url, headers, body, name, True,
        url_t if url_t.fields else None,
        header_ts if any(t.fields for _, t in header_ts) else (),
        body_t,
    )  # fmt: skip


def name_of(line: MixLine, method: str) -> str | None:
    """The line's name, or ``METHOD path`` (no query); None for a line that is each
    target's own URL (a plain attack with ``--data``: nothing to break down)."""
    if line.name is not None or line.url is None:
        return line.name
    path = line.url if line.url.startswith("/") else URL.parse(line.url).target
    return f"{(line.method or method).upper()} {path.split('?', 1)[0]}"


def _body_template(body: bytes | None) -> Template | None:
    if body is None:
        return None
    try:
        template = Template(body.decode())
    except UnicodeDecodeError:
        return None  # binary: sent as is
    return template if template.fields else None


def _path_of(url: str) -> str:
    """A line's path and query (an absolute URL's origin was checked by check_mix)."""
    return url if url.startswith("/") else URL.parse(url).target


def check_mix(plan: AttackPlan, mix: Mix) -> None:
    """Refuse, naming the line and field, a mix ``plan`` could not send: an origin that
    is not its targets', a method or header the client would refuse, a row that lacks a
    field a template uses."""
    if plan.llm is not None:
        given = "--data" if mix.source is None and mix.data is not None else "--targets"
        raise ConfigError(
            "an LLM attack builds its own requests", field=given,
            hint="--targets and --data are for HTTP attacks (an LLM attack's prompts: "
            "--prompts FILE.jsonl)",
        )  # fmt: skip
    if any("{key}" in url.target for url in plan.targets) and any(
        line.url is not None for line in mix.lines
    ):
        raise ConfigError(
            "a line's path replaces the URL's, and with it the query that carries {key}",
            field="--targets",
            hint="send the key in a header: -H 'Authorization: Bearer {key}'",
        )
    origins = {url.origin for url in plan.targets}
    for line in mix.lines:
        _check_origin(line, origins)
    targets = plan.resolved_targets()
    templates = mix.data is not None
    for line in mix.lines:
        prepared = prepare(plan, targets[0], line, templates=templates)
        if mix.data is not None and prepared.templated:
            _check_rows(prepared, line, mix.data)
        url, headers, body = (
            prepared.fill(mix.data.rows[0])
            if mix.data is not None and prepared.templated
            else (prepared.url, prepared.headers, prepared.body)
        )
        try:
            check_request(prepared.method, url, headers=headers, body=body)
        except ConfigError as exc:
            raise ConfigError(
                f"{line.where}: {exc.message}", field=_field(exc.field), hint=exc.hint
            ) from None


def _field(field: str | None) -> str:
    return {"method": "method", "target": "url"}.get(field or "", "headers")


def _check_origin(line: MixLine, origins: set[tuple[str, str, int]]) -> None:
    if line.url is None or line.url.startswith("/"):
        return
    url = URL.parse(line.url, field="url")
    if len(origins) > 1 or url.origin not in origins:
        raise ConfigError(
            f"{line.where}: url {str(url)!r} is not on the attack's target "
            f"({', '.join(f'{s}://{h}:{p}' for s, h, p in sorted(origins))})",
            field="url",
            hint="a mix sends every line through one pool: write paths (/users/1) and give "
            "the hosts as URLs, or run one attack per host",
        )


def _check_rows(prepared: Prepared, line: MixLine, data: DataRows) -> None:
    """Every row has every field the line's templates use, and nothing a header cannot
    carry: checked now, so no request of the run fails for its row."""
    for i, row in enumerate(data.rows, 1):
        for where, template in _templates(prepared):
            missing = template.missing(row)
            if missing is not None:
                raise ConfigError(
                    f"{data.path or 'data'} row {i} has no field {missing!r}, which "
                    f"{line.where} uses in its {where}",
                    field="--data",
                    hint="give every row every field the templates use",
                )
        for name, template in prepared.header_templates:
            if any(c in as_text(row[f]) for f in template.fields for c in "\r\n"):
                raise ConfigError(
                    f"{data.path or 'data'} row {i}: a value for header {name!r} has a line break",
                    field="--data",
                )


def _templates(prepared: Prepared) -> list[tuple[str, Template]]:
    found = [] if prepared.url_template is None else [("url", prepared.url_template)]
    found += [(f"header {n!r}", t) for n, t in prepared.header_templates]
    if prepared.body_template is not None:
        found.append(("body", prepared.body_template))
    return found
