"""A lean, timed HTTP/1.1 client for load generation: asyncio protocols on httptools.

Keep-alive connections are pooled per origin (bounded, FIFO waiters), TLS is the ``ssl``
module's, and every request carries a :class:`Timing` read from the client's ``Clock``.
It never retries: a failure is an :class:`~pyattacker.errors.HttpError` for the retry
policy to judge and record. See :class:`HttpClient`.
"""

from pyattacker.http._client import HttpClient
from pyattacker.http._limits import HEAD_SIZE_RANGE, KEEP_BODY_RANGE, Limits, parse_size
from pyattacker.http._request import check_request
from pyattacker.http._resolve import Resolve, connect_map
from pyattacker.http._response import Response
from pyattacker.http._timeouts import Timeouts
from pyattacker.http._tls import TlsOptions
from pyattacker.http._types import Headers, Timing, Waiter
from pyattacker.http._url import URL

__all__ = [
    "HEAD_SIZE_RANGE",
    "KEEP_BODY_RANGE",
    "URL",
    "Headers",
    "HttpClient",
    "Limits",
    "Resolve",
    "Response",
    "Timeouts",
    "Timing",
    "TlsOptions",
    "Waiter",
    "check_request",
    "connect_map",
    "parse_size",
]
