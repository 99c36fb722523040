"""The ValidatingAdmissionPolicy samples in ``policies/``, applied to the real test API server.

Each sample ships in Warn mode, so the proof is the ``Warning`` header the API server attaches
to a pod create: a violating pod in a namespace carrying ``dynamic-config.rs/policies=enabled``
gets that policy's warning back, a compliant pod gets none, and the same violating pod in an
unlabelled namespace gets none (the bindings select by label, not cluster-wide).

A policy takes effect asynchronously: the API server type-checks it (``status.typeChecking``,
written for ``status.observedGeneration``) and its admission plugin loads policy and binding
from an informer. The fixture waits for the first through a watch and for the second with
dry-run probes, both bounded, so no test relies on a sleep.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.kube import KubeControlPlane

pytestmark = [pytest.mark.k8s]

POLICIES = Path(__file__).resolve().parents[2] / "policies"
LABEL = {"dynamic-config.rs/policies": "enabled"}
READY_WITHIN = 60.0
"""Seconds a policy may take to be type-checked and loaded by the admission plugin."""
PINNED = "registry.example/dynamic-config-agent@sha256:" + "ab" * 32
TAGGED = "registry.example/dynamic-config-agent:v0.3.0"


def _documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(POLICIES.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def _policy_names() -> list[str]:
    return [d["metadata"]["name"] for d in _documents() if d["kind"] == "ValidatingAdmissionPolicy"]


def _pod(name: str, annotations: dict[str, str] | None = None, *,
         agent_image: str = PINNED, agent_name: str = "dynamic-config-agent",
         init: str | None = None) -> dict[str, Any]:  # fmt: skip
    """A pod as the webhook would have left it: the app plus the injected agent container(s)."""
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "containers": [
            {"name": "app", "image": "registry.example/app:1"},
            {"name": agent_name, "image": agent_image},
        ],
    }
    if init is not None:
        spec["initContainers"] = [{"name": init, "image": agent_image}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": spec,
    }


class Cluster:
    """Creates pods and answers the API server's warnings for each create."""

    def __init__(self, api_client: object) -> None:
        from kubernetes import client  # type: ignore[import-untyped]

        self.core = client.CoreV1Api(api_client)

    def warnings(self, namespace: str, pod: dict[str, Any], *, dry_run: bool = False) -> str:
        """Create ``pod`` (or dry-run it) and return every ``Warning`` header, joined."""
        pod = {**pod, "metadata": {**pod["metadata"], "name": f"{pod['metadata']['name']}-"
                                   f"{uuid.uuid4().hex[:5]}"}}  # fmt: skip
        kwargs = {"dry_run": "All"} if dry_run else {}
        _, status, headers = self.core.create_namespaced_pod_with_http_info(
            namespace, pod, **kwargs
        )
        assert status == 201
        getlist = getattr(headers, "getlist", None)
        values = getlist("Warning") if getlist else [headers.get("Warning") or ""]
        return "\n".join(v for v in values if v)


def _create_namespace(core: Any, name: str, labels: dict[str, str] | None) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
    )
    # The ServiceAccount admission plugin wants the namespace's default account to exist; the
    # controller that makes it may lag, so make it here.
    try:
        core.create_namespaced_service_account(
            name, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="default"))
        )
    except ApiException as err:
        if err.status != 409:
            raise


def _await_type_checked(admission: Any, name: str, deadline: float) -> dict[str, Any]:
    """Watch the policy until its status answers for its current generation; return it."""
    from kubernetes import watch

    current = admission.read_validating_admission_policy(name)
    while True:
        status = current.status
        if (
            status is not None
            and status.observed_generation == current.metadata.generation
            and status.type_checking is not None
        ):
            return {"warnings": status.type_checking.expression_warnings or []}
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{name} was not type-checked within {READY_WITHIN:g} s"
        stream = watch.Watch().stream(
            admission.list_validating_admission_policy,
            field_selector=f"metadata.name={name}",
            resource_version=current.metadata.resource_version,
            timeout_seconds=max(1, int(remaining)),
        )
        for event in stream:
            current = event["object"]
            break
        else:
            current = admission.read_validating_admission_policy(name)


