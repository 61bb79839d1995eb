"""What a run records never holds a secret, and always holds text the store can keep.

Resource specs are masked by key name before they are stored (``_secrets.mask``). That is
not enough: an SDK's error message may quote the key it was given ("Incorrect API key
provided: sk-..."), a task may echo a header into its output, a URL may carry
``?api-key=``. So the Runner collects every secret *value* of every resource in its pools
(options and meta, under secret-looking keys, and the last word of values like
``"Bearer sk-..."``) and replaces each occurrence with ``***`` in every error message,
traceback, event and artifact it writes.

Text is also made storable: a lone surrogate (``b"caf\\xff".decode("utf-8",
"surrogateescape")`` in an exception message) cannot be encoded as UTF-8, and SQLite would
refuse the whole batch; it is kept as a ``\\udcff`` escape instead.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterable, Mapping
from typing import Any

from pyattacker._secrets import MASK, mask, secret_values
from pyattacker.pool import Pool, Resource

__all__ = ["Scrubber"]

_SHORTEST = 6  # shorter "secrets" (a word of a header value) would mask ordinary text


class Scrubber:
    """Replaces the secrets of ``pools`` in what a run records; see the module docstring."""

    def __init__(self, pools: Iterable[Pool]) -> None:
        self._found: set[str] = set()
        self._text: list[str] = []
        self._bytes: list[bytes] = []
        for pool in pools:
            for resource in pool.resources:
                self.add(resource)

    def add(self, resource: Resource) -> None:
        """Scrub ``resource``'s secrets too (one published to a pool mid-run)."""
        found = secret_values(resource.options) | secret_values(resource.meta)
        words = {word for value in found for word in value.split() if len(word) >= _SHORTEST}
        self._found |= (found | words) - {MASK, ""}
        self._text = sorted(self._found, key=len, reverse=True)
        self._bytes = [s.encode("utf-8", "surrogatepass") for s in self._text]

    def text(self, text: str) -> str:
        """``text`` without secrets, encodable as UTF-8."""
        for secret in self._text:
            if secret in text:
                text = text.replace(secret, MASK)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return text

    def data(self, data: bytes) -> bytes:
        """An artifact's bytes without secrets (a task that echoed a key into its output)."""
        for secret in self._bytes:
            if secret in data:
                data = data.replace(secret, MASK.encode())
        return data

    def error(self, error: BaseException) -> str:
        return self.text(f"{type(error).__name__}: {error}")

    def traceback(self, error: BaseException) -> str:
        return self.text("".join(traceback.format_exception(error)))

    def event_data(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """``data`` as plain JSON values (anything else as its ``repr``), secret-looking keys
        masked and secret values replaced."""
        text = self.text(json.dumps(mask(dict(data)), default=repr))
        loaded: dict[str, Any] = json.loads(text)
        return loaded
