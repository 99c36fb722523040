"""The webhook process's settings: where it listens, its TLS pair, and its installation.

Server variables (``DYNAMIC_CONFIG_WEBHOOK_ADDR`` …) are read here; the installation (the
``DYNAMIC_CONFIG_AGENT_*`` defaults, the gates, the mounted document) is read here and
validated by :mod:`dynconf_k8s.contract`. Both are read once, at start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from dynconf_k8s.contract.document import merge_environment
from dynconf_k8s.contract.installation import ENV, Installation, parse_installation
from dynconf_k8s.contract.rules import RuleError, parse_bool
from dynconf_k8s.webhook.kube import KubeAccess
from dynconf_k8s.webhook.rotation import RotationSettings

__all__ = ["DEFAULT_DOCUMENT", "WebhookSettings", "load_installation"]

DEFAULT_DOCUMENT: Final = "/etc/dynamic-config/installation.yaml"


def load_installation(environ: Mapping[str, str] | None = None) -> Installation:
    """The installation from variables and the mounted document (absent document = empty).

    Raises :class:`dynconf_k8s.contract.InstallationError` listing every problem.
    """
    env = os.environ if environ is None else environ
    path = env.get(ENV.DEFAULTS_FILE) or DEFAULT_DOCUMENT
    try:
        text: str | None = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    return parse_installation(merge_environment(env, text, origin=path))


def _flag(env: Mapping[str, str], name: str) -> bool:
    text = env.get(name, "").strip()
    if text in ("1",):
        return True
    try:
        return parse_bool(text) if text else False
    except RuleError:
        return False


def _split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - a webhook listens for the API server


@dataclass(frozen=True)
class WebhookSettings:
    """How one webhook process serves; :meth:`from_environ` reads the contract's variables."""

    installation: Installation = field(default_factory=Installation)
    addr: str = "0.0.0.0:8443"
    metrics_addr: str | None = None
    tls_cert: str = "/tls/tls.crt"
    tls_key: str = "/tls/tls.key"
    plaintext: bool = False
    classes: bool = False
    classes_poll_seconds: float = 30.0
    self_rotate: RotationSettings | None = None
    kube: KubeAccess = field(default_factory=KubeAccess)
    """How the class poller and self-rotation reach the API server (admission never does)."""
    tls_reload_seconds: float = 60.0
    tls_wait_seconds: float = 5.0
    """selfRotate: how often serving re-checks for the Secret's pair before the first one."""
    drain_seconds: int = 30
    explain: bool = False
    """``POST /explain`` on the admission port (``DYNAMIC_CONFIG_WEBHOOK_EXPLAIN``)."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WebhookSettings:
        env = os.environ if environ is None else environ
        installation = load_installation(env)
        return cls(
            installation=installation,
            addr=env.get("DYNAMIC_CONFIG_WEBHOOK_ADDR") or "0.0.0.0:8443",
            metrics_addr=env.get("DYNAMIC_CONFIG_WEBHOOK_METRICS_ADDR") or None,
            tls_cert=env.get("DYNAMIC_CONFIG_WEBHOOK_TLS_CERT") or "/tls/tls.crt",
            tls_key=env.get("DYNAMIC_CONFIG_WEBHOOK_TLS_KEY") or "/tls/tls.key",
            plaintext=_flag(env, "DYNAMIC_CONFIG_WEBHOOK_PLAINTEXT"),
            classes=installation.classes_enabled,
            self_rotate=RotationSettings.from_environ(env),
            kube=KubeAccess.in_cluster(env),
            explain=_flag(env, "DYNAMIC_CONFIG_WEBHOOK_EXPLAIN"),
        )

    @property
    def host_port(self) -> tuple[str, int]:
        return _split_addr(self.addr)

    @property
    def metrics_host_port(self) -> tuple[str, int] | None:
        return _split_addr(self.metrics_addr) if self.metrics_addr else None
