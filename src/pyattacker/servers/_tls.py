"""The server side of TLS for the test servers: a context from a certificate and its key,
optionally asking every client for a certificate signed by a given CA."""

from __future__ import annotations

import ssl

from pyattacker.errors import ConfigError

__all__ = ["server_tls"]


def server_tls(cert: str, key: str | None = None, client_ca: str | None = None) -> ssl.SSLContext:
    """A server-side context serving ``cert`` (PEM; ``key`` if the key is in another file);
    with ``client_ca``, a client must present a certificate that CA signed. A file that
    cannot be used is a :class:`ConfigError` naming ``tls_cert``, ``tls_key`` or
    ``tls_client_ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"cannot serve the certificate {cert!r}: {exc}",
            field="tls_cert" if key is None else "tls_key",
            hint="a PEM certificate and its unencrypted key",
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"cannot read the client CA {client_ca!r}: {exc}",
                field="tls_client_ca",
                hint="a PEM file with the CA certificate(s) clients' certificates come from",
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context
