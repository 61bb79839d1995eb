"""``pyattacker llm-server``: the mock OpenAI-compatible LLM server as a command."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

import click

from pyattacker.cli._echo import parse_fails
from pyattacker.cli._server_limits import limit_options
from pyattacker.errors import ConfigError
from pyattacker.servers import (
    Delay,
    LlmServer,
    check_processes,
    serve_llm_fleet,
    serve_llm_until_signalled,
)
from pyattacker.servers.llm import (
    API_KEYS_ENV,
    BODY_LIMIT,
    MAX_OUTPUT_TOKENS,
    STORM_FORM,
    TOKEN_FORMS,
    TokenCount,
    parse_storms,
)

__all__ = ["llm_server"]

_DELAY_FORMS = "fixed:20ms | uniform:min=10ms,max=30ms | lognormal:median=200ms,sigma=0.5 | ..."
# LlmServer's argument names -> this command's options, for errors raised past our checks.
_OPTIONS = {
    "models": "--model",
    "api_keys": "--api-key",
    "utilization_header": "--utilization-header",
}
# ... and the hints that say what to do in this command's words.
_HINTS = {
    "host": "give an address of this machine: --host 127.0.0.1, 0.0.0.0 (every interface) or ::1",
    "port": "--port 0 picks a free port",
    "utilization_header": "add --capacity N: the header is in flight over capacity",
    "output_tokens": "lower --output-tokens, or raise --max-output-tokens",
    "capacity": "leave it out for no limit",
    "rpm": "leave it out for no limit",
    "tpm": "leave it out for no limit",
}
_FAIL_HINT = "e.g. --fail 503=0.01,500=0.005"


@click.command("llm-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, help="Port to listen on; 0 picks a free one.")
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="NAME",
    help="A model (or Azure deployment) name to serve; repeat for more. [default: mock-llm]",
)
@click.option(
    "--ttft",
    default="lognormal:median=200ms,sigma=0.5",
    show_default=True,
    metavar="SPEC",
    help=f"Time to first token, from the moment a request gets a slot: {_DELAY_FORMS}",
)
@click.option(
    "--itl",
    default="fixed:20ms",
    show_default=True,
    metavar="SPEC",
    help="Inter-token latency: the gap after each token is written, same forms as --ttft.",
)
@click.option(
    "--output-tokens",
    default="lognormal:median=100,sigma=0.5",
    show_default=True,
    metavar="SPEC",
    help=f"Completion length before max_tokens cuts it: {TOKEN_FORMS} "
    "(max: always the request's max_tokens, 16 when it sets none).",
)
@click.option(
    "--max-output-tokens",
    default=MAX_OUTPUT_TOKENS,
    show_default=True,
    metavar="N",
    help="The most tokens a completion may have: a request whose max_tokens (or "
    "max_completion_tokens) or x-mock-tokens asks for more is a 400, a drawn length is cut "
    "to it.",
)
@click.option(
    "--capacity",
    type=int,
    metavar="N",
    help="Completions generating at once; more wait for a slot (see --overflow). "
    "[default: no limit]",
)
@click.option(
    "--overflow",
    type=click.Choice(["queue", "refuse"]),
    default="queue",
    show_default=True,
    help="Beyond --capacity: queue (first come, first served) or refuse with 429.",
)
@click.option(
    "--rpm", type=int, metavar="N", help="Requests per minute before 429. [default: none]"
)
@click.option(
    "--tpm",
    type=int,
    metavar="N",
    help="Tokens per minute before 429; a request costs its prompt tokens plus max_tokens "
    "(or its completion length when it sets none). [default: none]",
)
@click.option(
    "--fail",
    "fails",
    multiple=True,
    metavar="STATUS=FRACTION",
    help="Answer this fraction of completions with STATUS (OpenAI-shaped error). Repeat it, "
    "or separate with commas: --fail 503=0.01,500=0.005.",
)
@click.option(
    "--storms",
    metavar="SPEC",
    help=f"Periods of bad weather ({STORM_FORM}): each window of DURATION is a storm with "
    "probability RATE, and a request in a storm fails with probability ERROR_RATE.",
)
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    envvar=API_KEYS_ENV,
    metavar="KEY",
    help=f"Require this key (Authorization: Bearer KEY or api-key: KEY); repeatable. Also read "
    f"from ${API_KEYS_ENV} (separated by spaces), which keeps keys off the command line.",
)
@click.option("--seed", default=0, show_default=True, help="Same seed, same dice per request.")
@click.option(
    "--utilization-header",
    is_flag=True,
    help="Send azure-openai-deployment-utilization (in flight / --capacity) on completions.",
)
@click.option(
    "--processes",
    default=1,
    show_default=True,
    metavar="N",
    help="Run N server processes behind the one port (SO_REUSEPORT, Linux): the kernel "
    "spreads connections over them, and /stats and /reset, wherever they land, cover all "
    "of them (exact). --capacity, --rpm, --tpm, --storms and the queue are per process.",
)
@limit_options(BODY_LIMIT, "a 128k-token prompt is about 0.5 MiB")
def llm_server(**options: Any) -> None:
    """Serve a mock OpenAI-compatible LLM API that records the truth about every token.

    The first line on stdout is the server's URL (http://127.0.0.1:PORT); one line on
    stderr describes the settings. Runs until SIGINT or SIGTERM, then exits 0.

    \b
      POST /v1/chat/completions, /v1/completions     streamed ("stream": true) or not
      POST /openai/deployments/NAME/chat/completions Azure OpenAI (NAME is the model);
           /openai/v1/chat/completions               Azure's v1 API, as /v1
      GET  /v1/models, /v1/models/{name}             the --model names, or one of them
      GET  /stats[?samples=1[&offset=N&limit=M]]     exact TTFT, e2e, ITL, TPOT (JSON, s)
      POST /reset                                    a new experiment: records, buckets,
                                                     dice numbering and storms start over
    With --api-key, every path needs a key, /stats and /reset too.

    One token is one word: prompt_tokens is the number of whitespace-separated words in
    the messages (or prompt), and every streamed content event carries one word. Every
    response carries x-request-id, the id of its record in /stats?samples=1.

    \b
    Request headers pin one request (a bad or out-of-range value is a 400 naming it):
      x-mock-ttft: 5ms   x-mock-itl: 1ms   (each at most 1h)
      x-mock-tokens: 20  (at most --max-output-tokens)
      x-mock-fault: not-openai | broken-sse[:K] | cut-mid-token[:K] | hang | status:503

    Limits against hostile clients: a head over --max-head-size is a 431, a body over
    --max-body-size a 413, a connection slower than --request-timeout is closed, and one
    beyond --max-connections is closed at once.

    \b
    Examples:
      pyattacker llm-server --model gpt-4o-mini
      pyattacker llm-server --port 8000 --ttft lognormal:median=300ms,sigma=0.4 --itl 15ms
      pyattacker llm-server --capacity 8 --rpm 600 --tpm 100000 --fail 503=0.01
      pyattacker llm-server --output-tokens max --storms rate=0.1,duration=30s,error_rate=0.5
      PYATTACKER_LLM_SERVER_API_KEYS=sk-test pyattacker llm-server --model gpt-4o
      pyattacker llm-server --processes 2 --ttft 50ms --itl 10ms   # two cores' worth
    """
    flags = _LlmServerFlags(**options)
    flags.check()
    try:
        if flags.processes > 1:
            server = flags.server()
            serve_llm_fleet(
                lambda port: replace(flags, port=port).server(),
                flags.processes,
                host=flags.host,
                port=flags.port,
                announce=lambda url: _announce_url(url, server, flags.processes),
            )
            return
        serve_llm_until_signalled(flags.server(), announce=_announce)
    except ConfigError as exc:
        raise _in_our_words(exc) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class _LlmServerFlags:
    """The options of ``pyattacker llm-server`` as click hands them over."""

    host: str
    port: int
    models: tuple[str, ...]
    ttft: str
    itl: str
    output_tokens: str
    max_output_tokens: int
    capacity: int | None
    overflow: str
    rpm: int | None
    tpm: int | None
    fails: tuple[str, ...]
    storms: str | None
    api_keys: tuple[str, ...]
    seed: int
    utilization_header: bool
    max_head_size: int
    max_body_size: int
    request_timeout: str
    max_connections: int
    processes: int

    def check(self) -> None:
        """Refuse out-of-range numbers before the server is built, naming the flag as the
        user typed it (and, for a limit, that leaving it out means none)."""
        checks = (
            ("--port", self.port, 0),
            ("--seed", self.seed, 0),
            ("--max-output-tokens", self.max_output_tokens, 1),
        )
        for option, value, least in checks:
            if value < least:
                raise ConfigError(f"must be >= {least}, got {value}", field=option)
        check_processes(self.processes, "--processes")
        if self.port > 65535:
            raise ConfigError(f"must be a port 0..65535, got {self.port}", field="--port")
        limits = (("--capacity", self.capacity), ("--rpm", self.rpm), ("--tpm", self.tpm))
        for option, limit in limits:
            if limit is not None and limit < 1:
                raise ConfigError(
                    f"must be >= 1, got {limit}", field=option, hint="leave it out for no limit"
                )

    def server(self) -> LlmServer:
        """The server these options describe; a ConfigError names the library's field."""
        return LlmServer(
            host=self.host,
            port=self.port,
            models=self.models or ("mock-llm",),
            ttft=Delay.parse(self.ttft, field="--ttft"),
            itl=Delay.parse(self.itl, field="--itl"),
            output_tokens=TokenCount.parse(self.output_tokens, field="--output-tokens"),
            max_output_tokens=self.max_output_tokens,
            capacity=self.capacity,
            overflow=self.overflow,
            rpm=self.rpm,
            tpm=self.tpm,
            fail=parse_fails(self.fails, example="503=0.01", total_hint=_FAIL_HINT),
            storms=parse_storms(self.storms, field="--storms"),
            api_keys=self.api_keys,
            seed=self.seed,
            utilization_header=self.utilization_header,
            max_head_size=self.max_head_size,
            max_body_size=self.max_body_size,
            request_timeout=self.request_timeout,
            max_connections=self.max_connections,
        )


def _in_our_words(exc: ConfigError) -> ConfigError:
    """``exc`` naming this command's option (``--port``, not ``port``) and its hint."""
    if exc.field is None or exc.field.startswith("--"):
        return exc
    option = _OPTIONS.get(exc.field, "--" + exc.field.replace("_", "-"))
    return ConfigError(exc.message, field=option, hint=_HINTS.get(exc.field, exc.hint))


def _announce(server: LlmServer) -> None:
    _announce_url(server.url, server, 1)


def _announce_url(url: str, server: LlmServer, processes: int) -> None:
    # The URL first and flushed: a script reading our stdout waits for exactly this line.
    sys.stdout.write(url + "\n")
    sys.stdout.flush()
    many = f"{processes} processes (limits per process); " if processes > 1 else ""
    click.echo(f"llm-server: {server.describe()}; {many}GET /stats, POST /reset", err=True)
