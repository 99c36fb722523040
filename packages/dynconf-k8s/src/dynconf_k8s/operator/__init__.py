"""The operator: DynamicConfigRender → ConfigMap/Secret through the agent's render path.

Public names: the CRD types (the webhook's class poller reads classes through
:class:`ClassSpec` / :class:`ClusterClassSpec`), the CRD generator, and :class:`Operator`.
"""

from dynconf_k8s.operator.crds import crd_manifests, crds_json
from dynconf_k8s.operator.types import (
    API_VERSION,
    CLASS_KIND,
    CLUSTER_CLASS_KIND,
    FIELD_MANAGER,
    GROUP,
    PLURALS,
    RENDER_KIND,
    VERSION,
    ClassSpec,
    ClusterClassSpec,
    ClusterDynamicConfigClass,
    DynamicConfigClass,
    DynamicConfigRender,
    Reason,
    RenderSpec,
    RenderStatus,
    RenderTarget,
    TokenSecretRef,
)

__all__ = [
    "API_VERSION",
    "CLASS_KIND",
    "CLUSTER_CLASS_KIND",
    "FIELD_MANAGER",
    "GROUP",
    "PLURALS",
    "RENDER_KIND",
    "VERSION",
    "ClassSpec",
    "ClusterClassSpec",
    "ClusterDynamicConfigClass",
    "DynamicConfigClass",
    "DynamicConfigRender",
    "Reason",
    "RenderSpec",
    "RenderStatus",
    "RenderTarget",
    "TokenSecretRef",
    "crd_manifests",
    "crds_json",
]
