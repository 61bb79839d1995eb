"""``AttackPlan``: everything an attack needs to know, validated once, before any traffic.

Every mistake is a :class:`~pyattacker.errors.ConfigError` naming the field, raised here, so
nothing is sent and nothing is written when the plan is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice

from pyattacker.attack._limits import MAX_WINDOWS, check
from pyattacker.attack._llm import LlmSpec
from pyattacker.attack._load import ClosedModel, LoadModel, OpenModel
from pyattacker.attack._mix import Mix, check_mix
from pyattacker.attack._scenario import Scenario
from pyattacker.attack._warmup import Warmup
from pyattacker.errors import ConfigError
from pyattacker.http import URL, Resolve, Timeouts, TlsOptions, check_request, connect_map
from pyattacker.pool import AlgorithmSpec, resolve_algorithm
from pyattacker.retry import Retrying, resolve_retry

_DRAWN_AT_MOST = 1_000_000  # arrivals drawn to check a time warmup against --requests

__all__ = ["KEY_PLACEHOLDER", "METHODS", "AttackPlan", "Target"]

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
KEY_PLACEHOLDER = "{key}"


@dataclass(frozen=True, slots=True)
class Target:
    """One resource of the attack's pool: a URL, and the headers that carry its key.

    ``id`` names it in reports: the URL, plus ``(key N)`` when keys are in play. The key
    itself is only ever in ``headers`` or in ``url``'s query (whose ``str()`` masks it),
    never in the id.
    """

    id: str
    url: URL
    headers: tuple[tuple[str, str], ...] = field(repr=False)  # a key may be among them


def _names(urls: Sequence[URL]) -> list[str]:
    """What reports call each URL: its masked ``str()``, with ``(URL n)`` added when URLs
    that differ only in a masked secret (``?key=A``, ``?key=B``) would read the same."""
    shown = [str(url) for url in urls]
    return [f"{s} (URL {i})" if shown.count(s) > 1 else s for i, s in enumerate(shown, 1)]


@dataclass(frozen=True)
class AttackPlan:
    """What to send, where, how often, and for how long.

    - ``targets``: one or more URLs; each is a resource of one pool (``capacity`` =
      ``connections``), and the acquire ``algorithm`` picks one per attempt.
    - ``load``: an :class:`OpenModel` (planned arrivals) or a :class:`ClosedModel`.
    - ``duration`` and/or ``requests``: when to stop scheduling (at least one is needed,
      except for staged open models, which end with their last stage).
    - ``retry``: what to do after a failed attempt; default one attempt, no retries.
    - ``feedback``: tell the pool how each attempt went, so health and Retry-After steer
      the algorithm (and may slow the offered load), and a paced target follows the
      ``x-ratelimit-*`` headers its answers carry. Off by default: the load follows the
      plan whatever the server answers.
    - ``late_after``: a request whose first attempt was sent more than this many seconds
      after it was scheduled counts as late.
    - ``preconnect``: connections per target opened before the first arrival (at most
      ``connections``), as wrk opens all of its first: no request's time is then spent
      connecting, and the schedule does not start with a backlog while they open. 0 (the
      default): connections open as requests need them, inside those requests' time.
    - ``keys``: API keys; each (URL, key) pair is one resource, and every ``{key}`` in a header
      value is replaced by that resource's key (``Authorization: Bearer {key}``). Keys are
      sent only in headers and never appear in a report.
    - ``llm``: an :class:`LlmSpec` makes this an LLM attack: each target is an
      OpenAI-compatible base URL (``http://host:8000/v1``), POSTed at its API's path
      (``targets`` then hold those endpoint URLs); the body of request ``n`` is the spec's
      prompt ``n``; with keys and no ``{key}`` header, the key goes where the endpoint
      expects it (``Authorization: Bearer``, or ``api-key`` for Azure OpenAI).
    - ``warmup``: a :class:`~pyattacker.attack.Warmup`: the run's first span or requests
      are sent but left out of every figure (``_warmup.py``); part of ``duration`` and
      ``requests``.
    - ``scenario``: a :class:`Scenario` makes this an attack of scripted flows: each
      arrival (or each turn of a closed-model client) runs the scenario's function once,
      and its steps are the requests, sent to the targets with the plan's headers
      (``requests`` then counts flows; see ``docs/attack.md``, "Scripted flows").
    - ``tls``: :class:`~pyattacker.http.TlsOptions` for ``https`` targets (``None``: verify
      against the system's CAs, no client certificate).
    - ``resolve``: :class:`~pyattacker.http.Resolve` entries, or their text
      ``"HOST:PORT:ADDRESS"`` (curl's ``--resolve``): the connections for a host and port
      go to another address, the URLs unchanged.
    - ``follow_redirects``: how many redirects (3xx with a ``Location``) a request follows,
      each hop one more attempt of it; 0 (the default): a redirect is the request's answer,
      counted as failed with error class ``redirect``.
    - ``mix``: a :class:`~pyattacker.attack._mix.Mix` makes each arrival send one of its
      lines, drawn by weight from ``seed`` (``--targets``; ``--data`` fills its templates);
      ``method``, ``headers`` and ``body`` are then every line's defaults.
    - ``sender``: the name of a plugin's sender (entry point group ``pyattacker.senders``:
      a factory called with the attack's ``HttpClient`` and this plan, returning a
      :class:`~pyattacker.attack.Sender`) that sends each attempt instead of plain HTTP;
      not with ``llm``, ``mix`` or ``scenario``, which bring their own.
    - ``file``: the plan file these values were read from (``attack -c PLAN``), if any:
      reported as ``plan.file``, so a report says which file to run again.
    """

    targets: tuple[URL, ...]
    load: LoadModel
    duration: float | None = None
    requests: int | None = None
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: Retrying = field(default_factory=Retrying)
    algorithm: AlgorithmSpec = "wait"
    connections: int = 256
    feedback: bool = False
    window: float = 1.0
    seed: int = 0
    late_after: float = 0.010
    preconnect: int = 0
    keys: tuple[str, ...] = field(default=(), repr=False)
    llm: LlmSpec | None = None
    warmup: Warmup | None = None
    scenario: Scenario | None = None
    tls: TlsOptions | None = None
    resolve: tuple[Resolve, ...] = ()
    follow_redirects: int = 0
    mix: Mix | None = None
    sender: str | None = None
    file: str | None = None

    def __post_init__(self) -> None:
        if not self.targets:
            raise ConfigError(
                "no target URL given", field="targets", hint="e.g. http://127.0.0.1:8080/"
            )
        for i, target in enumerate(self.targets):
            if not isinstance(target, URL):
                raise ConfigError(
                    f"must be a parsed URL, got {type(target).__name__}", field=f"targets[{i}]"
                )
        if len(set(self.targets)) != len(self.targets):
            raise ConfigError(
                "the same URL is given twice", field="targets", hint="list each URL once"
            )
        if not isinstance(self.load, OpenModel | ClosedModel):
            raise ConfigError("must be an OpenModel or a ClosedModel", field="load")
        if self.duration is not None:
            check("duration", self.duration)
        if self.requests is not None:
            check("requests", self.requests)
        open_ended = isinstance(self.load, ClosedModel) or self.load.duration is None
        if open_ended and self.duration is None and self.requests is None:
            raise ConfigError(
                "the attack would never end",
                field="duration",
                hint="give a duration (e.g. 30s) or a number of requests",
            )
        method = self.method.upper() if isinstance(self.method, str) else self.method
        if method not in METHODS:
            raise ConfigError(
                f"unknown method {self.method!r}",
                field="method",
                hint=f"use one of {', '.join(METHODS)}",
            )
        object.__setattr__(self, "method", method)
        if self.llm is not None:
            self._as_llm(self.llm)
        if self.scenario is not None:
            self._check_scenario(self.scenario)
        self._check_numbers()
        if self.tls is not None and not isinstance(self.tls, TlsOptions):
            raise ConfigError(f"must be a TlsOptions, got {type(self.tls).__name__}", field="tls")
        entries: tuple[object, ...] = tuple(self.resolve)  # Resolve, or its text
        object.__setattr__(
            self, "resolve", tuple(Resolve.parse(e) if isinstance(e, str) else e for e in entries)
        )
        connect_map(self.resolve)
        if self.preconnect > self.connections:
            raise ConfigError(
                f"{self.preconnect} is more than the {self.connections} connections allowed",
                field="preconnect",
                hint="preconnect at most as many as --connections",
            )
        object.__setattr__(self, "retry", resolve_retry(self.retry))
        resolve_algorithm(self.algorithm)
        self._check_keys()
        self._check_requests()
        if self.warmup is not None:
            until = self.warmup.seconds  # (a warmup of requests needs no arrival drawn)
            last = None if until is None else self._last_arrival(until)
            duration = self.duration or getattr(self.load, "duration", None)
            self.warmup.check_fits(duration, self.requests, last)
        if self.mix is not None:
            check_mix(self, self.mix)
        if self.sender is not None:
            self._check_sender()

    def _last_arrival(self, until: float) -> float | None:
        """The scheduled offset of the last of ``requests`` arrivals of an open model, or of
        the first at ``until`` or later (enough to know a warmup of ``until`` seconds leaves
        some), when it is cheap to know: a constant rate's is a division; stages or Poisson
        arrivals are drawn (seeded, so the run draws the same), up to a million of them."""
        load = self.load
        if self.requests is None or not isinstance(load, OpenModel):
            return None
        if not load.stages and load.arrival != "poisson":
            return (self.requests - 1) / load.rate
        if self.requests > _DRAWN_AT_MOST:
            return None
        last = None
        for last in islice(load.arrivals(seed=self.seed, duration=self.duration), self.requests):
            if last >= until:  # offsets never decrease: this one is measured
                break
        return last

    def _check_sender(self) -> None:
        """A plugin's sender replaces plain HTTP only: the other ways of sending have their own."""
        for other, flag in ((self.llm, "--llm"), (self.mix, "--targets/--data"),
                            (self.scenario, "--scenario")):  # fmt: skip
            if other is not None:
                raise ConfigError(
                    f"a plugin's sender cannot be combined with {flag}",
                    field="sender",
                    hint=f"leave out --sender, or {flag}",
                )

    def _check_numbers(self) -> None:
        """Every number within its range of the one table (``_limits.LIMITS``)."""
        for name in (
            "connections",
            "preconnect",
            "window",
            "late_after",
            "seed",
            "follow_redirects",
        ):
            check(name, getattr(self, name))
        for name in ("total", "connect", "read"):
            if getattr(self.timeouts, name) is not None:
                check(f"timeouts.{name}", getattr(self.timeouts, name))
        spans = [s for s in (self.duration, getattr(self.load, "duration", None)) if s]
        if spans and min(spans) / self.window > MAX_WINDOWS:
            raise ConfigError(
                f"{min(spans):g} s in windows of {self.window:g} s would be more than "
                f"{MAX_WINDOWS:,} windows",
                field="window",
                hint="use a wider window",
            )

    def _as_llm(self, llm: LlmSpec) -> None:
        """Point the targets at their LLM endpoints, POST, and place the key header."""
        if not isinstance(llm, LlmSpec):
            raise ConfigError(f"must be an LlmSpec, got {type(llm).__name__}", field="llm")
        if self.method not in ("GET", "POST"):  # GET: the default, left unset
            raise ConfigError(
                f"an LLM attack POSTs its requests, not {self.method}", field="method"
            )
        if self.body is not None:
            raise ConfigError(
                "an LLM attack builds each body from its prompts",
                field="body",
                hint="use --shape CONTEXT:MAX_TOKENS or --prompts FILE.jsonl instead of --body",
            )
        if self.follow_redirects:
            raise ConfigError(
                "an LLM attack does not follow redirects",
                field="follow_redirects",
                hint="point it at the URL the endpoint redirects to",
            )
        object.__setattr__(self, "method", "POST")
        object.__setattr__(self, "targets", llm.endpoints(self.targets))
        if self.keys and not self._key_placed():
            header = llm.key_header(self.targets)
            object.__setattr__(self, "headers", (*self.headers, header))

    def _check_scenario(self, scenario: Scenario) -> None:
        """A scenario's flows send their own requests: nothing else may say what to send."""
        if not isinstance(scenario, Scenario):
            raise ConfigError(
                f"must be a Scenario, got {type(scenario).__name__}", field="scenario"
            )
        if self.llm is not None:
            raise ConfigError("a scenario cannot be an LLM attack", field="scenario")
        if self.body is not None or self.method != "GET":
            raise ConfigError(
                "a scenario's steps say their own method and body",
                field="scenario",
                hint="drop -X/--body: pass them to client.post(path, body=...) in the flow",
            )

    def _check_requests(self) -> None:
        """Refuse now, naming the field, any request the HTTP client would refuse later
        (a header it owns, a value it cannot send): otherwise every request of the run
        would fail the same way."""
        template = tuple((n, v.replace(KEY_PLACEHOLDER, "key")) for n, v in self.headers)
        check_request(self.method, self.targets[0], headers=template, body=self.body)
        for i, key in enumerate(self.keys):
            filled = tuple((n, v.replace(KEY_PLACEHOLDER, key)) for n, v in self.headers)
            try:
                check_request(self.method, self.targets[0], headers=filled, body=self.body)
            except ConfigError as exc:
                raise ConfigError(
                    "this key cannot be sent in a header", field=f"keys[{i}]", hint=exc.message
                ) from None

    def _key_placed(self) -> bool:
        """Whether a header value or a URL's query says where the key goes (``{key}``)."""
        in_headers = any(KEY_PLACEHOLDER in value for _, value in self.headers)
        return in_headers or any(KEY_PLACEHOLDER in url.target for url in self.targets)

    def _check_keys(self) -> None:
        templated = self._key_placed()
        if self.keys and not templated:
            raise ConfigError(
                "keys are given but neither a header nor a URL uses them",
                field="keys",
                hint="add a header such as 'Authorization: Bearer {key}', or ?key={key}",
            )
        if templated and not self.keys:
            raise ConfigError(
                "a header or URL uses {key} but no key is given",
                field="keys",
                hint="pass --key KEY (repeatable) or --keys-file FILE",
            )
        for i, key in enumerate(self.keys):
            if not isinstance(key, str) or not key.strip() or any(c in key for c in "\r\n"):
                raise ConfigError(
                    "a key must be a non-empty string without line breaks",
                    field=f"keys[{i}]",
                )
        if len(set(self.keys)) != len(self.keys):
            raise ConfigError("the same key is given twice", field="keys", hint="list each once")

    def resolved_targets(self) -> tuple[Target, ...]:
        """Every resource of the pool: one per URL, or one per URL and key."""
        names = _names(self.targets)
        if not self.keys:
            return tuple(
                Target(name, url, self.headers)
                for name, url in zip(names, self.targets, strict=True)
            )
        return tuple(
            Target(
                f"{name} (key {k})",
                url.fill(KEY_PLACEHOLDER, key),  # its str() masks the key
                tuple((n, v.replace(KEY_PLACEHOLDER, key)) for n, v in self.headers),
            )
            for name, url in zip(names, self.targets, strict=True)
            for k, key in enumerate(self.keys, 1)
        )

    @classmethod
    def build(
        cls,
        targets: Sequence[str | URL],
        load: LoadModel,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        retry: Retrying | Mapping[str, object] | str | None = None,
        **options: object,
    ) -> AttackPlan:
        """A plan from URL strings, a header mapping and a retry spec (see ``resolve_retry``)."""
        parsed = tuple(
            t if isinstance(t, URL) else URL.parse(t, field=f"targets[{i}]")
            for i, t in enumerate(targets)
        )
        pairs = tuple(headers.items()) if isinstance(headers, Mapping) else tuple(headers)
        return cls(parsed, load, headers=pairs, retry=resolve_retry(retry), **options)  # type: ignore[arg-type]
