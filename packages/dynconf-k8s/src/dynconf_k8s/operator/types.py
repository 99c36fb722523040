"""The three custom resources as Python types: the one source of their shape.

The CRD manifests (:mod:`dynconf_k8s.operator.crds`) are generated from these models, and the
reconciler reads objects from the API server through them, so a field added here is a field
the cluster validates and the code reads — the two cannot drift. Field names are the
contract's camelCase spellings (``classKind``, ``intervalSeconds``, ``deletionPolicy``); the
Python attributes are snake_case aliases of them.

Also the contract's fixed spellings: group, version, kinds, plurals, the ``Ready`` condition
reasons, the Event reasons and the field manager. The webhook's class poller imports the
class types from here (:class:`ClassSpec`, :class:`ClusterClassSpec`).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

__all__ = [
    "API_VERSION",
    "CLASS_KIND",
    "CLUSTER_CLASS_KIND",
    "FIELD_MANAGER",
    "GROUP",
    "PLURALS",
    "RENDER_KIND",
    "VERSION",
    "INSTALLATION_KIND",
    "INSTALLATION_PLURAL",
    "ClassSpec",
    "ClusterClassSpec",
    "Condition",
    "DynamicConfigClass",
    "ClusterDynamicConfigClass",
    "DynamicConfigRender",
    "InstallationReplica",
    "InstallationSpec",
    "InstallationStatus",
    "Reason",
    "RenderSpec",
    "RenderStatus",
    "RenderTarget",
    "TokenSecretRef",
    "WorkloadRestart",
]

GROUP: Final = "dynamic-config.rs"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
CLASS_KIND: Final = "DynamicConfigClass"
CLUSTER_CLASS_KIND: Final = "ClusterDynamicConfigClass"
RENDER_KIND: Final = "DynamicConfigRender"
PLURALS: Final = {
    CLASS_KIND: "dynamicconfigclasses",
    CLUSTER_CLASS_KIND: "clusterdynamicconfigclasses",
    RENDER_KIND: "dynamicconfigrenders",
}
INSTALLATION_KIND: Final = "DynamicConfigInstallation"
INSTALLATION_PLURAL: Final = "dynamicconfiginstallations"
"""Ours, not the book's: the installation as a cluster-scoped object (:mod:`dynconf_k8s.inforce`).
Kept out of :data:`PLURALS`, the operator's own three kinds."""
FIELD_MANAGER: Final = "dynamic-config-operator"
"""The server-side-apply field manager every target write uses."""


class Reason:
    """The ``Ready`` condition's reasons and the Event reasons: API, spelled exactly."""

    RENDERED: Final = "Rendered"
    CLASS_NOT_FOUND: Final = "ClassNotFound"
    CLASS_NOT_ALLOWED: Final = "ClassNotAllowed"
    RENDER_FAILED: Final = "RenderFailed"
    RESTARTED: Final = "Restarted"
    """Event reason: an opted-in workload was rolled for a changed target."""
    RESTART_FAILED: Final = "RestartFailed"
    """Event reason: the rollout patch was refused (the reason is in the message)."""
    AGENT_MISSING: Final = "AgentMissing"
    """Event reason (Warning, on the pod): it asked for injection and has no agent."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class ClassSpec(_Model):
    """A team's own store, named once: pods and Renders in its namespace refer to it."""

    source: str = Field(description="The store type (consul, vault, etcd, …).")
    endpoint: str = Field(description="The store's address.")
    token_secret: str | None = Field(
        default=None,
        alias="tokenSecret",
        description="A Secret in the class's namespace whose `token` key is the store token.",
    )


class TokenSecretRef(_Model):
    """Where a cluster class's credential lives; tenants cannot read that namespace."""

    name: str = Field(description="The Secret's name.")
    namespace: str = Field(description="The Secret's namespace (the platform team's).")
    key: str = Field(default="token", description="The key holding the token.")


class ClusterClassSpec(_Model):
    """The platform team's store, defined once for the cluster, with a namespace allowlist."""

    source: str = Field(description="The store type (consul, vault, etcd, …).")
    endpoint: str = Field(description="The store's address.")
    token_secret: TokenSecretRef | None = Field(
        default=None,
        alias="tokenSecret",
        description="The Secret holding the store token, read with the operator's identity.",
    )
    namespaces: list[str] | None = Field(
        default=None,
        description="Namespaces whose Renders may use this class; absent means every namespace.",
    )


class RenderTarget(_Model):
    """Where the rendered document lands: exactly one of a ConfigMap or a Secret."""

    config_map: str | None = Field(
        default=None, alias="configMap", description="The ConfigMap to write."
    )
    secret: str | None = Field(default=None, description="The Secret to write (type Opaque).")
    file: str | None = Field(
        default=None,
        description="The key of the rendered file (shape `file`); its extension picks the format.",
    )
    shape: Literal["file", "envEntries", "entries"] = Field(
        default="file",
        description=(
            "file: one key holding the rendered document; envEntries: one UPPER_SNAKE key per "
            "leaf; entries: one key per leaf, dotted path verbatim."
        ),
    )
    deletion_policy: Literal["Delete", "Retain"] = Field(
        default="Delete",
        alias="deletionPolicy",
        description="Delete: the target is owned by the Render and garbage-collected with it.",
    )


