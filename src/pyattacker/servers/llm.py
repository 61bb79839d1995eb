"""A mock OpenAI-compatible LLM server that knows the truth about every token it wrote.

It answers ``POST /v1/chat/completions`` and ``POST /v1/completions`` (streamed with
``"stream": true``, else one JSON body; an HTTP/1.0 client's stream ends with the
connection instead of a chunked body), their Azure OpenAI forms
``/openai/deployments/{deployment}/chat/completions?api-version=...`` and
``.../completions`` (the deployment name is the model) and ``/openai/v1/...``, and ``GET
/v1/models[/{name}]``. The official ``openai`` SDK works against it (``base_url=server.url +
"/v1"``).

**Token model.** One output token is one word of a small fixed vocabulary with a leading
space (``" fox"``), and each streamed content event carries exactly one token, so
``completion_tokens`` = content events = ``len(text.split())``. ``prompt_tokens`` is the
number of whitespace-separated words (``str.split()``) over every message's text (chat:
string contents and the ``text`` of list parts) or over the prompt string(s)
(completions; a prompt of token ids counts one per id): a prompt of N words costs exactly
N tokens, which is what synthetic prompts rely on. A request generates a length drawn
from ``output_tokens`` (``fixed:N``, ``uniform:min=A,max=B``, ``lognormal:median=N,sigma=S``
or ``max``); ``max_completion_tokens`` (else ``max_tokens``) cuts it, and the
``finish_reason`` is ``"length"`` when it did, else ``"stop"``. No completion is longer
than ``max_output_tokens``: a request asking for more is a 400, a draw is cut to it.

**Timing.** A completion gets a concurrency slot (``capacity``; beyond it requests queue
first come first served, or get a 429 with ``overflow="refuse"``). From then on: a stream
sends its head and (chat) the ``role`` event at once, its first content token after a TTFT
draw, and each later token one ITL draw after the previous token was written; the last
token's write carries the finish event, the usage event (with
``stream_options.include_usage``) and ``[DONE]``. A non-streamed request is answered whole
after TTFT + the ITL draws (their sum in closed form when the ITL is fixed). No gap is ever
shorter than its draw: on Linux a token is due on the kernel's timer, late only by a
wake-up; elsewhere on the loop's timers (uvloop's have millisecond resolution: a gap can
come out up to about 1 ms longer). The truth records the gap that happened. Capacity
refusals, RPM/TPM limits, failures and storms are decided when the request is handled, in
that order (see :mod:`pyattacker.servers._llm_handle`,
:mod:`pyattacker.servers._llm_limits` and :mod:`pyattacker.servers._llm_dice`); fault
headers are listed in :mod:`pyattacker.servers._llm_plan`.

**Ground truth.** Every completion request (attempt) is recorded, whatever it was answered:
when it was received, when each content token was written to the socket (flush included,
as the echo server counts it), when it ended, its status, outcome, token counts, model,
whether it streamed, and its id, sent back as ``x-request-id``. ``GET /stats[?samples=1]``
and :meth:`LlmServer.stats` give the exact distributions (:mod:`pyattacker.servers._llm_truth`),
computed for what is new since the last ask, in slices of a few milliseconds with a turn of
the loop between them (:mod:`pyattacker.servers._llm_values`), so asking never stalls the
streams; it costs CPU on their core all the same (growing with the tokens recorded, and
more with samples), so poll sparingly during a measurement. ``POST /reset`` starts a
new epoch: records, buckets, storm windows and dice numbering start over; requests already
received are answered but never recorded (``discarded_after_reset``).

**What it reuses of the world model**: storms are
:meth:`~pyattacker.world.ProviderModel.storm_until` of a world whose endpoints are the
models, with the server's start (or last reset) as t = 0, and a
:class:`~pyattacker.world.FailureProfile` describes them; each request's dice come from
its own stream ``f"{seed}:{model}:{ordinal}"`` as the world's rule says (ordinals count
from the start, or the last reset). It does not use
``ProviderModel.admit``: that decides one service time per request, refuses (never queues)
over capacity and spends one token per request from a tightening bucket, whereas an LLM
response needs a TTFT *and* a gap per token, a queue, and OpenAI's two plain RPM/TPM buckets
whose state goes into ``x-ratelimit-*`` headers. TTFT and ITL are :class:`Delay` specs
rather than a :class:`~pyattacker.world.LatencyProfile` because they parse from one CLI
flag each and know their exact quantiles.

**Limits.** A request head over ``max_head_size`` is a 431, a body over ``max_body_size``
a 413 (unread when its ``Content-Length`` says so), a connection silent or dripping for
``request_timeout`` while the server owes it nothing is closed, and one beyond
``max_connections`` is closed when accepted (:mod:`pyattacker.servers._guard`); every
number a request sets has a range (:mod:`pyattacker.servers._ranges`).

**Speed.** One ``asyncio.Protocol`` per connection on httptools; tokens are written by
callbacks from one heap of due times (:mod:`pyattacker.servers._llm_ticker`, a single loop
timer for all of them), with no task and no coroutine per request or per token, so that
the server is never the bottleneck of the client's accuracy benchmark.
``benchmarks/llm_server_throughput.py`` measures its tokens per second (figures in
``benchmarks/README.md``).
"""

