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
process, as :func:`serve_until_signalled` does the echo server, and
:func:`serve_llm_fleet` (:func:`serve_echo_fleet`) runs several processes behind one
port with one ``/stats``.
"""

from pyattacker.servers._delays import Delay
from pyattacker.servers._echo_fleet import serve_echo_fleet
from pyattacker.servers._fleet import check_processes
from pyattacker.servers._llm_fleet import serve_llm_fleet
from pyattacker.servers._process import EchoServerProcess
from pyattacker.servers._tls import server_tls
from pyattacker.servers.echo import EchoServer, serve_until_signalled
from pyattacker.servers.llm import LlmServer, LlmServerProcess, serve_llm_until_signalled

__all__ = [
    "Delay",
    "EchoServer",
    "EchoServerProcess",
    "LlmServer",
    "LlmServerProcess",
    "check_processes",
    "serve_echo_fleet",
    "serve_llm_fleet",
    "serve_llm_until_signalled",
    "serve_until_signalled",
    "server_tls",
]
