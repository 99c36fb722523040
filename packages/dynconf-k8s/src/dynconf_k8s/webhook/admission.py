"""Admission as a pure function: an AdmissionReview and an installation in, a response out.

The flow is the contract's: no object → allowed; a pod already marked and carrying the
agent → allowed untouched; class defaults; the annotation parser (first refusal wins);
the source and agent-env gates for the pod's namespace; the container-name collision
check; then the patch. Nothing here touches the network or the API server, which is what
keeps a busy API server from failing every pod creation.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.contract.parse import INJECTED, injected_container_present, parse_pod
from dynconf_k8s.contract.plan import Plan
from dynconf_k8s.contract.provenance import Provenance
from dynconf_k8s.contract.refusals import CONFLICT, POLICY, Refusal
from dynconf_k8s.contract.registry import annotation
from dynconf_k8s.contract.rules import STORES
from dynconf_k8s.webhook.agentcheck import check_agent_args
from dynconf_k8s.webhook.classes import ClassMap, apply_class
from dynconf_k8s.webhook.patch import (
    agent_containers,
    build_patch,
    container_names,
    volume_names,
)
from dynconf_k8s.webhook.shape import check_metadata, check_spec, review_uid

__all__ = ["Decision", "admit", "decide", "dumps_compact", "dumps_pretty"]

API_VERSION: Final = "admission.k8s.io/v1"

log = logging.getLogger("dynconf_k8s.webhook")


_COMPACT: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""One encoder for every patch: ``json.dumps`` with arguments builds a new one per call."""


def dumps_compact(value: object) -> str:
    """Compact JSON with sorted keys (the patch's bytes)."""
    return _COMPACT.encode(value)


