"""The serving TLS pair, loaded from disk and reloaded in place when it is renewed.

One :class:`ssl.SSLContext` serves for the life of the process; a renewed pair is loaded
into it (new handshakes use the new certificate, open connections keep theirs). A pair is
first proven in a scratch context, so a half-written renewal keeps the old one. No client
authentication: the API server authenticates the webhook, not the other way round.
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass, field

__all__ = ["ServingTls"]

log = logging.getLogger("dynconf_k8s.webhook")


def _mtimes(*paths: str) -> tuple[float, ...] | None:
    try:
        return tuple(os.stat(p).st_mtime_ns for p in paths)
    except OSError:
        return None


def _not_after(path: str) -> float | None:
    from cryptography import x509

    try:
        with open(path, "rb") as handle:
            return x509.load_pem_x509_certificate(handle.read()).not_valid_after_utc.timestamp()
    except (OSError, ValueError):
        return None


@dataclass
class ServingTls:
    """The TLS context and the files it came from."""

    cert: str
    key: str
    context: ssl.SSLContext = field(init=False)
    loaded: bool = field(default=False, init=False)
    not_after: float | None = field(default=None, init=False)
    """Unix time the served certificate expires (what ``certificate_expires_at`` reports)."""
    _seen: tuple[float, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.set_alpn_protocols(["http/1.1"])
        self.reload()

    def reload(self) -> bool:
        """Load the pair when it changed and parses; returns whether a new pair was loaded."""
        seen = _mtimes(self.cert, self.key)
        if seen is None or seen == self._seen:
            return False
        scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            scratch.load_cert_chain(self.cert, self.key)
            self.context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError):
            log.warning(
                "tls pair unusable", extra={"cert": self.cert, "kept_previous": self.loaded}
            )
            return False
        self._seen = seen
        self.not_after = _not_after(self.cert)
        if self.loaded:
            log.info("tls pair reloaded", extra={"cert": self.cert})
        self.loaded = True
        return True