from __future__ import annotations

import asyncio
import json
import ssl as _ssl
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qs

from pyattacker.errors import ConfigError
from pyattacker.servers._delays import Delay
from pyattacker.servers._guard import HEAD_LIMIT, MAX_CONNECTIONS, REQUEST_TIMEOUT_S, limits
from pyattacker.servers._listening import ListeningServer
from pyattacker.servers._llm_core import LlmCore, Work
from pyattacker.servers._llm_dice import STORM_FORM, TOKEN_FORMS, TokenCount, parse_storms
from pyattacker.servers._llm_process import API_KEYS_ENV, LlmServerProcess
from pyattacker.servers._llm_protocol import LlmProtocol
from pyattacker.servers._llm_settings import MAX_OUTPUT_TOKENS, Settings, settings
from pyattacker.servers._llm_truth import Record
from pyattacker.servers._llm_wire import error_body
from pyattacker.servers._loops import run_until_signalled
from pyattacker.servers._ranges import request_whole
from pyattacker.servers._timer import ServerTimer
from pyattacker.world import FailureProfile

__all__ = [
    "API_KEYS_ENV",
    "MAX_OUTPUT_TOKENS",
    "STORM_FORM",
    "TOKEN_FORMS",
    "LlmServer",
    "LlmServerProcess",
    "TokenCount",
    "parse_storms",
    "serve_llm_until_signalled",
]

T = TypeVar("T")
Steps = Generator[None, None, T]

#: The largest request body the LLM server reads (bytes). A 128k-token prompt is about
#: 0.5 MiB of text and a chat message with a base64 image a few MiB; 8 MiB is also the
#: longest stream line the attack's client accepts. A larger body is answered 413 unread.
BODY_LIMIT = 8 * 1024 * 1024
#: token times encoded into ``/stats?samples=1`` between two turns of the loop (a few
#: milliseconds of work, so the streams keep their timing)
SAMPLES_SLICE = 4096


