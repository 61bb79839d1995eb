"""Redirects: a 3xx answer is a redirect, not an OK; ``follow_redirects`` follows them.

An answer with a status from 300 to 399 and a ``Location`` header (``304 Not Modified``
and a 3xx without one are answers like a 200) ends its attempt with a
:class:`~pyattacker.errors.RedirectError` (error class ``redirect``): unfollowed, it is
the request's end, counted as failed, since the endpoint that was meant to be measured
did not answer. With ``follow_redirects`` N, the request sends each hop as one more
attempt of it (at most N), at once, so that the attempts of a record are exactly the
requests a server saw.

Each hop goes where ``Location`` says, resolved against the URL that answered: the same
origin or another (the client keeps a pool of connections per origin). As browsers and
curl do, a 303, or a 301/302 answering a POST, is followed by a GET without a body; 307
and 308 repeat the method and the body. On the way to another origin, the headers whose
names look like credentials (``Authorization``, ``api-key``, ...) are not sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin

from pyattacker._secrets import is_secret_key
from pyattacker.attack._plan import Target
from pyattacker.errors import ConfigError, RedirectError
from pyattacker.http import URL, Response

__all__ = ["Hop", "next_hop", "redirect_error"]


@dataclass(frozen=True, slots=True)
class Hop:
    """Where the next attempt of a redirected request goes, and what it sends."""

    target: Target
    method: str
    body: bytes | None


def redirect_error(response: Response) -> RedirectError | None:
    """The :class:`RedirectError` of a 3xx ``response`` with a ``Location``, else ``None``."""
    location = response.headers.get("location")
    if location is None or response.status == 304:
        return None
    return RedirectError(
        f"HTTP {response.status} redirect to {location[:200]}"
        " (not followed: past the hops --follow-redirects N allows, 0 by default)",
        status=response.status,
        location=location,
        url=response.url,
        timing=response.timing,
    )


def next_hop(error: RedirectError, hop: Hop) -> Hop | None:
    """The hop that follows ``error`` (the answer to ``hop``), or ``None`` when its
    ``Location`` is not an ``http(s)`` URL we can send to (the redirect then stands)."""
    url = hop.target.url
    base = f"{url.scheme}://{url.authority}{url.target}"  # not str(url): that masks keys
    try:
        to = URL.parse(urljoin(base, error.location.strip()), field="location")
    except ConfigError:
        return None
    method, body = hop.method, hop.body
    if error.status == 303 or (error.status in (301, 302) and method == "POST"):
        method, body = ("HEAD" if method == "HEAD" else "GET"), None
    headers = hop.target.headers
    if to.origin != url.origin:
        headers = tuple((name, value) for name, value in headers if not is_secret_key(name))
    return Hop(Target(hop.target.id, to, headers), method, body)
