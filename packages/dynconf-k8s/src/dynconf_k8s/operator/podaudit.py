"""Pods that asked for injection and run without the agent: found, counted and reported.

The webhook is registered with ``failurePolicy: Ignore`` by default. A pod created while no
replica answers (an outage, a burst past ``timeoutSeconds``) is admitted as it was written,
without its ``dynamic-config-agent`` / ``dynamic-config-init`` containers, and the API server
says nothing about it. On every pass :class:`PodAudit` lists the pods and keeps the ones that

- the webhook registration selects: the ``namespaceSelector`` and ``objectSelector`` of each
  webhook in the MutatingWebhookConfiguration the chart names. A pod the API server would never
  send to the webhook (an excluded namespace, one without the gating label) was not missed. When
  no registration is named, or the named one does not exist, every pod is considered;
- ask for injection: ``dynamic-config.rs/inject`` is ``"true"`` by that row's own rule. Any
  other value would have been refused at admission, so recreating the pod would not inject it;
- carry no injected agent, judged by the webhook's own idempotence check
  (:func:`~dynconf_k8s.contract.parse.injected_container_present`). Every injection adds the
  default render's container, and named renders only ever come beside it;
- have not finished (see :func:`unfinished`).

A pod found is reported once. It gets a ``Warning`` Event with reason ``AgentMissing`` that says
what to do, a ``pod_without_agent`` log line, and one count in
``pods_without_agent_total``. It stays in the ``pods_without_agent`` gauge until it is gone.
A pod that no longer lists is forgotten. The memory is the process's own, so a new leader
reports each pod that is still without its agent one more time.

Only the leader audits. The operator's controllers start only once this replica holds the Lease,
and a lost Lease ends the process, so two replicas never report the same pod. The timing is
the controller's: one key and one worker, requeued after ``interval``, and a failed pass backs
off the way a failed reconcile does.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
from urllib3.exceptions import HTTPError

from dynconf_k8s.contract.parse import AGENT, INIT, injected_container_present
from dynconf_k8s.contract.registry import REGISTRY, annotation
from dynconf_k8s.contract.rules import RuleError, parse_bool, parse_duration_seconds
from dynconf_k8s.operator.cluster import Cluster, api_failure
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.restarts import SettingsError
from dynconf_k8s.operator.types import Reason

__all__ = [
    "AUDIT_KEY",
    "INTERVAL_ENV",
    "POD_AUDIT_ENV",
    "WEBHOOK_CONFIGURATION_ENV",
    "AuditFailed",
    "PodAudit",
    "PodAuditSettings",
    "PodRef",
    "asks_for_injection",
    "label_selector",
    "pod_audit_settings",
    "unfinished",
]

POD_AUDIT_ENV: Final = "DYNAMIC_CONFIG_OPERATOR_POD_AUDIT"
INTERVAL_ENV: Final = "DYNAMIC_CONFIG_OPERATOR_POD_AUDIT_INTERVAL"
WEBHOOK_CONFIGURATION_ENV: Final = "DYNAMIC_CONFIG_OPERATOR_WEBHOOK_CONFIGURATION"
AUDIT_KEY: Final = "pods"
"""The controller's one key: a pass covers every pod."""
_INJECT: Final = REGISTRY["inject"]
_SELECTOR_TERMS: Final = {
    "In": "{key} in ({values})",
    "NotIn": "{key} notin ({values})",
    "Exists": "{key}",
    "DoesNotExist": "!{key}",
}

log = logging.getLogger("dynconf_k8s.operator.podaudit")


@dataclass(frozen=True)
class PodAuditSettings:
    """The audit's knobs (chart ``operator.podAudit``)."""

    interval: float = 30.0
    """Seconds between two passes."""
    registration: str | None = None
    """The MutatingWebhookConfiguration whose selectors say which pods the webhook is sent
    (the chart's ``<fullname>``). ``None`` considers every pod."""


def pod_audit_settings(environ: Mapping[str, str]) -> PodAuditSettings | None:
    """The audit settings from the environment (on unless switched off), ``None`` when off."""
    switch = environ.get(POD_AUDIT_ENV, "true") or "true"
    try:
        on = parse_bool(switch)
    except RuleError as error:
        raise SettingsError(f"{POD_AUDIT_ENV} {error}") from None
    if not on:
        return None
    text = environ.get(INTERVAL_ENV) or ""
    try:
        interval = float(parse_duration_seconds(text)) if text else PodAuditSettings.interval
    except RuleError as error:
        raise SettingsError(f"{INTERVAL_ENV} {error}") from None
    registration = (environ.get(WEBHOOK_CONFIGURATION_ENV) or "").strip() or None
    return PodAuditSettings(interval=interval, registration=registration)


class AuditFailed(Exception):
    """A pass the API server refused, already logged; the controller backs off and retries."""


@dataclass(frozen=True, order=True)
class PodRef:
    """A pod found without its agent: names only, never a value from its spec."""

    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    owner: tuple[str, str] | None = None
    """``(kind, name)`` of its controller, when it has one."""

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> PodRef:
        meta = raw.get("metadata") or {}
        owner = next(
            (
                (str(ref.get("kind")), str(ref.get("name")))
                for ref in meta.get("ownerReferences") or []
                if ref.get("controller")
            ),
            None,
        )
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            resource_version=meta.get("resourceVersion", ""),
            owner=owner,
        )

    def involved(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
        }


