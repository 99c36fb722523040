"""Consul credentials: none, a supplied ACL token, or a token minted by an auth-method login.

A login (``kubernetes`` or ``jwt``) trades a bearer for an ACL token at
``POST /v1/acl/login``. The token is held until 60 s before the expiry Consul stated, or
until Consul refuses it (403): then the caller invalidates it and asks once more, which logs
in again with a bearer read afresh (the kubelet rotates projected service-account tokens, so
a copy taken at start would expire with the pod still running). A supplied token is never
"refreshed": retrying would resend the same string.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Final, Protocol

from dynconf.errors import AuthError, Origin, RemoteError
from dynconf.stores import Credential as StoreCredential
from dynconf.stores import read_credential
from dynconf_store_consul.transport import Reply, Transport

__all__ = [
    "REFRESH_WITHIN",
    "SERVICE_ACCOUNT_TOKEN",
    "Credential",
    "LoginCredential",
    "StaticCredential",
]

REFRESH_WITHIN: Final = 60.0
"""A login token this close to its expiry is replaced before the next request."""

SERVICE_ACCOUNT_TOKEN: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105 - a path

log = logging.getLogger("dynconf.store.consul")


class Credential(Protocol):
    """What the source asks before each request, and tells after a refusal."""

    renewable: bool
    """True when :meth:`invalidate` + :meth:`token` can yield a *different* token."""

    def token(self, transport: Transport) -> str | None: ...

    def invalidate(self) -> None: ...

    def close(self, transport: Transport) -> None: ...


class StaticCredential:
    """No token (anonymous) or a supplied ACL token.

    A string is never retried on refusal (the same string would be sent again). A callable
    is asked before every request, and a 403 is retried once with what it answers then (a
    rotated token file).
    """

    def __init__(self, token: StoreCredential | None) -> None:
        self._token = token or None
        self.renewable = callable(token)

    def token(self, transport: Transport) -> str | None:
        return read_credential(self._token) or None

    def invalidate(self) -> None:
        """Nothing to forget: the same string would be sent again."""

    def close(self, transport: Transport) -> None:
        """A supplied token belongs to its owner; it is never logged out."""

    def __repr__(self) -> str:
        return "StaticCredential(<redacted>)" if self._token else "StaticCredential(anonymous)"


class LoginCredential:
    """A token minted by logging in to a Consul auth method with a bearer.

    ``bearer`` is called at every login (it re-reads the service-account file for
    ``kubernetes``). One lock is held across a login so concurrent callers cause one login.
    """

    renewable = True

    def __init__(
        self,
        method: str,
        bearer: Callable[[], str],
        *,
        describe: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._method = method
        self._bearer = bearer
        self._describe = describe
        self._clock = clock
        self._lock = threading.Lock()
        self._secret: str | None = None
        self._expires_at: float | None = None
        self.logins = 0
        """How many logins succeeded (tests and metrics read it)."""

    def token(self, transport: Transport) -> str:
        with self._lock:
            if self._secret is not None and not self._near_expiry():
                return self._secret
            previous = self._secret
            secret, ttl = self._login(transport)
            self._secret = secret
            self._expires_at = None if ttl is None else self._clock() + ttl
            self.logins += 1
            if previous is not None:
                # The replaced token would otherwise live until its own expiry.
                self._logout(transport, previous)
            return secret

    def invalidate(self) -> None:
        with self._lock:
            self._secret = None
            self._expires_at = None

    def close(self, transport: Transport) -> None:
        with self._lock:
            secret, self._secret = self._secret, None
        if secret is not None:
            self._logout(transport, secret)

    def _near_expiry(self) -> bool:
        return self._expires_at is not None and self._clock() >= self._expires_at - REFRESH_WITHIN

    def _login(self, transport: Transport) -> tuple[str, float | None]:
        origin = Origin.remote(self._describe)
        try:
            bearer = self._bearer().strip()
        except OSError as exc:
            raise RemoteError(
                f"{self._describe}: the bearer for auth method {self._method} cannot be read "
                f"({exc.strerror}); mount the service-account token or fix --auth-token-path",
                origin=origin,
            ) from None
        if not bearer:
            raise AuthError(
                f"{self._describe}: the bearer for auth method {self._method} is empty; "
                "supply the token the method trusts",
                origin=origin,
            )
        reply = transport.call(
            "POST",
            "/v1/acl/login",
            body=json.dumps({"AuthMethod": self._method, "BearerToken": bearer}),
        )
        if reply.code == 403:
            raise AuthError(
                f"{self._describe}: auth method {self._method} refused the login (403); check "
                "the method's name (--auth-mount), that it trusts this bearer, and that a "
                "binding rule matches it",
                origin=origin,
            )
        if reply.code != 200:
            raise RemoteError(
                f"{self._describe}: the login to auth method {self._method} answered "
                f"{reply.code}; {_login_hint(reply.code)}",
                origin=origin,
            )
        return _read_login(reply, self._describe, self._method)

    def _logout(self, transport: Transport, secret: str) -> None:
        try:
            reply = transport.call("POST", "/v1/acl/logout", token=secret)
        except RemoteError as exc:
            log.info(
                "store_logout_failed",
                extra={"store": self._describe,
                       "reason": exc.message},
            )  # fmt: skip
            return
        if reply.code != 200:
            log.info(
                "store_logout_failed",
                extra={"detail": "refused", "store": self._describe,
                       "status": reply.code},
            )  # fmt: skip

    def __repr__(self) -> str:
        return f"LoginCredential(method={self._method!r}, token=<redacted>)"


def _login_hint(code: int) -> str:
    if code == 401:
        return "ACLs may be disabled on this Consul, or a proxy refused the request"
    if code == 400:
        return "the auth method rejected the request shape; check --auth-mount"
    if code == 500:
        # Consul 1.8 answers a bearer its method cannot validate with 500, not 403.
        return (
            "Consul answers 500 when the method cannot validate the bearer (signature, "
            "audience, expiry, issuer) as well as when it is failing; check the bearer and "
            "the method's configuration; retrying"
        )
    return "retrying"


def _read_login(reply: Reply, describe: str, method: str) -> tuple[str, float | None]:
    """SecretID and TTL (seconds) from a login answer; the TTL from Consul's own clock."""
    try:
        body = json.loads(reply.body)
        secret = body["SecretID"]
    except (ValueError, KeyError, TypeError):
        raise RemoteError(
            f"{describe}: the login to auth method {method} answered without a SecretID",
            origin=Origin.remote(describe),
        ) from None
    if not isinstance(secret, str) or not secret:
        raise RemoteError(
            f"{describe}: the login to auth method {method} answered an empty SecretID",
            origin=Origin.remote(describe),
        )
    return secret, _ttl(body)


_GO_DURATION: Final = re.compile(r"([\d.]+)(ns|us|µs|ms|s|m|h)")
_UNITS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _ttl(body: object) -> float | None:
    """The token's lifetime in seconds, or ``None`` (never proactively refreshed).

    Consul states it as ``ExpirationTTL`` (integer nanoseconds or a Go duration) or only as
    ``ExpirationTime``; the latter is measured against ``CreateTime`` from the same answer so
    a skewed local clock does not shorten or stretch it.
    """
    if not isinstance(body, dict):
        return None
    raw = body.get("ExpirationTTL")
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return raw / 1e9
    if isinstance(raw, str) and raw:
        seconds = sum(float(n) * _UNITS[u] for n, u in _GO_DURATION.findall(raw))
        if seconds > 0:
            return seconds
    expires, created = _instant(body.get("ExpirationTime")), _instant(body.get("CreateTime"))
    if expires is not None and created is not None and expires > created:
        return (expires - created).total_seconds()
    return None


_FRACTION: Final = re.compile(r"\.(\d+)")


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
