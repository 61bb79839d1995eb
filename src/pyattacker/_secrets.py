"""Masking of secrets in anything we print, log, emit or store.

A value is secret when its key (at any depth) looks like a credential: it contains ``key``,
``token``, ``secret``, ``password``, ``passwd``, ``authorization``, ``credential`` or
``cookie``. Over-masking (``cache_key``) is the safe direction and is accepted on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_key", "mask", "scrub", "secret_values"]

MASK = "***"
_SECRET_KEY = re.compile(r"key|token|secret|passw|authoriz|credential|cookie", re.IGNORECASE)


def is_secret_key(name: object) -> bool:
    return isinstance(name, str) and _SECRET_KEY.search(name) is not None


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