class LlmServer(ListeningServer):
    """The mock LLM server on the running event loop (``async with LlmServer() as s``).

    Every argument is checked here (``ConfigError`` naming it). ``url`` exists from
    :meth:`start` on; :meth:`stats` and :meth:`reset` are plain methods, safe to call from
    the loop's thread at any time.

    - ``models``: the names it serves (Azure deployment names too); others get 404.
    - ``ttft``, ``itl``: :class:`Delay` specs (``lognormal:median=200ms,sigma=0.5``).
    - ``output_tokens``: completion lengths (``fixed:N``, ``uniform:min=A,max=B``,
      ``lognormal:median=N,sigma=S``, ``max``: always the request's ``max_tokens``).
    - ``max_output_tokens``: the most tokens a completion may have: a request asking for
      more (``max_tokens``, ``max_completion_tokens``) is a 400, a drawn length is cut to it.
    - ``capacity``: completions generating at once (``None``: no limit); ``overflow``:
      ``"queue"`` (wait for a slot) or ``"refuse"`` (429 at once).
    - ``rpm``, ``tpm``: rate limits per minute (``None``: none).
    - ``fail``: ``{status: fraction}`` answered at random; ``storms``: a
      :class:`~pyattacker.world.FailureProfile` or ``"rate=0.05,duration=30s,error_rate=0.5"``.
    - ``api_keys``: when given, every request needs one (``Authorization: Bearer K`` or
      ``api-key: K``), ``/stats`` and ``/reset`` included. ``utilization_header``: send
      ``azure-openai-deployment-utilization`` (in-flight / capacity) on completion
      responses; needs ``capacity``.
    - ``max_head_size`` (32 KiB), ``max_body_size`` (8 MiB, :data:`BODY_LIMIT`),
      ``request_timeout`` (60 s), ``max_connections`` (10,000): the limits against hostile
      or broken clients (:mod:`pyattacker.servers._guard`): 431, 413, a close (408 when a
      request had begun), a connection closed as soon as it is accepted.
    """

    what = "LLM server"
    backlog = 4096

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: str | Sequence[str] = ("mock-llm",),
        ttft: Delay | str = "lognormal:median=200ms,sigma=0.5",
        itl: Delay | str = "fixed:20ms",
        output_tokens: TokenCount | str | int = "lognormal:median=100,sigma=0.5",
        max_output_tokens: int = MAX_OUTPUT_TOKENS,
        capacity: int | None = None,
        overflow: str = "queue",
        rpm: int | None = None,
        tpm: int | None = None,
        fail: Mapping[int, float] | None = None,
        storms: FailureProfile | str | None = None,
        api_keys: str | Sequence[str] = (),
        seed: int = 0,
        utilization_header: bool = False,
        max_head_size: int = HEAD_LIMIT,
        max_body_size: int = BODY_LIMIT,
        request_timeout: float | str = REQUEST_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        bounds = limits(
            head=max_head_size,
            body=max_body_size,
            timeout=request_timeout,
            connections=max_connections,
        )
        super().__init__(host, port, bounds, ssl)
        self.settings: Settings = settings(
            models=models,
            ttft=ttft,
            itl=itl,
            output_tokens=output_tokens,
            max_output_tokens=max_output_tokens,
            capacity=capacity,
            overflow=overflow,
            rpm=rpm,
            tpm=tpm,
            fail=fail,
            storms=storms,
            api_keys=api_keys,
            seed=seed,
            utilization_header=utilization_header,
        )
        self._core = LlmCore(self.settings, self._control)

    def _bind(self, loop: asyncio.AbstractEventLoop, timer: ServerTimer) -> None:
        self._core.bind(loop, timer)

    def _protocol(self) -> LlmProtocol:
        return LlmProtocol(self._core, self.limits)

    def _open(self) -> Iterable[LlmProtocol]:
        return self._core.connections

    def stats(
        self, *, samples: bool = False, offset: int = 0, limit: int | None = None
    ) -> dict[str, Any]:
        """The ground truth since the last reset, exact, in seconds.

        Keys: ``requests`` (completion requests recorded), ``statuses`` (count per status
        answered), ``outcomes`` (``ok``, ``error``, ``fault``, ``cut``, ``dropped``),
        ``throttled`` (429s), ``prompt_tokens`` and ``completion_tokens`` (sums over ``ok``
        requests), ``ttft``, ``e2e``, ``itl``, ``tpot`` (each ``count``, ``min``, ``mean``,
        ``p50``, ``p90``, ``p95``, ``p99``, ``p99.9``, ``max``; ``None`` but ``count`` when
        empty; over ``ok`` requests); ``received`` (completion requests received), which is
        always ``requests + in_flight + queued + pending``: ``in_flight`` (generating),
        ``queued`` (waiting for a slot), ``pending`` (waiting behind an earlier response on
        their connection, or ended and waiting for the write buffer to drain);
        ``discarded_after_reset`` (requests received before the last reset that ended
        after it: never recorded), ``before_reset`` (such requests still in progress),
        ``settings``. With ``samples=True`` also ``samples``: one dict per record in the
        order they ended, from the ``offset``-th, at most ``limit`` of them.

        Run here it does all its work at once; ``GET /stats`` does the same in slices,
        giving the loop a turn between them.
        """
        result, page = _finish(self._stats(samples=samples, offset=offset, limit=limit))
        if samples:
            result["samples"] = [record.as_dict() for record in page]
        return result

    def reset(self) -> int:
        """Start a new experiment: forget every record, refill the rate-limit buckets,
        count storms from now and number each model's requests (their dice) from 0
        again; return the records cleared.

        Requests already in progress are answered but never recorded: they are counted in
        ``discarded_after_reset`` when they end.
        """
        return self._core.reset()

    def _stats(
        self, *, samples: bool, offset: int, limit: int | None
    ) -> Steps[tuple[dict[str, Any], list[Record]]]:
        """Steps towards the stats dict and the page of records asked for."""
        core = self._core
        yield from core.ledger.steps()
        result = core.ledger.summary()
        tally = core.tally()
        result["received"] = core.epoch.received
        result["in_flight"], result["queued"] = tally.in_flight, tally.queued
        result["pending"], result["before_reset"] = tally.pending, tally.earlier
        result["settings"] = self.settings.describe()
        stop = None if limit is None else offset + limit
        return result, core.ledger.records[offset:stop] if samples else []

    def _control(self, path: bytes, query: bytes) -> Work:
        """The reply to an authorized ``POST /reset`` or ``GET /stats[?samples=1...]``."""
        if path == b"/reset":
            return _now(200, [_json({"cleared": self.reset()})])
        return self._stats_reply(query)

    def _stats_reply(self, query: bytes) -> Work:
        params = parse_qs(query.decode("latin-1"))
        samples = params.get("samples", ["0"])[-1].lower() in ("1", "true", "yes")
        try:
            offset = _whole_param(params, "offset") or 0
            limit = _whole_param(params, "limit")
        except ConfigError as exc:
            return 400, [error_body(str(exc), "invalid_request_error", param=exc.field)]
        result, page = yield from self._stats(samples=samples, offset=offset, limit=limit)
        if not samples:
            return 200, [_json(result)]
        pieces = [_json(result)[:-2] + b',"samples":[']  # the object without its "}\n"
        yield from _encode(page, pieces)
        pieces.append(b"]}\n")
        return 200, pieces

    def describe(self) -> str:
        """One line saying what this server does (API keys counted, never shown)."""
        s = self.settings
        limits = ", ".join(
            f"{name} {value}"
            for name, value in (("capacity", s.capacity), ("rpm", s.rpm), ("tpm", s.tpm))
            if value is not None
        )
        if s.capacity is not None:
            limits += f" ({s.overflow})"
        keys = f"{len(s.api_keys)} API key(s) required" if s.api_keys else "no API key"
        return (
            f"models {', '.join(s.models)}; ttft {s.ttft.describe()}, itl {s.itl.describe()}, "
            f"output tokens {s.output_tokens.describe()} (at most {s.max_output_tokens}); "
            f"{limits or 'no limits'}; fail {self._core.failures.describe()}; seed {s.seed}; "
            f"{keys}"
        )

    def __repr__(self) -> str:
        where = self._url or "not started"
        return f"<LlmServer {where} models={list(self.settings.models)}>"


