"""Servers that know the right answer.

The calibrated echo server (:mod:`pyattacker.servers.echo`) holds every request for a draw
from a known :class:`Delay` and records exactly how long it held each one: the ground truth
that our load generator's percentiles are checked against. :class:`EchoServer` runs it on
the current event loop, :class:`EchoServerProcess` as its own process
(``pyattacker echo-server``).

The mock LLM server (:mod:`pyattacker.servers.llm`) speaks OpenAI's chat and completions
API, streamed or not, on a configured timing model (TTFT, inter-token latency, lengths,
capacity, RPM/TPM limits, failures, storms) and records when it wrote every token:
:class:`LlmServer` on the current loop, :class:`LlmServerProcess` as its own process
(``pyattacker llm-server``); :func:`serve_llm_until_signalled` runs one as the whole
process, as :func:`serve_until_signalled` does the echo server.
"""

from pyattacker.servers._core import check_fail, check_status
from pyattacker.servers._delays import Delay
from pyattacker.servers._guard import HEAD_LIMIT, MAX_CONNECTIONS, REQUEST_TIMEOUT_S
from pyattacker.servers._llm_dice import STORM_FORM, TOKEN_FORMS, TokenCount, parse_storms
from pyattacker.servers._llm_process import API_KEYS_ENV
from pyattacker.servers._llm_settings import MAX_OUTPUT_TOKENS
from pyattacker.servers._process import EchoServerProcess
from pyattacker.servers.echo import EchoServer, serve_until_signalled
from pyattacker.servers.llm import LlmServer, LlmServerProcess, serve_llm_until_signalled

__all__ = [
    "API_KEYS_ENV",
    "HEAD_LIMIT",
    "MAX_CONNECTIONS",
    "MAX_OUTPUT_TOKENS",
    "REQUEST_TIMEOUT_S",
    "STORM_FORM",
    "TOKEN_FORMS",
    "Delay",
    "EchoServer",
    "EchoServerProcess",
    "LlmServer",
    "LlmServerProcess",
    "TokenCount",
    "check_fail",
    "check_status",
    "parse_storms",
    "serve_llm_until_signalled",
    "serve_until_signalled",
]
