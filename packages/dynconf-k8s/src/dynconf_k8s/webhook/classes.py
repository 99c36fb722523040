"""DynamicConfigClass resolution at admission, from an in-memory map.

The admission path never calls the API server: a background poller (when
``DYNAMIC_CONFIG_WEBHOOK_CLASSES=true``) lists the classes into a :data:`ClassMap`, and
admission reads it. A class only fills ``source``, ``endpoint`` and ``token-secret`` the pod
did not set — a default, not a pin. Refusals are ``DynamicConfigPolicy`` with HTTP 403.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.contract.refusals import POLICY, Refusal
from dynconf_k8s.contract.registry import annotation
from dynconf_k8s.webhook.kube import KubeAccess, MissingIdentity

__all__ = ["ClassEntry", "ClassMap", "ClassPoller", "apply_class", "entries_from_lists"]

log = logging.getLogger("dynconf_k8s.webhook")

GROUP: Final = "dynamic-config.rs"
VERSION: Final = "v1alpha1"
POLL_SECONDS: Final = 30.0


@dataclass(frozen=True, slots=True)
class ClassEntry:
    """What one class supplies, and who may use it.

    ``namespaces`` is a cluster class's admitted namespaces (``None`` = every namespace);
    ``credential_namespace`` is set when a cluster class's credential Secret lives in a
    namespace other than the pod's (an injected agent cannot mount it).
    """

    source: str | None = None
    endpoint: str | None = None
    token_secret: str | None = None
    namespaces: tuple[str, ...] | None = None
    credential_namespace: str | None = None


ClassMap = Mapping[tuple[str | None, str], ClassEntry]
"""``(namespace, name)`` for namespaced classes, ``(None, name)`` for cluster classes."""


def _refuse(message: str) -> Refusal:
    return Refusal(message, reason=POLICY, code=403)


def apply_class(
    pod: Mapping[str, Any],
    namespace: str,
    installation: Installation,
    classes: ClassMap | None,
) -> dict[str, Any]:
    """The pod with its class's defaults filled in; refuses an unusable class."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    name = annotations[annotation("class")]
    entry = (classes or {}).get((namespace, name))
    cluster = False
    if entry is None:
        entry = (classes or {}).get((None, name))
        cluster = entry is not None
    if entry is None:
        raise _refuse(
            f'{annotation("class")} names "{name}", which this webhook cannot see: classes are '
            "read only with webhook.classes.enabled (DYNAMIC_CONFIG_WEBHOOK_CLASSES), and a "
            "class created in the last 30 seconds may not have been polled yet — check the "
            "name, or retry shortly"
            if installation.classes_enabled
            else f'{annotation("class")} names "{name}", but this webhook does not read '
            "classes: an administrator enables webhook.classes.enabled "
            "(DYNAMIC_CONFIG_WEBHOOK_CLASSES); classes are polled every 30 seconds"
        )
    if cluster and entry.namespaces is not None and namespace not in entry.namespaces:
        raise _refuse(
            f'ClusterDynamicConfigClass "{name}" exists and does not admit namespace '
            f"{namespace or '(none)'}; ask its owner to add the namespace to its namespaces list"
        )
    if cluster and entry.credential_namespace not in (None, namespace):
        raise _refuse(
            f'ClusterDynamicConfigClass "{name}" keeps its credential Secret in namespace '
            f"{entry.credential_namespace}: it is usable by a DynamicConfigRender and not by an "
            "injected agent, which mounts Secrets from its own namespace only"
        )
    filled = copy.deepcopy(dict(pod))
    target = filled.setdefault("metadata", {}).setdefault("annotations", {})
    for key, value in (
        ("source", entry.source),
        ("endpoint", entry.endpoint),
        ("token-secret", entry.token_secret),
    ):
        if value is not None and annotation(key) not in target:
            target[annotation(key)] = value
    return filled


def entries_from_lists(
    namespaced: list[Mapping[str, Any]], cluster: list[Mapping[str, Any]]
) -> dict[tuple[str | None, str], ClassEntry]:
    """The class map from the two list responses' ``items``."""
    out: dict[tuple[str | None, str], ClassEntry] = {}
    for item in namespaced:
        meta, spec = item.get("metadata") or {}, item.get("spec") or {}
        token = spec.get("tokenSecret")
        out[(meta.get("namespace"), meta.get("name", ""))] = ClassEntry(
            source=spec.get("source"),
            endpoint=spec.get("endpoint"),
            token_secret=f"{token}/token" if isinstance(token, str) and token else None,
        )
    for item in cluster:
        meta, spec = item.get("metadata") or {}, item.get("spec") or {}
        token = spec.get("tokenSecret") or None
        namespaces = spec.get("namespaces")
        out[(None, meta.get("name", ""))] = ClassEntry(
            source=spec.get("source"),
            endpoint=spec.get("endpoint"),
            token_secret=f"{token['name']}/{token.get('key', 'token')}" if token else None,
            namespaces=tuple(namespaces) if namespaces is not None else None,
            credential_namespace=token.get("namespace") if token else None,
        )
    return out


class ClassPoller:
    """Lists both class kinds on a timer into the map admission reads.

    A failed poll keeps the previous map, so an API server outage never turns a working class
    into a refusal; a missing token or CA is logged once and leaves the map empty, so pods
    naming a class are refused (with the sentence that names the setting) rather than
    admitted without the store the class was to supply. The map is replaced whole, never
    mutated, so admission reads it without a lock.
    """

    def __init__(self, access: KubeAccess, every: float = POLL_SECONDS) -> None:
        self.access = access
        self.every = every
        self._classes: dict[tuple[str | None, str], ClassEntry] = {}
        self._polls = 0
        self._changed = threading.Condition()
        self._identity_logged = False

    def classes(self) -> ClassMap:
        """The map as of the last successful poll."""
        return self._classes

    def poll_once(self) -> bool:
        """List both kinds now; True when the map was replaced."""
        try:
            api_client = self.access.api_client()
        except MissingIdentity as exc:
            if not self._identity_logged:
                log.error("classes unreadable", extra={"error": str(exc)})
                self._identity_logged = True
            return self._finish(False)
        from kubernetes import client  # type: ignore[import-untyped]
        from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
        from urllib3.exceptions import HTTPError

        api = client.CustomObjectsApi(api_client)
        try:
            with api_client:
                namespaced = api.list_cluster_custom_object(
                    GROUP, VERSION, "dynamicconfigclasses", _request_timeout=self.access.timeout
                )
                cluster = api.list_cluster_custom_object(
                    GROUP,
                    VERSION,
                    "clusterdynamicconfigclasses",
                    _request_timeout=self.access.timeout,
                )
        except (ApiException, HTTPError, OSError) as exc:
            log.warning(
                "classes poll failed",
                extra={"error_type": type(exc).__name__, "status": getattr(exc, "status", None)},
            )
            return self._finish(False)
        self._classes = entries_from_lists(
            namespaced.get("items") or [], cluster.get("items") or []
        )
        return self._finish(True)

    def _finish(self, replaced: bool) -> bool:
        with self._changed:
            self._polls += 1
            self._changed.notify_all()
        return replaced

    def wait_polls(self, count: int, timeout: float) -> bool:
        """Block until ``count`` more polls finished (for tests and start-up); False on timeout."""
        with self._changed:
            target = self._polls + count
            return self._changed.wait_for(lambda: self._polls >= target, timeout)

    def run(self, stop: threading.Event) -> None:
        """Poll now, then every ``every`` seconds until ``stop`` is set."""
        while True:
            self.poll_once()
            if stop.wait(self.every):
                return
