"""The pod audit against the real API server: pods admitted without their agent are reported.

No webhook serves these tests. A pod annotated for injection is created directly, so the API
server admits it as written and without the agent, which is what ``failurePolicy: Ignore`` does
during an outage. Nothing runs the pods (there is no kubelet), and the audit reports pods from
the moment they exist (see :func:`dynconf_k8s.operator.podaudit.unfinished`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

from dynconf_k8s.contract.parse import AGENT, INIT, INJECTED
from dynconf_k8s.contract.registry import annotation
from dynconf_k8s.operator.cluster import Cluster
from dynconf_k8s.operator.election import LEASE_NAME
from dynconf_k8s.operator.manager import Operator
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.podaudit import (
    INTERVAL_ENV,
    POD_AUDIT_ENV,
    PodAudit,
    PodAuditSettings,
)
from dynconf_k8s.operator.types import Reason

from .test_election import OperatorProcess

GAUGE = "dynamic_config_operator_pods_without_agent"
FOUND = "dynamic_config_operator_pods_without_agent_total"
ASKS = {annotation("inject"): "true"}


def pod(
    name: str,
    annotations: dict[str, str] | None = None,
    containers: tuple[str, ...] = ("app",),
    init_containers: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "containers": [{"name": c, "image": "busybox"} for c in containers],
    }
    if init_containers:
        spec["initContainers"] = [{"name": c, "image": "busybox"} for c in init_containers]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
        "spec": spec,
    }


@pytest.fixture
def create_pod(kube_client: Any) -> Callable[[str, dict[str, Any]], None]:
    """Create a pod in a namespace, making the namespace's ``default`` ServiceAccount first."""
    core = client.CoreV1Api(kube_client)

    def create(namespace: str, body: dict[str, Any]) -> None:
        try:
            core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
        except ApiException as error:
            if error.status != 409:
                raise
        core.create_namespaced_pod(namespace, body)

    return create


@pytest.fixture
def labelled_namespace(kube_client: Any) -> Iterator[tuple[str, str]]:
    """A second fresh namespace with a label of its own: ``(name, label value)``."""
    core = client.CoreV1Api(kube_client)
    token = uuid.uuid4().hex[:8]
    name = f"op-audit-{token}"
    core.create_namespace({"metadata": {"name": name, "labels": {"dynconf-audit": token}}})
    yield name, token
    core.delete_namespace(name)


def audit_of(api: Any, registration: str | None = None) -> tuple[PodAudit, OperatorMetrics]:
    metrics = OperatorMetrics()
    cluster = Cluster(api, identity="test-audit")
    return PodAudit(cluster, metrics, PodAuditSettings(registration=registration)), metrics


def missing(kube: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    return [e for e in kube.events(namespace, name) if e.get("reason") == Reason.AGENT_MISSING]


def names_in(found: list[Any], namespace: str) -> list[str]:
    return [ref.name for ref in found if ref.namespace == namespace]


@pytest.mark.timeout(120)
def test_only_the_pod_that_asked_and_has_no_agent_is_reported_once(
    audit_api: Any,
    kube: Any,
    namespace: str,
    create_pod: Callable[[str, dict[str, Any]], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    create_pod(namespace, pod("asked", ASKS))
    create_pod(
        namespace,
        pod("injected", {**ASKS, annotation("status"): INJECTED}, containers=("app", AGENT)),
    )
    create_pod(namespace, pod("init-only", ASKS, init_containers=(INIT,)))
    create_pod(namespace, pod("plain"))
    create_pod(namespace, pod("opted-out", {annotation("inject"): "false"}))
    audit, metrics = audit_of(audit_api)
    caplog.set_level(logging.WARNING, logger="dynconf_k8s.operator.podaudit")

    assert names_in(audit.audit(), namespace) == ["asked"]
    assert metrics.registry.get_sample_value(GAUGE, {"pod_namespace": namespace}) == 1
    assert metrics.registry.get_sample_value(FOUND, {"pod_namespace": namespace}) == 1
    (event,) = missing(kube, namespace, "asked")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "Pod"
    assert "delete the pod and create it again" in event["message"]
    for other in ("injected", "init-only", "plain", "opted-out"):
        assert missing(kube, namespace, other) == [], other

    assert names_in(audit.audit(), namespace) == ["asked"]  # a second pass tells nobody again
    assert len(missing(kube, namespace, "asked")) == 1
    assert metrics.registry.get_sample_value(FOUND, {"pod_namespace": namespace}) == 1
    told = [
        record
        for record in caplog.records
        if record.getMessage() == "pod_without_agent"
        and getattr(record, "namespace", None) == namespace
    ]
    assert [getattr(record, "pod", None) for record in told] == ["asked"]

    kube.core.delete_namespaced_pod("asked", namespace, grace_period_seconds=0)
    assert names_in(audit.audit(), namespace) == []
    assert metrics.registry.get_sample_value(GAUGE, {"pod_namespace": namespace}) == 0
    assert metrics.registry.get_sample_value(FOUND, {"pod_namespace": namespace}) == 1


@pytest.mark.timeout(120)
def test_only_pods_the_registration_sends_to_the_webhook_count_as_missed(
    audit_api: Any,
    kube_client: Any,
    kube: Any,
    namespace: str,
    labelled_namespace: tuple[str, str],
    create_pod: Callable[[str, dict[str, Any]], None],
) -> None:
    selected, token = labelled_namespace
    admission = client.AdmissionregistrationV1Api(kube_client)
    registration = f"audit-{token}.dynamic-config.rs"
    admission.create_mutating_webhook_configuration(
        {
            "metadata": {"name": registration},
            "webhooks": [
                {
                    "name": "inject.dynamic-config.rs",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Ignore",  # nothing listens there: pods pass un-injected
                    "timeoutSeconds": 1,
                    "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods"],
                        }
                    ],
                    "namespaceSelector": {"matchLabels": {"dynconf-audit": token}},
                    "objectSelector": {
                        "matchExpressions": [{"key": "audit-skip", "operator": "DoesNotExist"}]
                    },
                }
            ],
        }
    )
    try:
        create_pod(selected, pod("missed", ASKS))
        create_pod(selected, pod("not-sent", ASKS, labels={"audit-skip": "yes"}))
        create_pod(namespace, pod("never-sent", ASKS))  # a namespace the webhook never sees
        audit, metrics = audit_of(audit_api, registration)

        found = audit.audit()

        assert names_in(found, selected) == ["missed"]
        assert names_in(found, namespace) == []
        assert metrics.registry.get_sample_value(GAUGE, {"pod_namespace": selected}) == 1
        assert metrics.registry.get_sample_value(GAUGE, {"pod_namespace": namespace}) is None
        assert len(missing(kube, selected, "missed")) == 1
        assert missing(kube, selected, "not-sent") == []
        assert missing(kube, namespace, "never-sent") == []
    finally:
        admission.delete_mutating_webhook_configuration(registration)


