"""How the webhook reaches the API server with its own identity, for its optional features.

Admission never calls the API server; only the class poller and self-rotation do, from
background threads. Both authenticate with the pod's service-account token, re-read on every
use because the kubelet rotates the projected token hourly, and trust the service-account CA.
A process outside a cluster (a test, a bench) names the server, token and CA explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["SA_DIR", "KubeAccess", "MissingIdentity"]

SA_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"


class MissingIdentity(RuntimeError):
    """No service-account token or CA to call the API server with."""


@dataclass(frozen=True)
class KubeAccess:
    """The API server's address, and where the token and the CA that trusts it are read from."""

    server: str = "https://kubernetes.default.svc"
    token_path: str = f"{SA_DIR}/token"
    ca_path: str = f"{SA_DIR}/ca.crt"
    timeout: float = 10.0

    @classmethod
    def in_cluster(cls, environ: Mapping[str, str] | None = None) -> KubeAccess:
        """The in-cluster address (the variables every pod gets, else the service's DNS name)."""
        env = os.environ if environ is None else environ
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        if host and port:
            shown = f"[{host}]" if ":" in host else host
            return cls(server=f"https://{shown}:{port}")
        return cls()

    def api_client(self) -> Any:
        """A fresh ``kubernetes.client.ApiClient`` carrying the token as it is on disk now.

        Raises :class:`MissingIdentity` when the token or the CA is absent.
        """
        from kubernetes import client  # type: ignore[import-untyped]

        try:
            token = Path(self.token_path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise MissingIdentity(f"no service-account token at {self.token_path}") from exc
        if not token or not Path(self.ca_path).is_file():
            raise MissingIdentity(
                f"no service-account token or CA at {self.token_path} / {self.ca_path}"
            )
        configuration = client.Configuration()
        configuration.host = self.server
        configuration.ssl_ca_cert = self.ca_path
        # The whole header value, no prefix: clients before and after v36 name the key
        # differently but both send this one unchanged.
        configuration.api_key = {"authorization": f"Bearer {token}"}
        configuration.retries = False
        return client.ApiClient(configuration)