class RenderSpec(_Model):
    """A document from a class's store, rendered into a ConfigMap or Secret on a cadence."""

    class_name: str = Field(alias="class", description="The class naming the store.")
    class_kind: Literal["DynamicConfigClass", "ClusterDynamicConfigClass"] = Field(
        default="DynamicConfigClass", alias="classKind", description="Which kind of class."
    )
    key: str = Field(description="The document's key in the store.")
    interval_seconds: int = Field(
        default=15,
        alias="intervalSeconds",
        ge=0,
        description="Seconds between renders (at least 1; spread ±25 %).",
        json_schema_extra={"format": "int64"},
    )
    target: RenderTarget = Field(description="Where the document lands.")


class Condition(_Model):
    """One status condition (only `Ready` is written)."""

    type: str
    status: str
    reason: str
    message: str
    last_transition_time: str = Field(alias="lastTransitionTime")


_LIST_BY_NAME: Final[JsonDict] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
}
_LIST_BY_TYPE: Final[JsonDict] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


class InstallationSpec(_Model):
    """The installation in force cluster-wide: the installation document's keys, as its spec.

    Not schema-checked by the API server: the webhook's one installation parser judges it and
    reports in ``status`` (the ``Valid`` condition names the first problem and its field).
    """

    model_config = ConfigDict(
        extra="allow", json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )


class InstallationCondition(_Model):
    """One status condition (only ``Valid`` is written)."""

    type: str
    status: str
    reason: str
    message: str
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    last_transition_time: str = Field(alias="lastTransitionTime")


class InstallationReplica(_Model):
    """What one replica has in force; each replica writes only its own entry."""

    name: str = Field(description="The replica (its pod's name).")
    component: str = Field(description="webhook or operator.")
    observed_generation: int = Field(
        alias="observedGeneration", description="The newest generation this replica judged."
    )
    applied_generation: int = Field(
        alias="appliedGeneration",
        description="The generation in force in this replica (0: none of this resource yet).",
    )
    valid: bool = Field(description="Whether the observed generation parsed.")
    reason: str = Field(description="Applied or InstallationInvalid.")
    message: str = Field(description="What is in force, or the first problem by field.")
    last_transition_time: str = Field(alias="lastTransitionTime")


class InstallationStatus(_Model):
    """What the replicas have in force."""

    observed_generation: int | None = Field(
        default=None, alias="observedGeneration", description="The newest generation judged."
    )
    conditions: list[InstallationCondition] = Field(
        default_factory=list, json_schema_extra=_LIST_BY_TYPE
    )
    replicas: list[InstallationReplica] = Field(
        default_factory=list, json_schema_extra=_LIST_BY_NAME
    )


class WorkloadRestart(_Model):
    """One workload the operator rolled because this Render's target changed."""

    kind: str = Field(description="Deployment, StatefulSet or DaemonSet.")
    name: str = Field(description="The workload's name, in the Render's namespace.")
    restarted_at: str = Field(
        alias="restartedAt", description="When the rollout was started (RFC 3339)."
    )
    fingerprint: str = Field(
        description="The rendered fingerprint its pod template now carries (no value in it)."
    )


class RenderStatus(_Model):
    """What the operator last observed; `lastError` names kind and path, never a value."""

    rendered_at: str | None = Field(
        default=None, alias="renderedAt", description="When the last render landed (RFC 3339)."
    )
    observed_generation: int | None = Field(
        default=None,
        alias="observedGeneration",
        description="The metadata.generation this status was written for.",
        json_schema_extra={"format": "int64"},
    )
    last_error: str | None = Field(
        default=None,
        alias="lastError",
        description="Why the last attempt failed: kind and path only, never a value.",
    )
    conditions: list[Condition] = Field(default_factory=list)
    restarts: list[WorkloadRestart] = Field(
        default_factory=list,
        description=(
            "The workloads (annotated dynamic-config.rs/restart-on-change) last rolled for this "
            "target, newest first, one entry per workload."
        ),
    )


class _Object(_Model):
    """The metadata the reconciler needs from any of the three kinds."""

    name: str
    namespace: str | None = None
    uid: str = ""
    generation: int = 0
    resource_version: str = ""

    @staticmethod
    def _meta(raw: dict[str, Any]) -> dict[str, Any]:
        meta = raw.get("metadata") or {}
        return {
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid", ""),
            "generation": meta.get("generation") or 0,
            "resource_version": meta.get("resourceVersion", ""),
        }


class DynamicConfigClass(_Object):
    """A namespaced class as read from the API server."""

    spec: ClassSpec

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> DynamicConfigClass:
        return cls(**cls._meta(raw), spec=ClassSpec.model_validate(raw.get("spec") or {}))


class ClusterDynamicConfigClass(_Object):
    """A cluster class as read from the API server."""

    spec: ClusterClassSpec

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> ClusterDynamicConfigClass:
        return cls(**cls._meta(raw), spec=ClusterClassSpec.model_validate(raw.get("spec") or {}))


class DynamicConfigRender(_Object):
    """A Render as read from the API server, with the status the operator last wrote."""

    spec: RenderSpec
    status: RenderStatus

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> DynamicConfigRender:
        return cls(
            **cls._meta(raw),
            spec=RenderSpec.model_validate(raw.get("spec") or {}),
            status=RenderStatus.model_validate(raw.get("status") or {}),
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace or "", self.name)

    def ready(self) -> Condition | None:
        return next((c for c in self.status.conditions if c.type == "Ready"), None)
