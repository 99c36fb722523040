"""The installation as a ``DynamicConfigInstallation`` against a real API server.

Each replica follows the resource with the webhook's own RBAC-limited identity (get the
resource, patch its status, create Events in its namespace: the chart's rules) and writes its
own status entry with server-side apply; admission reads the holder the follower feeds.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.inforce import InstallationInForce, ResourceWatch
from dynconf_k8s.inforce.resource import (
    EVENT_NAMESPACE,
    EVENT_RULES,
    GROUP,
    INVALID_REASON,
    PLURAL,
    RULES,
    VERSION,
)
from dynconf_k8s.operator.crds import installation_crd
from dynconf_k8s.webhook.kube import KubeAccess

SPEC = {
    "source": "consul",
    "path": "/config/app.json",
    "watchSeconds": 30,
    "storeDefaults": {"consul": {"endpoint": "http://consul.infra:8500"}},
}


@pytest.fixture(scope="module")
def installation_crd_applied(kube_client: Any) -> None:
    from kubernetes import client, watch

    ext = client.ApiextensionsV1Api(kube_client)
    crd = installation_crd()
    ext.patch_custom_resource_definition(
        crd["metadata"]["name"], crd, field_manager="dynconf-tests", force=True,
        _content_type="application/apply-patch+yaml",
    )  # fmt: skip
    stream = watch.Watch()
    for event in stream.stream(ext.list_custom_resource_definition, timeout_seconds=30):
        item = event["object"]
        if item.metadata.name == crd["metadata"]["name"] and any(
            c.type == "Established" and c.status == "True"
            for c in (item.status and item.status.conditions) or []
        ):
            stream.stop()
            return
    raise AssertionError("the installation CRD was never established")


class Replicas:
    """Followers of one resource, each a replica with the webhook's chart RBAC."""

    def __init__(self, kube_client: Any, access: KubeAccess, namespace: str, name: str) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(kube_client)
        self.core = client.CoreV1Api(kube_client)
        self.access, self.namespace, self.name = access, namespace, name

    def create(self, spec: dict[str, Any]) -> None:
        self.custom.create_cluster_custom_object(
            GROUP, VERSION, PLURAL,
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DynamicConfigInstallation",
             "metadata": {"name": self.name}, "spec": spec},
        )  # fmt: skip

    def edit(self, spec: dict[str, Any]) -> int:
        """Replace the spec; the new generation."""
        item = self.read()
        item["spec"] = spec
        done = self.custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, self.name, item)
        return int(done["metadata"]["generation"])

    def read(self) -> dict[str, Any]:
        item: dict[str, Any] = self.custom.get_cluster_custom_object(
            GROUP, VERSION, PLURAL, self.name
        )
        return item

    def replica(self, identity: str) -> ResourceWatch:
        holder = InstallationInForce(parse_installation({}))
        clients: Callable[[], AbstractContextManager[Any]] = self.access.api_client
        return ResourceWatch(
            self.name, holder, clients, component="webhook", identity=identity, every=0.2,
        )  # fmt: skip


@pytest.fixture
def replicas(
    kube_client: Any,
    kube_control_plane: Any,
    mint_sa_token: Callable[..., str],
    installation_crd_applied: None,
    tmp_path: Path,
) -> Iterator[Replicas]:
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(kube_client)
    tag = uuid.uuid4().hex[:8]
    namespace, account, name = f"inst-{tag}", "dynamic-config-webhook", f"installation-{tag}"
    token = mint_sa_token(namespace, account)
    role = f"dynconf-installation-{tag}"
    rules = [{**rule, "resourceNames": [name]} for rule in RULES]
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    rbac.create_cluster_role({"metadata": {"name": role}, "rules": rules})
    rbac.create_cluster_role_binding(
        {"metadata": {"name": role}, "subjects": [subject],
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": role}},
    )  # fmt: skip
    rbac.create_namespaced_role(EVENT_NAMESPACE, {"metadata": {"name": role}, "rules": EVENT_RULES})
    rbac.create_namespaced_role_binding(
        EVENT_NAMESPACE,
        {"metadata": {"name": role}, "subjects": [subject],
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}},
    )  # fmt: skip
    (tmp_path / "token").write_text(token)
    access = KubeAccess(
        server=kube_control_plane.server,
        token_path=str(tmp_path / "token"),
        ca_path=str(kube_control_plane.ca),
    )
    made = Replicas(kube_client, access, namespace, name)
    yield made
    client.CustomObjectsApi(kube_client).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    rbac.delete_cluster_role_binding(role)
    rbac.delete_cluster_role(role)
    rbac.delete_namespaced_role_binding(role, EVENT_NAMESPACE)
    rbac.delete_namespaced_role(role, EVENT_NAMESPACE)
    client.CoreV1Api(kube_client).delete_namespace(namespace)


def _entries(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in (item.get("status") or {}).get("replicas") or []}


def _valid(item: dict[str, Any]) -> dict[str, Any]:
    [condition] = [c for c in item["status"]["conditions"] if c["type"] == "Valid"]
    return condition


