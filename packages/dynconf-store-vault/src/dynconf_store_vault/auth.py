"""Vault auth methods and the token they yield, kept fresh.

Every method but ``token`` logs in with something it re-reads at each login (a projected
service-account token rotates under a running pod; a JWT file is rewritten by its issuer),
so a login is always a fresh read, never a cached copy.

The token keeper holds one Vault token and its expiry. Within 60 s of expiry it renews a
renewable token (``auth/token/renew-self``) and logs in again when renewal is refused or
the token is not renewable; a failed refresh keeps the old token, since it may still have
seconds left. Concurrent callers share one login (one lock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from dynconf.errors import AuthError, Origin, RemoteError
from dynconf.stores import Credential, StoreSpec, credential_from_file, read_credential
from dynconf_store_vault.transport import Answer, Transport

__all__ = [
    "DEFAULT_MOUNTS",
    "REFRESH_WITHIN",
    "SERVICE_ACCOUNT_TOKEN",
    "Login",
    "TokenKeeper",
    "login_for",
]

REFRESH_WITHIN: Final = 60.0
"""Renew or log in again when the token has less than this many seconds left."""
SERVICE_ACCOUNT_TOKEN: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105 - a path
DEFAULT_MOUNTS: Final = {
    "kubernetes": "kubernetes",
    "approle": "approle",
    "jwt": "jwt",
    "userpass": "userpass",
    "ldap": "ldap",
    "cert": "cert",
}


@dataclass(frozen=True, slots=True)
class Grant:
    """A token as Vault handed it out: the token, its TTL (``None`` = never expires)."""

    token: str
    ttl: float | None
    renewable: bool

    def __repr__(self) -> str:
        return f"Grant(ttl={self.ttl}, renewable={self.renewable})"


@dataclass(frozen=True)
class Login:
    """How one method logs in: the login path and a body built fresh at every login."""

    method: str
    mount: str
    path: str
    body: Callable[[], Mapping[str, Any]]

    def __repr__(self) -> str:
        return f"Login(method={self.method!r}, mount={self.mount!r})"


def login_for(spec: StoreSpec, origin: Origin) -> Login | None:
    """The login for ``spec``'s auth method; ``None`` for a supplied token."""
    method = spec.auth or "token"
    if method == "token":
        return None
    mount = (spec.auth_mount or DEFAULT_MOUNTS[method]).strip("/")

    def read_file(path: str, what: str) -> str:
        try:
            text = credential_from_file(path).strip()
        except OSError as exc:
            raise AuthError(
                f"the {what} at {path} cannot be read ({exc.strerror}); check "
                "--auth-token-path and the volume that should provide it",
                origin=origin,
            ) from None
        if not text:
            raise AuthError(
                f"the {what} at {path} is empty; check the volume that should provide it",
                origin=origin,
            )
        return text

    if method == "kubernetes":
        token_path = spec.auth_token_path or SERVICE_ACCOUNT_TOKEN
        role = spec.auth_role or ""

        def kubernetes() -> Mapping[str, Any]:
            return {"role": role, "jwt": read_file(token_path, "service-account token")}

        return Login(method, mount, f"auth/{mount}/login", kubernetes)
    if method == "approle":
        role_id, secret_id = spec.auth_role or "", spec.password
        return Login(
            method,
            mount,
            f"auth/{mount}/login",
            lambda: {"role_id": role_id, "secret_id": read_credential(secret_id, "password") or ""},
        )
    if method == "jwt":
        jwt_path, bearer, jwt_role = spec.auth_token_path, spec.token, spec.auth_role

        def jwt() -> Mapping[str, Any]:
            body: dict[str, Any] = {
                "jwt": read_file(jwt_path, "JWT") if jwt_path else (read_credential(bearer) or "")
            }
            if jwt_role:
                body["role"] = jwt_role
            return body

        return Login(method, mount, f"auth/{mount}/login", jwt)
    if method in ("userpass", "ldap"):
        username, password = spec.auth_username or "", spec.password
        return Login(
            method,
            mount,
            f"auth/{mount}/login/{username}",
            lambda: {"password": read_credential(password, "password") or ""},
        )
    if method == "cert":
        cert_role = spec.auth_role
        return Login(
            method,
            mount,
            f"auth/{mount}/login",
            lambda: {"name": cert_role} if cert_role else {},
        )
    raise AuthError(f"vault has no auth method {method}", origin=origin)


