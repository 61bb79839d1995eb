"""A mock OpenAI-compatible LLM server that knows the truth about every token it wrote.

It answers ``POST /v1/chat/completions`` and ``POST /v1/completions`` (streamed with
``"stream": true``, else one JSON body), their Azure OpenAI forms
``/openai/deployments/{deployment}/chat/completions?api-version=...`` and
``.../completions`` (the deployment name is the model), and ``GET /v1/models``. The
official ``openai`` SDK works against it (``base_url=server.url + "/v1"``).

**Token model.** One output token is one word of a small fixed vocabulary with a leading
space (``" fox"``), and each streamed content event carries exactly one token, so
``completion_tokens`` = content events = ``len(text.split())``. ``prompt_tokens`` is the
number of whitespace-separated words (``str.split()``) over every message's text (chat:
string contents and the ``text`` of list parts) or over the prompt string(s)
(completions; a prompt of token ids counts one per id): a prompt of N words costs exactly
N tokens, which is what synthetic prompts rely on. A request generates a length drawn
from ``output_tokens`` (``fixed:N``, ``uniform:min=A,max=B``, ``lognormal:median=N,sigma=S``
or ``max``); ``max_completion_tokens`` (else ``max_tokens``) cuts it, and the
``finish_reason`` is ``"length"`` when it did, else ``"stop"``.

**Timing.** A completion gets a concurrency slot (``capacity``; beyond it requests queue
first come first served, or get a 429 with ``overflow="refuse"``). From then on: a stream
sends its head and (chat) the ``role`` event at once, its first content token after a TTFT
draw, and each later token one ITL draw after the previous token was written; the last
token's write carries the finish event, the usage event (with
``stream_options.include_usage``) and ``[DONE]``. A non-streamed request is answered whole
after TTFT + the ITL draws. No gap is ever shorter than its draw; under uvloop, whose
timers have millisecond resolution, a gap can come out up to about 1 ms longer (1 ms ITL
measured 1.1 to 1.5 ms), and the truth records the gap that happened. RPM/TPM limits,
failures and storms are decided when the request arrives (see
:mod:`pyattacker.servers._llm_limits` and :mod:`pyattacker.servers._llm_dice`); fault
headers are listed in :mod:`pyattacker.servers._llm_handle`.

**Ground truth.** Every completion request (attempt) is recorded, whatever it was answered:
when it was received, when each content token was written to the socket (flush included,
as the echo server counts it), when it ended, its status, outcome, token counts, model,
whether it streamed, and its id, sent back as ``x-request-id``. ``GET /stats[?samples=1]``
and :meth:`LlmServer.stats` give the exact distributions (:mod:`pyattacker.servers._llm_truth`).

**What it reuses of the world model** (DESIGN.md §6): storms are
:meth:`~pyattacker.world.ProviderModel.storm_until` of a world whose endpoints are the
models, with the server's start as t = 0, and a :class:`~pyattacker.world.FailureProfile`
describes them; each request's dice come from its own stream
``f"{seed}:{model}:{ordinal}"`` as the world's rule says. It does not use
``ProviderModel.admit``: that decides one service time per request, refuses (never queues)
over capacity and spends one token per request from a tightening bucket, whereas an LLM
response needs a TTFT *and* a gap per token, a queue, and OpenAI's two plain RPM/TPM buckets
whose state goes into ``x-ratelimit-*`` headers. TTFT and ITL are :class:`Delay` specs
rather than a :class:`~pyattacker.world.LatencyProfile` because they parse from one CLI
flag each and know their exact quantiles.

**Speed.** One ``asyncio.Protocol`` per connection on httptools; tokens are written by
callbacks from one heap of due times (:mod:`pyattacker.servers._llm_ticker`, a single loop
timer for all of them), with no task and no coroutine per request or per token. Measured
with the server in its own process pinned to one core under uvloop, and a raw client on the
other core streaming 200 to 1,000 concurrent chat completions (1 ms TTFT and ITL, 1,000 to
2,000 tokens each): 120k to 155k tokens written per CPU-second of the server, one event
each (7 to 8 us per token, about a third of it the ``send`` system call); 90k at 2,000
streams. The ticker replaced one ``call_later`` per token, which cost about 2.6 us more
per token.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs

from pyattacker._checks import check_whole
from pyattacker.errors import ConfigError
from pyattacker.servers._delays import Delay
from pyattacker.servers._llm_core import LlmCore
from pyattacker.servers._llm_dice import TokenCount
from pyattacker.servers._llm_process import LlmServerProcess
from pyattacker.servers._llm_protocol import LlmProtocol
from pyattacker.servers._llm_settings import Settings, settings
from pyattacker.servers.echo import _fastest_loop
from pyattacker.world import FailureProfile

__all__ = ["LlmServer", "LlmServerProcess", "serve_llm_until_signalled"]

_CONTROL = frozenset({(b"GET", b"/stats"), (b"GET", b"/reset"), (b"POST", b"/reset")})


class LlmServer:
    """The mock LLM server on the running event loop (``async with LlmServer() as s``).

    Every argument is checked here (``ConfigError`` naming it). ``url`` exists from
    :meth:`start` on; :meth:`stats` and :meth:`reset` are plain methods, safe to call from
    the loop's thread at any time.

    - ``models``: the names it serves (Azure deployment names too); others get 404.
    - ``ttft``, ``itl``: :class:`Delay` specs (``lognormal:median=200ms,sigma=0.5``).
    - ``output_tokens``: completion lengths (``fixed:N``, ``uniform:min=A,max=B``,
      ``lognormal:median=N,sigma=S``, ``max``: always the request's ``max_tokens``).
    - ``capacity``: completions generating at once (``None``: no limit); ``overflow``:
      ``"queue"`` (wait for a slot) or ``"refuse"`` (429 at once).
    - ``rpm``, ``tpm``: rate limits per minute (``None``: none).
    - ``fail``: ``{status: fraction}`` answered at random; ``storms``: a
      :class:`~pyattacker.world.FailureProfile` or ``"rate=0.05,duration=30s,error_rate=0.5"``.
    - ``api_keys``: when given, a request needs one (``Authorization: Bearer K`` or
      ``api-key: K``). ``utilization_header``: send ``azure-openai-deployment-utilization``
      (in-flight / capacity) on completion responses; needs ``capacity``.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: str | Sequence[str] = ("mock-llm",),
        ttft: Delay | str = "lognormal:median=200ms,sigma=0.5",
        itl: Delay | str = "fixed:20ms",
        output_tokens: TokenCount | str | int = "lognormal:median=100,sigma=0.5",
        capacity: int | None = None,
        overflow: str = "queue",
        rpm: int | None = None,
        tpm: int | None = None,
        fail: Mapping[int, float] | None = None,
        storms: FailureProfile | str | None = None,
        api_keys: str | Sequence[str] = (),
        seed: int = 0,
        utilization_header: bool = False,
    ) -> None:
        self.host = host
        self.port = check_whole(port, "port", at_least=0)
        if self.port > 65535:
            raise ConfigError(f"must be a port 0..65535, got {port}", field="port")
        self.settings: Settings = settings(
            models=models,
            ttft=ttft,
            itl=itl,
            output_tokens=output_tokens,
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
        self._server: asyncio.Server | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` with the bound port; ``RuntimeError`` before :meth:`start`."""
        if self._url is None:
            raise RuntimeError("the LLM server has not been started")
        return self._url

    async def start(self) -> None:
        """Bind and listen. ``ConfigError`` (field ``port``) when the address is unusable."""
        if self._server is not None:
            raise RuntimeError("the LLM server is already started")
        loop = asyncio.get_running_loop()
        self._core.bind(loop)
        try:
            self._server = await loop.create_server(
                lambda: LlmProtocol(self._core), self.host, self.port, backlog=4096
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}",
                field="port",
                hint="use --port 0 for any free port",
            ) from None
        port = self._server.sockets[0].getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._url = f"http://{host}:{port}"

    async def stop(self) -> None:
        """Stop listening and close every connection (what is in flight is dropped)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for protocol in list(self._core.connections):
            protocol.abort()
        await server.wait_closed()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    def stats(self, *, samples: bool = False) -> dict[str, Any]:
        """The ground truth since the last reset, exact, in seconds.

        Keys: ``requests`` (completion requests recorded), ``statuses`` (count per status
        answered), ``outcomes`` (``ok``, ``error``, ``fault``, ``cut``, ``dropped``),
        ``throttled`` (429s), ``prompt_tokens`` and ``completion_tokens`` (sums over ``ok``
        requests), ``ttft``, ``e2e``, ``itl``, ``tpot`` (each ``count``, ``min``, ``mean``,
        ``p50``, ``p90``, ``p95``, ``p99``, ``p99.9``, ``max``; ``None`` but ``count`` when
        empty; over ``ok`` requests), ``in_flight`` and ``queued`` (not yet recorded),
        ``settings``; with ``samples=True`` also ``samples``, one dict per request in the
        order they ended.
        """
        core = self._core
        result = core.ledger.summary()
        result["in_flight"], result["queued"] = core.in_progress()
        result["settings"] = self.settings.describe()
        if samples:
            result["samples"] = [record.as_dict() for record in core.ledger.records]
        return result

    def reset(self) -> int:
        """Forget every record and refill the rate-limit buckets; return the records cleared.

        Requests in flight are recorded when they end, after the reset.
        """
        return self._core.clear()

    def _control(self, method: bytes, path: bytes, query: bytes) -> tuple[int, bytes] | None:
        """Answer ``/stats`` or ``/reset``; ``None`` for any other request."""
        if (method, path) not in _CONTROL:
            return None
        if path == b"/reset":
            return 200, _json({"cleared": self.reset()})
        params = parse_qs(query.decode("latin-1"))
        wanted = params.get("samples", ["0"])[-1].lower() in ("1", "true", "yes")
        return 200, _json(self.stats(samples=wanted))

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
            f"output tokens {s.output_tokens.describe()}; {limits or 'no limits'}; "
            f"fail {self._core.failures.describe()}; seed {s.seed}; {keys}"
        )

    def __repr__(self) -> str:
        where = self._url or "not started"
        return f"<LlmServer {where} models={list(self.settings.models)}>"


def serve_llm_until_signalled(server: LlmServer, *, announce: Callable[[LlmServer], None]) -> None:
    """Run ``server`` on uvloop until SIGINT or SIGTERM, then stop it and return.

    ``announce(server)`` is called once it listens. Raises what ``server.start()`` raises.
    """
    with asyncio.Runner(loop_factory=_fastest_loop()) as runner:
        runner.run(_serve(server, announce))


async def _serve(server: LlmServer, announce: Callable[[LlmServer], None]) -> None:
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stopped.set)
    try:
        async with server:
            announce(server)
            await stopped.wait()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
