"""``open_store``: the one place a store location (a path, ``":memory:"``, or a store
already built) becomes a :class:`Store`."""

from __future__ import annotations

import os

from pyattacker import _plugins
from pyattacker.errors import ConfigError
from pyattacker.store._memory import MemoryStore
from pyattacker.store._protocol import Store
from pyattacker.store._sqlite import SQLiteStore

__all__ = ["MEMORY", "open_store"]

#: The location that means "keep the record in memory".
MEMORY = ":memory:"


def open_store(location: str | os.PathLike[str] | Store, *, read_only: bool = False) -> Store:
    """The store at ``location``.

    ``":memory:"`` gives a new :class:`MemoryStore`; a :class:`Store` instance is returned
    as it is (``read_only`` is then the caller's business); anything else is a file path
    opened as a :class:`SQLiteStore` (created if missing, unless ``read_only``). Raises
    ``ConfigError`` as :class:`SQLiteStore` does for a path that cannot be used.
    """
    if isinstance(location, Store):
        return location
    if isinstance(location, str) and location == MEMORY:
        return MemoryStore(read_only=read_only)
    if isinstance(location, str) and "://" in location:
        return _plugin_store(location, read_only=read_only)
    return SQLiteStore(location, read_only=read_only)


def _plugin_store(location: str, *, read_only: bool) -> Store:
    """``NAME://...``: the store class an installed plugin declares as ``NAME`` (entry point
    group ``pyattacker.stores``), called with the location and ``read_only``."""
    scheme = location.split("://", 1)[0]
    found = _plugins.load("pyattacker.stores", scheme, field="store")
    if found is None:
        raise ConfigError(
            f"no store plugin {scheme!r} is installed for {location!r}",
            field="store",
            hint="a path to a SQLite file, :memory:, or NAME://... of an installed "
            "pyattacker.stores plugin (`pyattacker plugins` lists them)",
        )
    store = found(location, read_only=read_only)
    if not isinstance(store, Store):
        raise ConfigError(
            f"the store plugin {scheme!r} made a {type(store).__name__}, not a Store", field="store"
        )
    return store