def _await_enforced(cluster: Cluster, namespace: str, probe: dict[str, Any], policy: str,
                    deadline: float) -> None:  # fmt: skip
    """Dry-run a violating pod until the admission plugin has loaded ``policy``'s binding.

    The plugin reads policies and bindings from its own informer, which has no status to watch;
    a dry-run create runs admission without storing anything, so probing is the observation.
    """
    pause = 0.05
    while policy not in cluster.warnings(namespace, probe, dry_run=True):
        assert time.monotonic() < deadline, (
            f"{policy} gave no warning within {READY_WITHIN:g} s of being applied"
        )
        time.sleep(pause)  # a bounded back-off between probes of a state with no event
        pause = min(pause * 2, 1.0)


PROBES: dict[str, dict[str, Any]] = {
    "dynamic-config-volume-medium": _pod("probe", {"dynamic-config.rs/volume-medium": "disk"}),
    "dynamic-config-tls-skip-verify": _pod("probe", {"dynamic-config.rs/tls-skip-verify": "true"}),
    "dynamic-config-file-mode": _pod("probe", {"dynamic-config.rs/file-mode": "0644"}),
    "dynamic-config-agent-digest": _pod("probe", agent_image=TAGGED),
}


@pytest.fixture(scope="module")
def applied(kube_control_plane: KubeControlPlane, kube_client: object) -> Iterator[
        tuple[Cluster, str, str, dict[str, list[Any]]]]:  # fmt: skip
    """The four policies and bindings applied; a labelled and an unlabelled namespace."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    admission = client.AdmissionregistrationV1Api(kube_client)
    core = client.CoreV1Api(kube_client)
    cluster = Cluster(kube_client)
    suffix = uuid.uuid4().hex[:6]
    labelled, plain = f"dc-policies-{suffix}", f"dc-nopolicies-{suffix}"
    docs = _documents()
    assert set(PROBES) == set(_policy_names()), "every sample policy needs a probe here"

    def delete_all() -> None:
        for doc in docs:
            name = doc["metadata"]["name"]
            delete = (
                admission.delete_validating_admission_policy
                if doc["kind"] == "ValidatingAdmissionPolicy"
                else admission.delete_validating_admission_policy_binding
            )
            try:
                delete(name)
            except ApiException as err:
                if err.status != 404:
                    raise

    delete_all()  # a run that was killed may have left them
    try:
        for doc in docs:
            if doc["kind"] == "ValidatingAdmissionPolicy":
                admission.create_validating_admission_policy(doc)
            else:
                admission.create_validating_admission_policy_binding(doc)
        _create_namespace(core, labelled, LABEL)
        _create_namespace(core, plain, None)
        deadline = time.monotonic() + READY_WITHIN
        checked = {name: _await_type_checked(admission, name, deadline)["warnings"]
                   for name in _policy_names()}  # fmt: skip
        for name, probe in PROBES.items():
            _await_enforced(cluster, labelled, probe, name, deadline)
        yield cluster, labelled, plain, checked
    finally:
        delete_all()
        for namespace in (labelled, plain):
            try:
                core.delete_namespace(namespace)
            except ApiException as err:
                if err.status != 404:
                    raise


def test_every_sample_is_shipped_in_warn_mode_and_selects_by_namespace_label() -> None:
    bindings = [d for d in _documents() if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert sorted(b["spec"]["policyName"] for b in bindings) == sorted(_policy_names())
    assert len(bindings) == 4
    for binding in bindings:
        assert binding["spec"]["validationActions"] == ["Warn"]
        assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": LABEL}


def test_every_expression_type_checks_cleanly(
    applied: tuple[Cluster, str, str, dict[str, list[Any]]],
) -> None:
    _, _, _, checked = applied
    assert checked == {name: [] for name in _policy_names()}


VIOLATIONS = [
    pytest.param("dynamic-config-volume-medium",
                 _pod("disk", {"dynamic-config.rs/volume-medium": "disk"}), id="volume-disk"),
    pytest.param("dynamic-config-tls-skip-verify",
                 _pod("skip", {"dynamic-config.rs/tls-skip-verify": "true"}), id="skip-verify"),
    pytest.param("dynamic-config-tls-skip-verify",
                 _pod("skip-named", {"dynamic-config.rs/tls-skip-verify.cache": "TRUE"}),
                 id="skip-verify-named-render"),
    pytest.param("dynamic-config-file-mode",
                 _pod("mode", {"dynamic-config.rs/file-mode": "0644"}), id="mode-0644"),
    pytest.param("dynamic-config-file-mode",
                 _pod("mode-named", {"dynamic-config.rs/file-mode.cache": "0o604"}),
                 id="mode-named-render"),
    pytest.param("dynamic-config-file-mode",
                 _pod("mode-also", {"dynamic-config.rs/also.db": "/config/db.properties,mode=0666"}),
                 id="mode-smuggled-in-also"),
    pytest.param("dynamic-config-agent-digest", _pod("tag", agent_image=TAGGED), id="agent-tag"),
    pytest.param("dynamic-config-agent-digest",
                 _pod("tag-init", init="dynamic-config-init", agent_image=TAGGED), id="init-tag"),
    pytest.param("dynamic-config-agent-digest",
                 _pod("tag-named", agent_name="dynamic-config-agent-cache",
                      init="dynamic-config-init-cache", agent_image=TAGGED),
                 id="named-render-tag"),
]  # fmt: skip


@pytest.mark.parametrize(("policy", "pod"), VIOLATIONS)
def test_a_violating_pod_in_a_labelled_namespace_gets_the_warning(
    applied: tuple[Cluster, str, str, dict[str, list[Any]]], policy: str, pod: dict[str, Any]
) -> None:
    cluster, labelled, _, _ = applied
    warnings = cluster.warnings(labelled, pod)
    assert f"ValidatingAdmissionPolicy '{policy}'" in warnings, warnings
    others = set(_policy_names()) - {policy}
    assert not [name for name in others if f"'{name}'" in warnings], warnings


def test_the_warning_names_the_offending_key_and_the_fix(
    applied: tuple[Cluster, str, str, dict[str, list[Any]]],
) -> None:
    cluster, labelled, _, _ = applied
    warnings = cluster.warnings(
        labelled, _pod("named", {"dynamic-config.rs/file-mode.cache": "0644"})
    )
    assert "dynamic-config.rs/file-mode.cache makes the rendered file world-readable" in warnings
    warnings = cluster.warnings(
        labelled, _pod("named", agent_name="dynamic-config-agent-cache", agent_image=TAGGED)
    )
    assert "dynamic-config-agent-cache" in warnings and "agent.digest" in warnings


COMPLIANT = [
    pytest.param(_pod("plain"), id="no-annotations"),
    pytest.param(_pod("memory", {"dynamic-config.rs/volume-medium": "memory",
                                 "dynamic-config.rs/tls-skip-verify": "false",
                                 "dynamic-config.rs/file-mode": "0640",
                                 "dynamic-config.rs/file-mode.cache": "0o600"},
                      init="dynamic-config-init"), id="safe-values"),
    pytest.param(_pod("named", agent_name="dynamic-config-agent-cache",
                      init="dynamic-config-init-cache"), id="named-render-pinned"),
    pytest.param({**_pod("other"), "spec": {"containers": [
        {"name": "sidecar-dynamic-config-agent", "image": "registry.example/x:1"}]}},
                 id="unrelated-container-by-tag"),
]  # fmt: skip


@pytest.mark.parametrize("pod", COMPLIANT)
def test_a_compliant_pod_gets_no_warning(
    applied: tuple[Cluster, str, str, dict[str, list[Any]]], pod: dict[str, Any]
) -> None:
    cluster, labelled, _, _ = applied
    assert cluster.warnings(labelled, pod) == ""


def test_an_unlabelled_namespace_is_not_selected(
    applied: tuple[Cluster, str, str, dict[str, list[Any]]],
) -> None:
    cluster, _, plain, _ = applied
    everything = _pod(
        "all",
        {"dynamic-config.rs/volume-medium": "disk", "dynamic-config.rs/tls-skip-verify": "true",
         "dynamic-config.rs/file-mode": "0666"},
        agent_image=TAGGED,
    )  # fmt: skip
    assert cluster.warnings(plain, everything) == ""
