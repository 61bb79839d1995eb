"""Servers that know the right answer.

The calibrated echo server (:mod:`pyattacker.servers.echo`) holds every request for a draw
from a known :class:`Delay` and records exactly how long it held each one: the ground truth
that our load generator's percentiles are checked against. :class:`EchoServer` runs it on
the current event loop, :class:`EchoServerProcess` as its own process
(``pyattacker echo-server``).
"""

from pyattacker.servers._delays import Delay
from pyattacker.servers._process import EchoServerProcess
from pyattacker.servers.echo import EchoServer, serve_until_signalled

__all__ = ["Delay", "EchoServer", "EchoServerProcess", "serve_until_signalled"]
