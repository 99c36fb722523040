"""Every API call the reconciler makes, in one place, with the verbs the ClusterRole grants.

Each method names the resource and verb it uses; :data:`dynconf_k8s.operator.rbac.RULES` lists
exactly these, and the tests run the operator under a ServiceAccount bound to nothing more, so
a call added here without its rule fails the suite with a 403. Reads come back as plain dicts
(``_preload_content=False``): the reconciler needs a few fields, not the client's models. Every
such answer is read to its end (:func:`_finished`) so that its connection goes back to the pool.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

from dynconf_k8s.operator.targets import RenderRefused, TargetRef
from dynconf_k8s.operator.types import (
    API_VERSION,
    FIELD_MANAGER,
    GROUP,
    PLURALS,
    RENDER_KIND,
    VERSION,
    DynamicConfigRender,
)

__all__ = ["UNFINISHED", "Cluster", "ExistingTarget", "api_failure"]

UNFINISHED: Final = "status.phase!=Succeeded,status.phase!=Failed"
"""The pod audit's field selector: pods that have not finished."""
_PAGE: Final = 500
"""Objects per page of a list the operator does not hold (the audit's pods and namespaces)."""
_APPLY: Final = "application/apply-patch+yaml"
_MERGE: Final = "application/merge-patch+json"
_EVENT_MESSAGE_LIMIT: Final = 1024

log = logging.getLogger("dynconf_k8s.operator.cluster")


@dataclass(frozen=True)
class ExistingTarget:
    """What the target holds now: its data (decoded for a Secret) and its owner references."""

    data: dict[str, str]
    owner_references: list[dict[str, Any]] = field(default_factory=list)


def api_failure(error: ApiException, what: str) -> str:
    """A value-free sentence for a refused API call (the body is not quoted: it can echo)."""
    return f"the API server answered {error.status} {error.reason} to {what}"


