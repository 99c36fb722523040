"""Who is calling: a static client token, or a Kubernetes service account via TokenReview.

The only credential shape is ``Authorization: Bearer <token>``. Static tokens are compared
as SHA-256 digests with :func:`hmac.compare_digest`, every configured token every time, so
neither which client matched nor a token's length shows in the timing. A bearer no static
client holds is reviewed by the API server (``TokenReview``) when ``[server.kubernetes]`` is
configured; verdicts (positive and negative) are cached for 60 s under the token's digest,
never the token. An API-server failure is not a verdict and is not cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass
from typing import Final

from dynconf.errors import Origin, RemoteError
from dynconf.store_http import HttpPolicy, store_session
from dynconf_store_configserver.server.settings import KubernetesSettings, Settings

__all__ = ["VERDICT_SECONDS", "Authenticator", "Principal", "bearer_of"]

VERDICT_SECONDS: Final = 60.0
"""How long a TokenReview verdict is trusted."""

log = logging.getLogger("dynconf.server")


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: its audit name and the applications it may read."""

    name: str
    applications: frozenset[str]


def bearer_of(header: str | None) -> str | None:
    """The token of ``Bearer <token>`` (scheme case-insensitive), or None."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


class Authenticator:
    """Turns an ``Authorization`` header into a :class:`Principal`, or None (401)."""

    def __init__(self, settings: Settings) -> None:
        self._static = [
            (hashlib.sha256(c.token.encode()).digest(), Principal(c.name, c.applications))
            for c in settings.clients
            if c.token is not None
        ]
        anonymous = [c for c in settings.clients if c.token is None]
        self._anonymous = (
            Principal(anonymous[0].name, anonymous[0].applications)
            if anonymous and settings.allow_anonymous
            else None
        )
        self._kubernetes = settings.kubernetes
        self._verdicts: dict[bytes, tuple[float, Principal | None]] = {}
        self.reviews = 0
        """TokenReview calls made (tests and metrics read it)."""

    async def authenticate(self, header: str | None) -> Principal | None:
        if header is None:
            return self._anonymous  # a missing header may be the anonymous client
        token = bearer_of(header)
        if token is None:
            return None  # a present-but-unusable header is never downgraded to anonymous
        digest = hashlib.sha256(token.encode()).digest()
        found: Principal | None = None
        for known, principal in self._static:
            if hmac.compare_digest(known, digest) and found is None:
                found = principal
        if found is not None or self._kubernetes is None:
            return found
        cached = self._verdicts.get(digest)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        verdict, definitive = await asyncio.to_thread(_review, self._kubernetes, token)
        self.reviews += 1
        if definitive:
            if len(self._verdicts) > 10_000:
                self._verdicts = {k: v for k, v in self._verdicts.items() if v[0] > now}
            self._verdicts[digest] = (now + VERDICT_SECONDS, verdict)
        return verdict


def _review(kube: KubernetesSettings, token: str) -> tuple[Principal | None, bool]:
    """Ask the API server; ``(principal or None, whether the answer is a verdict)``."""
    import requests

    spec: dict[str, object] = {"token": token}
    if kube.audience:
        spec["audiences"] = [kube.audience]
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
    # Both the server's own token and the caller's (in the body) ride along: no proxy from
    # the environment, no redirect away from the API server.
    session = store_session(
        HttpPolicy(),
        endpoint=kube.api_server,
        subject="the Kubernetes API server",
        origin=Origin.remote(kube.api_server),
    )
    try:
        own = kube.token_path.read_text(encoding="utf-8").strip()  # re-read: it rotates
        with session:
            response = session.post(
                f"{kube.api_server}/apis/authentication.k8s.io/v1/tokenreviews",
                data=json.dumps(body),
                headers={"Authorization": f"Bearer {own}", "Content-Type": "application/json"},
                verify=str(kube.ca),
                timeout=10,
            )
    except (OSError, requests.exceptions.RequestException, RemoteError) as exc:
        log.warning("tokenreview_failed", extra={
                                                 "error_type": type(exc).__name__})  # fmt: skip
        return None, False
    if response.status_code not in (200, 201):
        log.warning("tokenreview_failed", extra={"detail": "refused",
                                                  "status": response.status_code})  # fmt: skip
        return None, False
    try:
        status = response.json().get("status", {})
    except ValueError:
        return None, False
    if status.get("authenticated") is not True:
        return None, True
    username = str(status.get("user", {}).get("username", ""))
    prefix = "system:serviceaccount:"
    if not username.startswith(prefix):
        return None, True
    account = username[len(prefix) :]
    applications = kube.grants.get(account)
    if not applications:
        return None, True
    return Principal(f"k8s:{account}", applications), True
