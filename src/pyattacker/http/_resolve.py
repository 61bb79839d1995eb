"""``Resolve``: connect to another address for a host and port, as curl's ``--resolve``.

A service behind a name (``api.example.com``) is often load-tested on one machine of it,
or on a staging box that answers for the same name: the request must carry the name (the
``Host`` header, the TLS server name, the certificate checked against it) while the TCP
connection goes to an address the user chooses. ``Resolve("api.example.com", 443,
"10.0.0.5")`` says exactly that for URLs of that host and port; every other URL is
connected to as it says. Redirects to the same host and port follow it too, as curl's do.

The text form is curl's: ``HOST:PORT:ADDRESS`` (an IPv6 address may be bracketed,
``[::1]``). Unlike curl's, one address per entry and no ``*`` for any host.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from pyattacker.errors import ConfigError

__all__ = ["Resolve", "connect_map"]

_EXAMPLE = "HOST:PORT:ADDRESS, e.g. api.example.com:443:127.0.0.1"


@dataclass(frozen=True, slots=True)
class Resolve:
    """Connections for URLs of ``host`` and ``port`` go to ``address`` (an IP address, or a
    name this machine resolves); the URL, its ``Host`` header, SNI and the certificate's
    name stay ``host``."""

    host: str
    port: int
    address: str

    def __post_init__(self) -> None:
        host = self.host.strip().lower() if isinstance(self.host, str) else ""
        if not host or any(c in host for c in ":/ []"):
            raise ConfigError(f"{self.host!r} is not a host name", field="resolve", hint=_EXAMPLE)
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise ConfigError(f"port must be a whole number, got {self.port!r}", field="resolve")
        if not 0 < self.port < 65536:
            raise ConfigError(
                f"port {self.port} is not between 1 and 65535", field="resolve", hint=_EXAMPLE
            )
        address = self.address.strip() if isinstance(self.address, str) else ""
        if address.startswith("[") and address.endswith("]"):
            address = address[1:-1]
        if not address or any(c in address for c in "/ []") or not _address(address):
            raise ConfigError(f"{self.address!r} is not an address", field="resolve", hint=_EXAMPLE)
        object.__setattr__(self, "host", host)
        object.__setattr__(self, "address", address)

    @classmethod
    def parse(cls, text: str) -> Resolve:
        """``HOST:PORT:ADDRESS`` as curl writes it; a ``ConfigError`` naming ``resolve``
        otherwise."""
        host, sep, rest = text.partition(":")
        port, sep2, address = rest.partition(":")
        if not sep or not sep2:
            raise ConfigError(f"{text!r} is not HOST:PORT:ADDRESS", field="resolve", hint=_EXAMPLE)
        if not port.isdigit():
            raise ConfigError(
                f"{port!r} in {text!r} is not a port number", field="resolve", hint=_EXAMPLE
            )
        return cls(host, int(port), address)

    def __str__(self) -> str:
        address = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.host}:{self.port}:{address}"


def connect_map(entries: Iterable[Resolve]) -> dict[tuple[str, int], str]:
    """``(host, port) -> address`` for a client; a ``ConfigError`` when one host and port
    is given two different addresses (which one would be meant?)."""
    mapping: dict[tuple[str, int], str] = {}
    for entry in entries:
        if not isinstance(entry, Resolve):
            raise ConfigError(f"must be a Resolve, got {type(entry).__name__}", field="resolve")
        key = (entry.host, entry.port)
        if mapping.get(key, entry.address) != entry.address:
            raise ConfigError(
                f"{entry.host}:{entry.port} is given two addresses "
                f"({mapping[key]} and {entry.address})",
                field="resolve",
                hint="give each HOST:PORT once",
            )
        mapping[key] = entry.address
    return mapping


def _address(text: str) -> bool:
    """An IP address, or something that reads as a host name (letters, digits, dots and
    hyphens): resolved by the system when the connection opens."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return all(part and part.replace("-", "").isalnum() for part in text.split("."))
    return True
