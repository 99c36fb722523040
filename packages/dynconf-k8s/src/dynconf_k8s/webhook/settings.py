"""The webhook process's settings: where it listens, its TLS pair, and its installation.

Server variables (``DYNAMIC_CONFIG_WEBHOOK_ADDR`` …) are read here, once, at start; so is the
installation (the ``DYNAMIC_CONFIG_AGENT_*`` defaults, the gates, the mounted document),
validated by :mod:`dynconf_k8s.contract`. What may change afterwards is the document part
only: with ``DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS`` the mounted document is watched on disk,
with ``DYNAMIC_CONFIG_WEBHOOK_INSTALLATION`` the named ``DynamicConfigInstallation`` is
followed (:mod:`dynconf_k8s.inforce`); the variables themselves never change under a process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from dynconf_k8s.contract.document import merge_environment
from dynconf_k8s.contract.installation import (
    ENV,
    Installation,
    InstallationError,
    parse_installation,
)
from dynconf_k8s.contract.rules import RuleError, parse_bool
from dynconf_k8s.webhook.kube import KubeAccess
from dynconf_k8s.webhook.rotation import RotationSettings

__all__ = [
    "DEFAULT_DOCUMENT",
    "INSTALLATION_RESOURCE_ENV",
    "RELOAD_SECONDS_ENV",
    "WebhookSettings",
    "load_installation",
]

DEFAULT_DOCUMENT: Final = "/etc/dynamic-config/installation.yaml"
RELOAD_SECONDS_ENV: Final = "DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS"
"""How often the mounted document is checked for a new version (unset or 0: read once)."""
INSTALLATION_RESOURCE_ENV: Final = "DYNAMIC_CONFIG_WEBHOOK_INSTALLATION"
"""The ``DynamicConfigInstallation`` whose spec this webhook follows and reports on."""


SHUTDOWN_DELAY_ENV: Final = "DYNAMIC_CONFIG_WEBHOOK_SHUTDOWN_DELAY_SECONDS"
"""Seconds a replica goes on admitting after SIGTERM (:attr:`WebhookSettings.linger_seconds`)."""


def _seconds(
    env: Mapping[str, str], name: str, high: float, example: str, fix: str
) -> float | None:
    """``name`` as seconds between 0 and ``high``; None when unset; one refusal otherwise."""
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= high:
        raise InstallationError([f"{name} takes seconds between {fix}, e.g. {example}"])
    return seconds


def _shutdown_delay(env: Mapping[str, str]) -> float:
    seconds = _seconds(
        env, SHUTDOWN_DELAY_ENV, 60, "5",
        "0 and 60 (with the drain, inside the pod's terminationGracePeriodSeconds)",
    )  # fmt: skip
    return 5.0 if seconds is None else seconds


def _reload_seconds(env: Mapping[str, str]) -> float | None:
    return _seconds(env, RELOAD_SECONDS_ENV, 3600, "5", "0 (read once) and 3600") or None


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
    linger_seconds: float = 5.0
    """Seconds a replica goes on admitting after SIGTERM while ``/readyz`` says 503
    (``DYNAMIC_CONFIG_WEBHOOK_SHUTDOWN_DELAY_SECONDS``), so the API server stops sending to
    it before its port closes. The pod's grace period must cover it plus the drain."""
    explain: bool = False
    """``POST /explain`` on the admission port (``DYNAMIC_CONFIG_WEBHOOK_EXPLAIN``)."""
    document: str = DEFAULT_DOCUMENT
    """The mounted installation document (``DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE``)."""
    reload_seconds: float | None = None
    """Check the document every so many seconds and apply a new version live (None: never)."""
    installation_resource: str | None = None
    """Follow this ``DynamicConfigInstallation``'s spec and report in its status."""
    identity: str = "dynamic-config-webhook"
    """This replica's name in the resource's status (``POD_NAME``, else ``HOSTNAME``)."""
    environ: Mapping[str, str] = field(default_factory=dict)
    """The ``DYNAMIC_CONFIG_*`` variables as at start: a live document is judged under them."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WebhookSettings:
        env = os.environ if environ is None else environ
        installation = load_installation(env)
        resource = env.get(INSTALLATION_RESOURCE_ENV, "").strip() or None
        reload_seconds = _reload_seconds(env)
        if resource and reload_seconds:
            raise InstallationError(
                [
                    f"{INSTALLATION_RESOURCE_ENV} and {RELOAD_SECONDS_ENV} name two live "
                    "sources of the one installation document; set one (the chart's "
                    "webhook.installation.resource.enabled chooses the resource)"
                ]
            )
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
            document=env.get(ENV.DEFAULTS_FILE) or DEFAULT_DOCUMENT,
            reload_seconds=reload_seconds,
            linger_seconds=_shutdown_delay(env),
            installation_resource=resource,
            identity=env.get("POD_NAME") or env.get("HOSTNAME") or "dynamic-config-webhook",
            environ={k: v for k, v in env.items() if k.startswith("DYNAMIC_CONFIG_")},
        )

    @property
    def host_port(self) -> tuple[str, int]:
        return _split_addr(self.addr)

    @property
    def metrics_host_port(self) -> tuple[str, int] | None:
        return _split_addr(self.metrics_addr) if self.metrics_addr else None