def dumps_pretty(value: object) -> str:
    """2-space JSON with sorted keys (the golden files' bytes)."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)


@dataclass
class Decision:
    """What admission decided, with what the server counts and logs about it."""

    response: dict[str, Any]
    outcome: str
    reason: str | None = None
    patch_bytes: int = 0
    namespace: str = ""
    pod: str = ""
    source: str | None = None
    warnings: list[str] = field(default_factory=list)


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def _source_gates(
    plan: Plan, installation: Installation, namespace: str, trace: Provenance | None = None
) -> None:
    shown = namespace or "(none)"
    for render in (plan.default, *plan.named):
        key = annotation("source", render.name)
        denied = installation.source_deny.matches(namespace, render.source)
        allow = installation.source_allow
        if trace is not None:
            if not installation.source_deny.empty:
                trace.gate(key, "webhook.sourceDeny", not denied)
            if not allow.empty and not denied:
                trace.gate(key, "webhook.sourceAllow", allow.matches(namespace, render.source))
        if denied:
            raise Refusal(
                f'{key} is "{render.source}", which webhook.sourceDeny '
                f'(DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY) turns off in namespace "{shown}" — use '
                "another store, or ask the installer",
                reason=POLICY,
            )
        if not allow.empty and not allow.matches(namespace, render.source):
            allowed = allow.names_for(namespace)
            listing = (
                "allowed here: " + ", ".join(allowed)
                if allowed
                else "no source is currently allowed here"
            )
            raise Refusal(
                f'{key} is "{render.source}", which webhook.sourceAllow '
                f'(DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW) does not allow in namespace "{shown}"; '
                f"{listing}",
                reason=POLICY,
            )


def _env_gate(
    plan: Plan, installation: Installation, namespace: str, trace: Provenance | None = None
) -> None:
    shown = namespace or "(none)"
    for name, _value in plan.agent_env:
        admitted = installation.agent_env_allow.matches(namespace, name)
        if trace is not None:
            trace.gate(annotation("agent-env"), "webhook.agentEnvAllow", admitted, name)
        if admitted:
            continue
        allowed = installation.agent_env_allow.names_for(namespace)
        listing = (
            "allowed here: " + ", ".join(allowed)
            if allowed
            else "nothing is currently allowed here"
        )
        raise Refusal(
            f"{annotation('agent-env')} sets {name}, which webhook.agentEnvAllow "
            f'(DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW) does not allow in namespace "{shown}"; '
            f"{listing}",
            reason=POLICY,
        )


def _collisions(pod: Mapping[str, Any], plan: Plan) -> None:
    """Names and places the injection needs that the pod already uses (the API server or the
    kubelet would refuse the patched pod, or two mounts would hide each other)."""
    spec = pod.get("spec") or {}
    taken = {
        c.get("name") for group in ("containers", "initContainers") for c in spec.get(group) or []
    }
    for name in container_names(plan):
        if name in taken:
            raise Refusal(
                f'this pod already has a container called "{name}", and the injection needs '
                f'that name — rename yours, or set {annotation("inject")} to "false"',
                reason=CONFLICT,
            )
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    for name in volume_names(plan):
        if name in volumes:
            raise Refusal(
                f'this pod already has a volume called "{name}", and the injection needs that '
                f'name — rename yours, or set {annotation("inject")} to "false"',
                reason=CONFLICT,
            )
    containers = spec.get("containers") or []
    for index in plan.mount_containers:
        container = containers[index]
        for mount in container.get("volumeMounts") or []:
            if str(mount.get("mountPath", "")).rstrip("/") == plan.mount_dir:
                raise Refusal(
                    f'container "{container.get("name")}" already mounts {plan.mount_dir}, where '
                    f"the rendered file's volume goes (the directory of {annotation('path')}) — "
                    "move the file to another directory, or leave the container out with "
                    f"{annotation('inject-containers')}",
                    reason=CONFLICT,
                )


def _refused(base: Decision, refusal: Refusal) -> Decision:
    response = {
        "allowed": False,
        "status": {"code": refusal.code, "message": refusal.message, "reason": refusal.reason},
        "uid": base.response["response"]["uid"],
    }
    base.response = _review(response)
    base.outcome = "refused"
    base.reason = refusal.reason
    return base


def _parsed_source(text: object) -> str | None:
    """A source for the audit line only when it is one of the stores (never the raw text)."""
    return text if isinstance(text, str) and text in STORES else None


def decide(
    review: object,
    installation: Installation,
    classes: ClassMap | None = None,
    provenance: Provenance | None = None,
) -> Decision:
    """Judge one AdmissionReview (v1). Total: every input gets a response, never an exception.

    A malformed review is refused naming the field; anything unforeseen is refused too (and
    logged by its type), because an exception here is an HTTP 500 and the failure policy —
    ``Ignore`` starts the pod without its configuration — would decide instead.
    ``provenance`` (``explain``) records which tier, pin and gate decided each key; the
    decision is the same with or without it.
    """
    base = Decision(_review({"allowed": True, "uid": review_uid(review)}), "skipped")
    try:
        return _decide(review, installation, classes, base, provenance)
    except Refusal as refusal:
        return _refused(base, refusal)
    except Exception as error:
        log.error("admission_failed", extra={"error": type(error).__name__})
        return _refused(
            base,
            Refusal(
                f"the webhook could not judge this pod ({type(error).__name__}); check the "
                "pod against the annotation reference, or report it with the pod's manifest"
            ),
        )


def _decide(
    review: object,
    installation: Installation,
    classes: ClassMap | None,
    base: Decision,
    trace: Provenance | None = None,
) -> Decision:
    if not isinstance(review, Mapping):
        raise Refusal("the body is not an AdmissionReview object")
    request = review.get("request") or {}
    if not isinstance(request, Mapping):
        raise Refusal("request is not an object; send an admission.k8s.io/v1 AdmissionReview")
    pod = request.get("object")
    if not pod:
        return base
    check_metadata(pod)
    metadata = pod.get("metadata") or {}
    namespace = request.get("namespace") or metadata.get("namespace") or ""
    base.namespace = namespace if isinstance(namespace, str) else ""
    base.pod = metadata.get("name") or metadata.get("generateName") or ""
    annotations = metadata.get("annotations") or {}
    base.source = _parsed_source(annotations.get(annotation("source")))
    if annotations.get(annotation("status")) == INJECTED and injected_container_present(
        pod.get("spec")
    ):
        return base
    if annotations.get(annotation("inject")) == "true":
        check_spec(pod)
    if annotation("class") in annotations:
        pod = apply_class(pod, base.namespace, installation, classes)
        filled = pod["metadata"]["annotations"]
        base.source = _parsed_source(filled.get(annotation("source")))
        if trace is not None:
            for key in sorted(filled.keys() - annotations.keys()):
                trace.filled_by_class(key, filled[key], annotations[annotation("class")])
    plan, warnings = parse_pod(pod, installation, trace)
    if plan is None:
        return base
    base.source = plan.default.source
    _source_gates(plan, installation, base.namespace, trace)
    _env_gate(plan, installation, base.namespace, trace)
    _collisions(pod, plan)
    agents = agent_containers(plan)
    check_agent_args(plan, agents)
    patch = base64.b64encode(dumps_compact(build_patch(pod, plan, agents)).encode()).decode()
    response = {"allowed": True, "patch": patch, "patchType": "JSONPatch",
                "uid": base.response["response"]["uid"]}  # fmt: skip
    if warnings:
        response["warnings"] = warnings
    base.response = _review(response)
    base.outcome = "patched"
    base.patch_bytes = len(patch)
    base.warnings = warnings
    return base


def admit(
    review: object,
    installation: Installation,
    classes: ClassMap | None = None,
) -> dict[str, Any]:
    """The AdmissionReview response for one request."""
    return decide(review, installation, classes).response