def test_resource_generation_is_applied_and_reported(replicas: Replicas) -> None:
    replicas.create(SPEC)
    watch = replicas.replica("webhook-a")

    offer = watch.poll_once()

    assert offer is not None and offer.outcome == "applied"
    assert watch.holder.current.fleet["watch-seconds"].text == "30"
    assert watch.synced.is_set()
    item = replicas.read()
    generation = item["metadata"]["generation"]
    assert item["status"]["observedGeneration"] == generation
    valid = _valid(item)
    assert (valid["status"], valid["reason"], valid["observedGeneration"]) == (
        "True", "Applied", generation,
    )  # fmt: skip
    entry = _entries(item)["webhook-a"]
    assert (entry["component"], entry["appliedGeneration"], entry["valid"]) == (
        "webhook", generation, True,
    )  # fmt: skip


def test_bad_edit_keeps_last_good_reports_the_field_and_leaves_an_event(
    replicas: Replicas,
) -> None:
    replicas.create(SPEC)
    watch = replicas.replica("webhook-a")
    watch.poll_once()
    good, first = watch.holder.current, replicas.read()["metadata"]["generation"]

    bad = replicas.edit({**SPEC, "watchSeconds": "soon"})
    offer = watch.poll_once()

    assert offer is not None and offer.outcome == "refused"
    assert watch.holder.current is good
    item = replicas.read()
    assert item["status"]["observedGeneration"] == bad
    valid = _valid(item)
    assert (valid["status"], valid["reason"]) == ("False", INVALID_REASON)
    assert "DYNAMIC_CONFIG_AGENT_WATCH_SECONDS takes whole seconds" in valid["message"]
    assert f"generation {first} stays in force" in valid["message"]
    entry = _entries(item)["webhook-a"]
    assert (entry["observedGeneration"], entry["appliedGeneration"], entry["valid"]) == (
        bad, first, False,
    )  # fmt: skip
    events = replicas.core.list_namespaced_event(
        EVENT_NAMESPACE, field_selector=f"involvedObject.name={replicas.name}"
    ).items
    assert [(e.type, e.reason) for e in events] == [("Warning", INVALID_REASON)]
    assert "whole seconds" in events[0].message


def test_two_replicas_converge_and_never_overwrite_each_other(replicas: Replicas) -> None:
    replicas.create(SPEC)
    a, b = replicas.replica("webhook-a"), replicas.replica("webhook-b")
    a.poll_once()
    b.poll_once()

    newer = replicas.edit({**SPEC, "watchSeconds": 7})
    a.poll_once()
    assert {n: e["appliedGeneration"] for n, e in _entries(replicas.read()).items()} == {
        "webhook-a": newer, "webhook-b": newer - 1,
    }, "a replica's entry says what that replica has, whatever the others did"  # fmt: skip
    b.poll_once()

    item = replicas.read()
    assert {n: e["appliedGeneration"] for n, e in _entries(item).items()} == {
        "webhook-a": newer, "webhook-b": newer,
    }  # fmt: skip
    assert a.holder.current == b.holder.current
    assert a.holder.current.fleet["watch-seconds"].text == "7"
    assert item["status"]["observedGeneration"] == newer

    b.withdraw()
    assert set(_entries(replicas.read())) == {"webhook-a"}
    assert replicas.read()["status"]["observedGeneration"] == newer


def test_a_recreated_resource_is_followed_from_its_first_generation(replicas: Replicas) -> None:
    replicas.create(SPEC)
    watch = replicas.replica("webhook-a")
    watch.poll_once()
    replicas.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, replicas.name)
    assert watch.poll_once() is None, "a missing resource changes nothing"
    assert watch.holder.current.fleet["watch-seconds"].text == "30"

    replicas.create({**SPEC, "watchSeconds": 7})
    offer = watch.poll_once()

    assert offer is not None and offer.outcome == "applied", "generation 1 again, another uid"
    assert watch.holder.current.fleet["watch-seconds"].text == "7"


def test_pods_admitted_through_the_api_server_take_an_edit_without_a_restart(
    replicas: Replicas, cluster: Any, running_webhook: Any
) -> None:
    from dynconf_k8s.webhook.settings import WebhookSettings

    replicas.create(SPEC)
    watch = replicas.replica("webhook-a")
    hook = running_webhook(WebhookSettings(), installation=watch.holder)
    stop = threading.Event()
    follower = threading.Thread(target=watch.run, args=(stop,), name="installation")
    follower.start()
    try:
        assert watch.synced.wait(15)
        label = uuid.uuid4().hex[:8]
        namespace = cluster.namespace(label)
        cluster.register(hook, label)
        pod = {"dynamic-config.rs/inject": "true", "dynamic-config.rs/key": "app/config.json"}

        before = cluster.create_pod(namespace, pod, name="before")
        newer = replicas.edit({**SPEC, "watchSeconds": 7})
        deadline = time.monotonic() + 15
        while watch.holder.applied.generation != newer and time.monotonic() < deadline:
            watch.wait_rounds(1, 5)
        after = cluster.create_pod(namespace, pod, name="after")
    finally:
        stop.set()
        follower.join(timeout=10)

    def watch_flag(made: Any) -> str:
        [agent] = [c for c in made.spec.containers if c.name == "dynamic-config-agent"]
        return str(agent.args[agent.args.index("--watch") + 1])

    assert (watch_flag(before), watch_flag(after)) == ("30", "7")
    assert set(_entries(replicas.read())) == set(), "a stopped replica withdraws its entry"