@pytest.mark.timeout(120)
def test_a_named_registration_that_is_gone_leaves_every_annotated_pod_audited(
    audit_api: Any,
    namespace: str,
    create_pod: Callable[[str, dict[str, Any]], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    create_pod(namespace, pod("asked", ASKS))
    audit, _ = audit_of(audit_api, f"gone-{uuid.uuid4().hex[:8]}")
    caplog.set_level(logging.WARNING, logger="dynconf_k8s.operator.podaudit")

    assert names_in(audit.audit(), namespace) == ["asked"]
    assert "webhook_registration_missing" in [record.getMessage() for record in caplog.records]


@pytest.mark.timeout(180)
def test_two_replicas_report_a_pod_once_from_the_leader(
    audit_kubeconfig: Path,
    kube: Any,
    kube_client: Any,
    namespace: str,
    create_pod: Callable[[str, dict[str, Any]], None],
) -> None:
    audit_on = {POD_AUDIT_ENV: "true", INTERVAL_ENV: "1"}
    pair = [
        OperatorProcess(name, namespace, audit_kubeconfig, audit_on) for name in ("op-a", "op-b")
    ]
    try:
        holder = kube.await_lease(namespace, LEASE_NAME)["spec"]["holderIdentity"]
        leader = next(p for p in pair if p.name == holder)
        follower = next(p for p in pair if p is not leader)
        follower.await_event("leader_waiting")
        create_pod(namespace, pod("first", ASKS))
        leader.await_event("pod_without_agent", namespace=namespace, pod="first")
        kube.await_event(namespace, "first", Reason.AGENT_MISSING)
        # a pod created after the first was told is found by a later pass, which lists the
        # first again: awaiting it shows that pass told nobody twice
        create_pod(namespace, pod("second", ASKS))
        leader.await_event("pod_without_agent", namespace=namespace, pod="second")
        kube.await_event(namespace, "second", Reason.AGENT_MISSING)

        (event,) = missing(kube, namespace, "first")
        assert event["reportingInstance"] == leader.name
        told = [
            line.get("pod")
            for line in leader.lines
            if line.get("event") == "pod_without_agent" and line.get("namespace") == namespace
        ]
        assert told == ["first", "second"]
        assert not [line for line in follower.lines if line.get("event") == "pod_without_agent"]
    finally:
        for process in pair:
            process.stop()


@pytest.mark.timeout(120)
def test_an_operator_auditing_pods_reports_from_its_controller_and_stops_clean(
    audit_api: Any,
    kube: Any,
    operator_crds: Any,
    namespace: str,
    create_pod: Callable[[str, dict[str, Any]], None],
) -> None:
    create_pod(namespace, pod("asked", ASKS))
    before = set(threading.enumerate())
    running = Operator(
        audit_api, identity="test-audit-operator", pod_audit=PodAuditSettings(interval=1)
    )
    running.start()
    try:
        kube.await_event(namespace, "asked", Reason.AGENT_MISSING)
    finally:
        running.stop()

    left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == []
    sample = running.metrics.registry.get_sample_value(GAUGE, {"pod_namespace": namespace})
    assert sample == 1
