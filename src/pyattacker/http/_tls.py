"""``TlsOptions``: how the client speaks TLS to ``https://`` URLs, checked before any traffic.

The default (no options) is the ``ssl`` module's default context: the system's trusted
certificate authorities, the host name checked against the certificate. ``cacert`` trusts
a certificate authority of one's own (a bundle file, PEM) instead; ``insecure`` checks
nothing (the connection is still encrypted, to whoever answers); ``cert`` and ``key`` give
the client certificate a server that asks for one receives (``key`` may be in the ``cert``
file, unencrypted: a key behind a passphrase is refused, never asked for). SNI is always
the URL's host (set where the connection opens).

Every file is read here, once, when the options are built: a path that does not exist or
does not hold what it should is a :class:`~pyattacker.errors.ConfigError` naming the option
(``cacert``, ``cert``, ``key``) before a request is sent.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from pyattacker.errors import ConfigError

__all__ = ["TlsOptions"]


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """TLS settings of a client: ``insecure``, ``cacert``, ``cert``, ``key`` (paths).

    :attr:`context` is the ``ssl.SSLContext`` they describe, built at construction (which
    raises ``ConfigError`` for a file that cannot be used, or for ``key`` without ``cert``).
    ``insecure`` with ``cacert`` is refused too: the one undoes the other.
    """

    insecure: bool = False
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    context: ssl.SSLContext = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.insecure and self.cacert is not None:
            raise ConfigError(
                "insecure checks no certificate, so a CA file would not be used",
                field="cacert",
                hint="give one of insecure or cacert",
            )
        if self.key is not None and self.cert is None:
            raise ConfigError(
                "a client key needs its certificate", field="key", hint="give cert FILE too"
            )
        object.__setattr__(self, "context", self._build())

    @property
    def default(self) -> bool:
        """Whether these are the defaults (verify against the system's CAs, no client cert)."""
        return not self.insecure and self.cacert is None and self.cert is None

    def _build(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cacert is not None:
            _readable(self.cacert, "cacert")
            try:
                context.load_verify_locations(cafile=self.cacert)
            except (ssl.SSLError, ValueError) as exc:
                raise ConfigError(
                    f"{self.cacert!r} holds no usable CA certificate ({exc})",
                    field="cacert",
                    hint="a PEM file with one or more CA certificates",
                ) from None
        if self.cert is not None:
            _readable(self.cert, "cert")
            if self.key is not None:
                _readable(self.key, "key")
            try:
                # No passphrase: OpenSSL would otherwise ask for one on the terminal.
                context.load_cert_chain(self.cert, self.key, password=_no_passphrase)
            except (ssl.SSLError, ValueError) as exc:
                field_name = "cert" if self.key is None else "key"
                key_file = self.key if self.key is not None else self.cert
                if _encrypted(key_file):
                    raise ConfigError(
                        f"the private key in {key_file!r} is encrypted (behind a passphrase), "
                        "and an attack cannot stop to ask for it",
                        field=field_name,
                        hint=f"decrypt a copy: openssl pkey -in {key_file} -out plain.key, "
                        "and give that",
                    ) from None
                raise ConfigError(
                    f"cannot use the client certificate {self.cert!r} ({exc})",
                    field=field_name,
                    hint="a PEM certificate, and its unencrypted private key (in the "
                    "same file, or given as the key)",
                ) from None
        return context

    def to_dict(self) -> dict[str, object]:
        """The settings as JSON values (paths, not contents)."""
        return {
            "insecure": self.insecure,
            "cacert": self.cacert,
            "cert": self.cert,
            "key": self.key,
        }


def _no_passphrase() -> bytes:
    return b""


def _readable(path: str, name: str) -> None:
    try:
        with Path(path).open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path!r}: {exc.strerror or exc}",
            field=name,
            hint="the path of a PEM file",
        ) from None


def _encrypted(path: str) -> bool:
    """Whether the PEM file at ``path`` holds an encrypted private key (PKCS#8's
    ``ENCRYPTED PRIVATE KEY``, or the older ``Proc-Type: 4,ENCRYPTED`` header)."""
    try:
        with open(path, "rb") as pem:
            text = pem.read(1 << 20)
    except OSError:
        return False
    return b"ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text