class Cluster:
    """The operator's view of the API server, through one authenticated ``ApiClient``."""

    def __init__(self, api_client: Any, *, identity: str = FIELD_MANAGER) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.identity = identity

    # -- secrets: get ------------------------------------------------------------------------

    def read_token(self, namespace: str, name: str, key: str) -> str:
        """The token under ``key`` of Secret ``namespace/name``, read with our identity."""
        try:
            raw = self._json(
                self.core.read_namespaced_secret(name, namespace, _preload_content=False)
            )
        except ApiException as error:
            if error.status == 404:
                raise RenderRefused(f"token secret {namespace}/{name} does not exist") from None
            raise RenderRefused(api_failure(error, f"get secret {namespace}/{name}")) from None
        encoded = (raw.get("data") or {}).get(key)
        if encoded is None:
            raise RenderRefused(f'secret {namespace}/{name} has no "{key}" key')
        try:
            return base64.b64decode(encoded).decode("utf-8").strip()
        except (binascii.Error, UnicodeDecodeError):
            raise RenderRefused(
                f'secret {namespace}/{name} key "{key}" is not UTF-8 text'
            ) from None

    # -- targets: configmaps get/patch, secrets get/patch --------------------------------------

    def read_target(self, ref: TargetRef, namespace: str) -> ExistingTarget | None:
        """The target as it is now, or ``None`` when it does not exist."""
        read = (
            self.core.read_namespaced_config_map
            if ref.kind == "ConfigMap"
            else self.core.read_namespaced_secret
        )
        try:
            raw = self._json(read(ref.name, namespace, _preload_content=False))
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        data: dict[str, str] = dict(raw.get("data") or {})
        if ref.kind == "Secret":
            data = {key: _decode(value) for key, value in data.items()}
        elif raw.get("binaryData"):
            data.update(dict.fromkeys(raw["binaryData"], "\x00binary"))
        owners = list((raw.get("metadata") or {}).get("ownerReferences") or [])
        return ExistingTarget(data=data, owner_references=owners)

    def apply_target(
        self,
        ref: TargetRef,
        namespace: str,
        data: dict[str, str],
        owner_references: list[dict[str, Any]],
    ) -> None:
        """Server-side apply of the target's whole data, forced, as ``dynamic-config-operator``."""
        metadata: dict[str, Any] = {"name": ref.name, "namespace": namespace}
        if owner_references:
            metadata["ownerReferences"] = owner_references
        body: dict[str, Any] = {"apiVersion": "v1", "kind": ref.kind, "metadata": metadata}
        if ref.kind == "ConfigMap":
            body["data"] = data
            patch = self.core.patch_namespaced_config_map
        else:
            body["type"] = "Opaque"
            body["data"] = {key: _encode(value) for key, value in data.items()}
            patch = self.core.patch_namespaced_secret
        _finished(
            patch(
                ref.name,
                namespace,
                body,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=_APPLY,
                _preload_content=False,
            )
        )

    # -- renders/status: patch ---------------------------------------------------------------

    def patch_status(self, render: DynamicConfigRender, status: dict[str, Any]) -> None:
        """Merge-patch the Render's status subresource (``None`` values remove a field)."""
        _finished(
            self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                render.namespace,
                PLURALS[RENDER_KIND],
                render.name,
                {"status": status},
                _content_type=_MERGE,
                _preload_content=False,
            )
        )

    # -- deployments/statefulsets/daemonsets: patch (restarts only) -----------------------------

    def patch_template_annotation(
        self, plural: str, namespace: str, name: str, key: str, value: str
    ) -> None:
        """Set one pod-template annotation (a rollout under the workload's own strategy)."""
        apps = client.AppsV1Api(self.api_client)
        patch = {
            "deployments": apps.patch_namespaced_deployment,
            "statefulsets": apps.patch_namespaced_stateful_set,
            "daemonsets": apps.patch_namespaced_daemon_set,
        }[plural]
        body = {"spec": {"template": {"metadata": {"annotations": {key: value}}}}}
        _finished(patch(name, namespace, body, _content_type=_MERGE, _preload_content=False))

    # -- pods, namespaces: list; mutatingwebhookconfigurations: get (the pod audit only) -------

    def unfinished_pods(self, label_selector: str) -> Iterator[dict[str, Any]]:
        """Every pod in every namespace matching ``label_selector`` that has not finished.

        Listed a page at a time, so the operator holds one page of pods and never the cluster's.
        """
        for page in self._pages(
            self.core.list_pod_for_all_namespaces,
            label_selector=label_selector,
            field_selector=UNFINISHED,
        ):
            yield from page

    def namespace_names(self, label_selector: str) -> set[str]:
        """The names of the namespaces matching ``label_selector``."""
        return {
            (item.get("metadata") or {}).get("name", "")
            for page in self._pages(self.core.list_namespace, label_selector=label_selector)
            for item in page
        }

    def read_webhook_configuration(self, name: str) -> dict[str, Any] | None:
        """The MutatingWebhookConfiguration ``name``, or ``None`` when it does not exist."""
        admission = client.AdmissionregistrationV1Api(self.api_client)
        try:
            return self._json(
                admission.read_mutating_webhook_configuration(name, _preload_content=False)
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def _pages(self, list_call: Any, **selectors: str) -> Iterator[list[dict[str, Any]]]:
        token: str | None = None
        while True:
            answer = self._json(
                list_call(**selectors, limit=_PAGE, _continue=token, _preload_content=False)
            )
            yield list(answer.get("items") or [])
            token = (answer.get("metadata") or {}).get("continue") or None
            if token is None:
                return

    # -- events: create ------------------------------------------------------------------------

    def post_event(self, render: DynamicConfigRender, kind: str, reason: str, message: str) -> None:
        """Record a core/v1 Event on the Render; a refused Event is logged, never fatal."""
        involved = {
            "apiVersion": API_VERSION,
            "kind": RENDER_KIND,
            "name": render.name,
            "namespace": render.namespace,
            "uid": render.uid,
            "resourceVersion": render.resource_version,
        }
        self.post_event_on(involved, kind, reason, message, action="Render")

    def post_event_on(
        self, involved: dict[str, Any], kind: str, reason: str, message: str, *, action: str
    ) -> None:
        """Record a core/v1 Event on any namespaced object; refused is logged, never fatal."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        namespace = involved["namespace"]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:_EVENT_MESSAGE_LIMIT],
            "type": kind,
            "action": action,
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": self.identity,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            _finished(self.core.create_namespaced_event(namespace, body, _preload_content=False))
        except ApiException as error:
            log.warning(
                "event_refused",
                extra={
                    "object": f"{involved['kind']}/{namespace}/{involved['name']}",
                    "status": error.status,
                },
            )

    @staticmethod
    def _json(response: Any) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(response.data)
        return loaded


def _finished(response: Any) -> None:
    """Read a write's answer to its end and hand its connection back to the pool.

    An answer asked for with ``_preload_content=False`` holds its connection until its body is
    read. Left unread, the connection never returns to the pool and the next call opens a new
    TLS connection: three of a Render's four calls did, which was 45 % of the reconcile time at
    1,000 Renders.
    """
    response.drain_conn()
    response.release_conn()


def _encode(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _decode(encoded: str) -> str:
    try:
        return base64.b64decode(encoded).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        # not text we wrote: it can never equal a rendered value, so the next apply replaces it
        return "\0binary"
