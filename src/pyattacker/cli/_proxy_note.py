"""A note on stderr when the environment names a proxy the attack will not use.

The client connects straight to each target (docs/attack.md, "What the client does not
do"); a user whose shell sets ``HTTPS_PROXY`` for everything else would otherwise find out
from connection errors, or not at all when the target is also reachable directly (and the
figures then measure a path their other tools do not take).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

__all__ = ["proxy_note"]

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def proxy_note(urls: Iterable[str], environ: Mapping[str, str] = os.environ) -> str | None:
    """The note, when a proxy variable is set (either case) and a target is not on this
    machine or under ``NO_PROXY``; else None."""
    named = [v for v in _PROXY_VARIABLES for k in (v, v.lower()) if environ.get(k)]
    if not named:
        return None
    excluded = [h.strip().lstrip(".").lower() for h in _no_proxy(environ).split(",") if h.strip()]
    for url in urls:
        host = (urlsplit(url).hostname or "").lower()
        if host in _LOOPBACK or host.startswith("127.") or _under(host, excluded):
            continue
        return (
            f"note: {', '.join(dict.fromkeys(named))} is set and not used: pyattacker connects "
            f"straight to {host} (it speaks to no proxy; see docs/attack.md)"
        )
    return None


def _no_proxy(environ: Mapping[str, str]) -> str:
    return environ.get("NO_PROXY") or environ.get("no_proxy") or ""


def _under(host: str, excluded: list[str]) -> bool:
    return "*" in excluded or any(host == e or host.endswith("." + e) for e in excluded)
