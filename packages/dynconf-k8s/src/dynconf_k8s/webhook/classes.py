"""DynamicConfigClass resolution at admission, from an in-memory map.

The admission path never calls the API server: a background poller (when
``DYNAMIC_CONFIG_WEBHOOK_CLASSES=true``) lists the classes into a :data:`ClassMap`, and
admission reads it. A class only fills ``source``, ``endpoint`` and ``token-secret`` the pod
did not set — a default, not a pin. Refusals are ``DynamicConfigPolicy`` with HTTP 403.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.contract.refusals import POLICY, Refusal
from dynconf_k8s.contract.registry import annotation

__all__ = ["ClassEntry", "ClassMap", "apply_class", "entries_from_lists"]


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