def serve_llm_until_signalled(server: LlmServer, *, announce: Callable[[LlmServer], None]) -> None:
    """Run ``server`` on uvloop until SIGINT or SIGTERM, then stop it and return.

    ``announce(server)`` is called once it listens. Raises what ``server.start()`` raises.
    """
    run_until_signalled(server, announce)


def _now(status: int, pieces: list[bytes]) -> Work:
    """A reply that needs no steps (a generator that returns at once)."""
    yield from ()
    return status, pieces


def _finish(steps: Steps[T]) -> T:
    """Run ``steps`` to the end at once; their result."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            result: T = stop.value
            return result


def _encode(records: list[Record], pieces: list[bytes]) -> Steps[None]:
    """Append the JSON of ``records`` to ``pieces`` (``token_times`` last in each object),
    yielding every :data:`SAMPLES_SLICE` token times (a record's other fields counting as 8):
    no step encodes much more."""
    budget = SAMPLES_SLICE
    for index, record in enumerate(records):
        fields = _json(record.as_dict(times=False))[:-2]
        pieces.append((b"," if index else b"") + fields + b',"token_times":[')
        times = record.token_times
        for start in range(0, len(times), SAMPLES_SLICE):
            part = times[start : start + SAMPLES_SLICE].tolist()
            pieces.append((b"," if start else b"") + json.dumps(part)[1:-1].encode())
            budget -= len(part)
            if budget <= 0:
                budget = SAMPLES_SLICE
                yield
        pieces.append(b"]}")
        budget -= 8  # a record's other fields cost about what 8 token times do


def _whole_param(params: dict[str, list[str]], name: str) -> int | None:
    if name not in params:
        return None
    return request_whole(params[name][-1], name)


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