class TokenKeeper:
    """One Vault token, obtained lazily and refreshed before it runs out.

    With a :class:`Login`, :meth:`invalidate` forces the next :meth:`current` to log in
    again (the reactive path after a 403). With a supplied token there is nothing to log in
    with: the token is looked up once for its TTL and renewed when it is renewable.
    """

    def __init__(
        self,
        transport: Transport,
        login: Login | None,
        supplied: Credential | None,
        origin: Origin,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._transport = transport
        self._login = login
        self._supplied = supplied
        self._origin = origin
        self._clock = clock
        self._lock = threading.Lock()
        self._grant: Grant | None = None
        self._expires_at: float | None = None
        self.logins = 0
        """How many logins (or supplied-token lookups) succeeded; tests and metrics read it."""
        self.renewals = 0
        self.login_attempts = 0
        """Logins sent, refused or not (a 403 buys exactly one more)."""

    @property
    def can_relogin(self) -> bool:
        """A login, or a supplied token given as a callable (asked again after a 403)."""
        return self._login is not None or callable(self._supplied)

    @property
    def method(self) -> str:
        return self._login.method if self._login else "token"

    def current(self) -> str:
        """A token good for the next request, logging in or renewing when needed."""
        with self._lock:
            grant = self._grant
            if grant is None:
                return self._obtain().token
            if self._expires_at is not None and self._clock() >= self._expires_at - REFRESH_WITHIN:
                try:
                    return self._refresh(grant).token
                except RemoteError:
                    # A failed refresh keeps the old token: it may still have seconds left.
                    if self._clock() < self._expires_at:
                        return grant.token
                    raise
            return grant.token

    def invalidate(self) -> None:
        """Forget the token so the next :meth:`current` logs in again."""
        with self._lock:
            self._grant = None
            self._expires_at = None

    def _install(self, grant: Grant) -> Grant:
        self._grant = grant
        self._expires_at = None if grant.ttl is None else self._clock() + grant.ttl
        return grant

    def _refresh(self, grant: Grant) -> Grant:
        if grant.renewable:
            answer = self._transport.call(
                "POST", "auth/token/renew-self", token=grant.token, body={}
            )
            renewed = _grant_from(answer, "auth")
            if answer.ok and renewed is not None:
                self.renewals += 1
                # renew-self keeps the same token; some servers omit it from the answer.
                return self._install(Grant(grant.token, renewed.ttl, renewed.renewable))
        if self._login is None and not callable(self._supplied):
            return grant
        return self._obtain()

    def _obtain(self) -> Grant:
        if self._login is None:
            return self._install(self._lookup_supplied())
        login = self._login
        body = login.body()
        self.login_attempts += 1
        answer = self._transport.call("POST", login.path, body=body)
        if answer.status in (400, 403):
            raise AuthError(
                f"vault refused the {login.method} login at auth/{login.mount} "
                f"(status {answer.status}); check the credential and the role it names",
                origin=self._origin,
            )
        grant = _grant_from(answer, "auth")
        if not answer.ok or grant is None:
            raise RemoteError(
                f"the {login.method} login at auth/{login.mount} failed (status "
                f"{answer.status}); the server may be sealed, down or behind a proxy",
                origin=self._origin,
            )
        self.logins += 1
        return self._install(grant)

    def _lookup_supplied(self) -> Grant:
        supplied = read_credential(self._supplied)
        if not supplied:
            raise AuthError(
                "vault auth token needs a token (DYNAMIC_CONFIG_AGENT_TOKEN); set it or "
                "choose another --auth method",
                origin=self._origin,
            )
        answer = self._transport.call("GET", "auth/token/lookup-self", token=supplied)
        if answer.status == 403:
            raise AuthError(
                "vault refused the supplied token (status 403): it is revoked, expired or "
                "not a token of this server; supply a valid token",
                origin=self._origin,
            )
        data = answer.body.get("data")
        if not answer.ok or not isinstance(data, Mapping):
            raise RemoteError(
                f"looking up the supplied token failed (status {answer.status}); the server "
                "may be sealed, down or behind a proxy",
                origin=self._origin,
            )
        self.logins += 1
        return Grant(supplied, _ttl(data.get("ttl")), bool(data.get("renewable")))


def _ttl(value: object) -> float | None:
    """A server-reported TTL: 0, missing or malformed means the token never expires."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def _grant_from(answer: Answer, key: str) -> Grant | None:
    auth = answer.body.get(key)
    if not isinstance(auth, Mapping):
        return None
    token = auth.get("client_token")
    if not isinstance(token, str) or not token:
        return None
    return Grant(token, _ttl(auth.get("lease_duration")), bool(auth.get("renewable")))