def asks_for_injection(annotations: object) -> bool:
    """Whether ``dynamic-config.rs/inject`` says ``"true"``, judged by the row's own rule."""
    if not isinstance(annotations, Mapping):
        return False
    text = annotations.get(annotation(_INJECT.name))
    if not isinstance(text, str):
        return False
    try:
        return _INJECT.rule(text) is True
    except RuleError:
        return False


def unfinished(raw: Mapping[str, Any]) -> bool:
    """Whether a pod can still run: not ``Succeeded`` or ``Failed``, and not being deleted.

    A pod is reported from the moment it exists, Pending and even unscheduled, and not only
    once it runs. Its containers are fixed when it is created, and the webhook is only asked
    at creation, so a pod that exists without its agent will start without it. Telling at
    creation gives the owner the earliest moment to replace it. A finished pod needs nothing
    more, and a pod being deleted is already on its way out. The list call asks the API server
    for the phases (:data:`~dynconf_k8s.operator.cluster.UNFINISHED`), and this check repeats
    it beside the deletion mark, which no field selector reaches.
    """
    meta = raw.get("metadata") or {}
    phase = (raw.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def label_selector(selector: Mapping[str, Any] | None) -> str:
    """A ``LabelSelector`` object as the list calls' ``labelSelector`` text ("": everything)."""
    if not selector:
        return ""
    terms = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        template = _SELECTOR_TERMS.get(expression.get("operator", ""))
        if template is None:
            raise AuditFailed(
                f"the webhook registration has a selector operator "
                f"{expression.get('operator')!r} the audit cannot read"
            )
        values = ",".join(expression.get("values") or [])
        terms.append(template.format(key=expression.get("key", ""), values=values))
    return ",".join(terms)


@dataclass(frozen=True)
class _Scope:
    """What one webhook of the registration is sent: namespaces by label (``None``: every
    namespace), and pods by label ("": every pod)."""

    namespaces: str | None
    pods: str


_EVERY_POD: Final = _Scope(namespaces=None, pods="")


def _message(pod: PodRef) -> str:
    if pod.owner is not None:
        again = f"delete the pod and its {pod.owner[0]} {pod.owner[1]} creates it again"
    else:
        again = "delete the pod and create it again"
    return (
        f'{annotation(_INJECT.name)} is "true", but the pod has no {AGENT} or {INIT} container: '
        "the webhook did not inject it at admission (it was unreachable or too slow, and the "
        f"failure policy Ignore let the pod through). Once the webhook serves, {again}; "
        "admission then adds the agent, or says what to fix"
    )


class PodAudit:
    """One pass per :meth:`reconcile`; what it found last is kept between passes."""

    def __init__(
        self, cluster: Cluster, metrics: OperatorMetrics, settings: PodAuditSettings
    ) -> None:
        self.cluster = cluster
        self.metrics = metrics
        self.settings = settings
        self._reported: dict[str, PodRef] = {}
        self._registration_missing = False

    def reconcile(self, _key: str) -> float:
        """The controller's handler: one pass, then the interval until the next."""
        self.audit()
        return self.settings.interval

    def audit(self) -> list[PodRef]:
        """List, compare with what was reported, report what is new; the pods found now."""
        try:
            found = self._find()
        except ApiException as error:
            log.warning(
                "pod_audit_failed", extra={"problem": api_failure(error, "the pod audit's list")}
            )
            raise AuditFailed(str(error.status)) from None
        except (HTTPError, OSError) as error:
            log.warning("pod_audit_failed", extra={"error_type": type(error).__name__})
            raise AuditFailed(type(error).__name__) from None
        except AuditFailed as error:
            log.warning("pod_audit_failed", extra={"problem": str(error)})
            raise
        new = [pod for uid, pod in sorted(found.items()) if uid not in self._reported]
        for pod in new:
            self._report(pod)
        self._reported = found  # the pods gone since the last pass are forgotten
        self.metrics.pods_without_agent.observe(
            Counter(pod.namespace for pod in found.values()), [pod.namespace for pod in new]
        )
        return sorted(found.values())

    def _report(self, pod: PodRef) -> None:
        log.warning("pod_without_agent", extra={"namespace": pod.namespace, "pod": pod.name})
        self.cluster.post_event_on(
            pod.involved(), "Warning", Reason.AGENT_MISSING, _message(pod), action="Audit"
        )

    def _find(self) -> dict[str, PodRef]:
        found: dict[str, PodRef] = {}
        for scope in self._scopes():
            namespaces = (
                None if scope.namespaces is None else self.cluster.namespace_names(scope.namespaces)
            )
            for raw in self.cluster.unfinished_pods(scope.pods):
                meta = raw.get("metadata") or {}
                if namespaces is not None and meta.get("namespace") not in namespaces:
                    continue
                if not unfinished(raw) or not asks_for_injection(meta.get("annotations")):
                    continue
                if injected_container_present(raw.get("spec")):
                    continue
                pod = PodRef.of(raw)
                found[pod.uid] = pod
        return found

    def _scopes(self) -> set[_Scope]:
        """What the registration's webhooks are sent (every pod when there is none to read)."""
        name = self.settings.registration
        if name is None:
            return {_EVERY_POD}
        registration = self.cluster.read_webhook_configuration(name)
        if registration is None:
            if not self._registration_missing:
                log.warning(
                    "webhook_registration_missing",
                    extra={"registration": name, "audited": "every annotated pod"},
                )
            self._registration_missing = True
            return {_EVERY_POD}
        self._registration_missing = False
        return {
            _Scope(
                namespaces=label_selector(webhook.get("namespaceSelector")) or None,
                pods=label_selector(webhook.get("objectSelector")),
            )
            for webhook in registration.get("webhooks") or []
        }
