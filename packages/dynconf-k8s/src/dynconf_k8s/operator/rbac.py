"""The ClusterRole the operator needs: exactly the verbs :mod:`~dynconf_k8s.operator.cluster`,
the informers and the leader election use, no more.

The chart's operator ClusterRole is compared against :data:`RULES` by a test, and the API-server
tests run the operator under a ServiceAccount bound to a role built from :data:`RULES`, so a
new call without its rule fails there with a 403 rather than in a cluster.

:data:`RESTART_RULES` are added only when restarts are on (the chart's
``operator.restarts.enabled``): an operator that never rolls a workload cannot read or patch one.
:data:`AUDIT_RULES` are added while the pod audit is on (``operator.podAudit.enabled``, the
default): list pods and namespaces, read the webhook registration. The chart narrows the
registration rule to its own MutatingWebhookConfiguration by ``resourceNames``.

``secrets: get`` is cluster-wide on purpose: a cluster class's credential lives in the platform
team's namespace and is read with the operator's identity, never the tenant's.
"""

from __future__ import annotations

from typing import Any, Final

from dynconf_k8s.operator.types import GROUP, PLURALS, RENDER_KIND

__all__ = ["AUDIT_RULES", "RESTART_RULES", "RULES", "cluster_role"]

RULES: Final[tuple[dict[str, list[str]], ...]] = (
    {
        "apiGroups": [GROUP],
        "resources": sorted(PLURALS.values()),
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": [GROUP],
        "resources": [f"{PLURALS[RENDER_KIND]}/status"],
        "verbs": ["get", "update", "patch"],
    },
    {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["get", "list", "watch", "create", "update", "patch"],
    },
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "update", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    },
)
"""Contract §4.4, rule by rule (configmaps keep list/watch as the chart grants them)."""


RESTART_RULES: Final[tuple[dict[str, list[str]], ...]] = (
    {
        "apiGroups": ["apps"],
        "resources": ["daemonsets", "deployments", "statefulsets"],
        "verbs": ["get", "list", "watch", "patch"],
    },
)
"""What restarts add: watch the three workload kinds, patch their pod template's annotation."""


AUDIT_RULES: Final[tuple[dict[str, list[str]], ...]] = (
    {"apiGroups": [""], "resources": ["namespaces", "pods"], "verbs": ["list"]},
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations"],
        "verbs": ["get"],
    },
)
"""What the pod audit adds: list pods (paged, never watched: the operator keeps no pod cache),
list namespaces by the registration's selector, get the registration. Events it posts under
:data:`RULES`."""


def cluster_role(name: str, *, restarts: bool = False, audit: bool = False) -> dict[str, Any]:
    """A ClusterRole manifest granting :data:`RULES`, plus :data:`RESTART_RULES` and
    :data:`AUDIT_RULES` when asked."""
    rules = RULES + (RESTART_RULES if restarts else ()) + (AUDIT_RULES if audit else ())
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [dict(rule) for rule in rules],
    }
