"""Masking of secrets in anything we print, log, emit or store.

A value is secret when its key (at any depth) looks like a credential: it contains ``key``,
``token``, ``secret``, ``password``, ``passwd``, ``authorization``, ``credential`` or
``cookie``. Over-masking (``cache_key``) is the safe direction and is accepted on purpose.

A URL's query carries secrets too (``?key=``, ``api-key=``, ``access_token=``, a signed
URL's ``sig=``): :func:`mask_url` hides the value of every query parameter whose name
looks like one, in a URL or in any text that quotes one. It is what ``str()`` of a
:class:`~pyattacker.http.URL` shows, so reports, samples, error messages and stderr
lines show ``?key=***`` while the request line carries the real value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

__all__ = [
    "MASK",
    "is_secret_key",
    "is_secret_param",
    "mask",
    "mask_url",
    "scrub",
    "secret_values",
]

MASK = "***"
_SECRET_KEY = re.compile(r"key|token|secret|passw|authoriz|credential|cookie", re.IGNORECASE)
# Query parameters name their secrets more tersely than headers and fields do.
_SECRET_PARAM = re.compile(
    r"key|token|secret|passw|pwd|auth|credential|cookie|sig|session", re.IGNORECASE
)
# `name=value` after `?`, `&` or `;`, as a URL (or a message quoting one) carries it: the
# value ends at the next separator, fragment, quote or whitespace.
_PARAM = re.compile(r"([?&;])([^=&;#?\s'\"<>]+)=([^&;#\s'\"<>]*)")


def is_secret_key(name: object) -> bool:
    return isinstance(name, str) and _SECRET_KEY.search(name) is not None


def is_secret_param(name: str) -> bool:
    """Whether a query parameter's name (percent-decoded) looks like a credential's."""
    return _SECRET_PARAM.search(unquote(name)) is not None


def mask_url(text: str) -> str:
    """``text`` with the value of every secret-looking query parameter replaced by ``***``
    (``?api_key=sk-1&q=2`` becomes ``?api_key=***&q=2``); anything else unchanged.

    ``text`` may be a URL or a message that quotes URLs. Empty values stay empty.
    """
    if "=" not in text:
        return text
    return _PARAM.sub(_masked_param, text)


def _masked_param(match: re.Match[str]) -> str:
    separator, name, value = match.groups()
    if value and is_secret_param(name):
        return f"{separator}{name}={MASK}"
    return match.group(0)


def mask(value: Any) -> Any:
    """A copy of ``value`` with every secret-looking mapping entry replaced by ``***``.

    Mappings become plain dicts and lists/tuples keep their kind; other values are returned
    as they are. Never mutates its argument.
    """
    if isinstance(value, Mapping):
        return {k: (MASK if is_secret_key(k) else mask(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mask(v) for v in value)
    return value


def secret_values(value: Any) -> set[str]:
    """Every string stored under a secret-looking key of ``value``, at any depth."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        for k, v in value.items():
            if is_secret_key(k):
                found.update(_strings(v))
            else:
                found.update(secret_values(v))
    elif isinstance(value, list | tuple):
        for v in value:
            found.update(secret_values(v))
    return found


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value} if value else set()
    if isinstance(value, Mapping):
        return {s for v in value.values() for s in _strings(v)}
    if isinstance(value, list | tuple):
        return {s for v in value for s in _strings(v)}
    return set()


def scrub(text: str, secrets: set[str]) -> str:
    """``text`` with every known secret replaced by ``***`` (for error messages we relay:
    a client library may quote the key it was given)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
