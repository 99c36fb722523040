"""The class poller against a real API server, with the webhook's own (RBAC-limited) identity.

The classes' CRDs are the operator's generated ones from ``deploy/crds`` when present (a
minimal CRD of the same group and kinds otherwise), applied server-side and left installed,
as the operator's tests do. The poller lists into the map admission reads; admission itself
never calls the API server.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.classes import GROUP, VERSION, ClassPoller
from dynconf_k8s.webhook.kube import KubeAccess
from dynconf_k8s.webhook.settings import WebhookSettings

REPO = Path(__file__).resolve().parents[4]
CRDS = {
    "DynamicConfigClass": ("dynamicconfigclasses", "Namespaced"),
    "ClusterDynamicConfigClass": ("clusterdynamicconfigclasses", "Cluster"),
}
POD = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
}


def _minimal_crd(kind: str) -> dict[str, Any]:
    plural, scope = CRDS[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "plural": plural, "listKind": f"{kind}List"},
            "scope": scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def _class_crds() -> list[dict[str, Any]]:
    crds = []
    for kind, (plural, _scope) in CRDS.items():
        shipped = REPO / "deploy" / "crds" / f"{GROUP}_{plural}.yaml"
        crds.append(
            yaml.safe_load(shipped.read_text()) if shipped.is_file() else _minimal_crd(kind)
        )
    return crds


@pytest.fixture(scope="module")
def class_crds(kube_client: Any) -> None:
    from kubernetes import client, watch

    ext = client.ApiextensionsV1Api(kube_client)
    names = set()
    for crd in _class_crds():
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"],
            crd,
            field_manager="dynconf-tests",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        names.add(crd["metadata"]["name"])
    established: set[str] = set()
    stream = watch.Watch()
    for event in stream.stream(ext.list_custom_resource_definition, timeout_seconds=30):
        crd = event["object"]
        conditions = (crd.status and crd.status.conditions) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            established.add(crd.metadata.name)
        if names <= established:
            stream.stop()
    assert names <= established


@pytest.fixture
def webhook_identity(
    kube_client: Any, kube_control_plane: Any, mint_sa_token: Callable[..., str], tmp_path: Path
) -> Any:
    """The webhook's ServiceAccount, allowed to list the two class kinds and nothing else."""
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(kube_client)
    tag = uuid.uuid4().hex[:8]
    namespace, account = f"wh-id-{tag}", "dynamic-config-webhook"
    token = mint_sa_token(namespace, account)
    name = f"dynconf-webhook-classes-{tag}"
    rbac.create_cluster_role(
        {
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": [GROUP],
                    "resources": ["dynamicconfigclasses", "clusterdynamicconfigclasses"],
                    "verbs": ["list"],
                }
            ],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
    )  # fmt: skip
    (tmp_path / "token").write_text(token)
    yield KubeAccess(
        server=kube_control_plane.server,
        token_path=str(tmp_path / "token"),
        ca_path=str(kube_control_plane.ca),
    )
    rbac.delete_cluster_role_binding(name)
    rbac.delete_cluster_role(name)
    client.CoreV1Api(kube_client).delete_namespace(namespace)


@pytest.fixture
def poller(webhook_identity: KubeAccess) -> Any:
    poller = ClassPoller(webhook_identity, every=0.2)
    stop = threading.Event()
    thread = threading.Thread(target=poller.run, args=(stop,), daemon=True)
    thread.start()
    yield poller
    stop.set()
    thread.join(timeout=10)


def _await_map(poller: ClassPoller, holds: Callable[[Any], bool], timeout: float = 15) -> None:
    """Wait, one finished poll at a time, until the map satisfies ``holds``."""
    import time

    deadline = time.monotonic() + timeout
    while not holds(poller.classes()):
        left = deadline - time.monotonic()
        assert left > 0 and poller.wait_polls(1, left), "the poller never saw the change"


def _refusal(caught: Any) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(caught.value.body)
    return status


@pytest.mark.usefixtures("class_crds")
def test_class_created_patches_pods_and_deleted_refuses_them(
    cluster: Any, running_webhook: Any, poller: ClassPoller, kube_client: Any
) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    custom = client.CustomObjectsApi(kube_client)
    settings = WebhookSettings(
        installation=parse_installation({"DYNAMIC_CONFIG_WEBHOOK_CLASSES": "true"}), classes=True
    )
    hook = running_webhook(settings, classes=poller.classes)
    label = uuid.uuid4().hex[:8]
    namespace = cluster.namespace(label)
    cluster.register(hook, label)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "dynamicconfigclasses",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DynamicConfigClass",
         "metadata": {"name": "team-consul"},
         "spec": {"source": "consul", "endpoint": "http://consul.infra.svc:8500",
                  "tokenSecret": "consul-agent-token"}},
    )  # fmt: skip
    _await_map(poller, lambda m: (namespace, "team-consul") in m)

    pod = cluster.create_pod(namespace, {**POD, "dynamic-config.rs/class": "team-consul"})

    assert [c.name for c in pod.spec.containers] == ["app", "dynamic-config-agent"]
    agent = pod.spec.containers[1]
    assert agent.args[:4] == ["--source", "consul", "--endpoint", "http://consul.infra.svc:8500"]
    assert [(e.name, e.value_from.secret_key_ref.name) for e in agent.env] == [
        ("DYNAMIC_CONFIG_AGENT_TOKEN", "consul-agent-token")
    ]

    custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, "dynamicconfigclasses", "team-consul"
    )
    _await_map(poller, lambda m: (namespace, "team-consul") not in m)
    with pytest.raises(ApiException) as caught:
        cluster.create_pod(
            namespace, {**POD, "dynamic-config.rs/class": "team-consul"}, name="again"
        )

    assert caught.value.status == 403
    status = _refusal(caught)
    assert status["reason"] == "DynamicConfigPolicy"
    assert status["message"] == (
        'admission webhook "inject.dynamic-config.rs" denied the request: '
        'dynamic-config.rs/class names "team-consul", which this webhook cannot see: classes '
        "are read only with webhook.classes.enabled (DYNAMIC_CONFIG_WEBHOOK_CLASSES), and a "
        "class created in the last 30 seconds may not have been polled yet — check the name, "
        "or retry shortly"
    )


@pytest.mark.usefixtures("class_crds")
def test_cluster_class_refuses_a_namespace_outside_its_list(
    cluster: Any, running_webhook: Any, poller: ClassPoller, kube_client: Any
) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    custom = client.CustomObjectsApi(kube_client)
    settings = WebhookSettings(
        installation=parse_installation({"DYNAMIC_CONFIG_WEBHOOK_CLASSES": "true"}), classes=True
    )
    hook = running_webhook(settings, classes=poller.classes)
    label = uuid.uuid4().hex[:8]
    admitted, outside = cluster.namespace(label), cluster.namespace(label)
    cluster.register(hook, label)
    name = f"platform-{label}"
    custom.create_cluster_custom_object(
        GROUP, VERSION, "clusterdynamicconfigclasses",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterDynamicConfigClass",
         "metadata": {"name": name},
         "spec": {"source": "consul", "endpoint": "http://consul.infra.svc:8500",
                  "namespaces": [admitted]}},
    )  # fmt: skip
    cluster.on_teardown(
        lambda: custom.delete_cluster_custom_object(
            GROUP, VERSION, "clusterdynamicconfigclasses", name
        )
    )
    _await_map(poller, lambda m: (None, name) in m)

    pod = cluster.create_pod(admitted, {**POD, "dynamic-config.rs/class": name})
    with pytest.raises(ApiException) as caught:
        cluster.create_pod(outside, {**POD, "dynamic-config.rs/class": name})

    assert [c.name for c in pod.spec.containers] == ["app", "dynamic-config-agent"]
    assert caught.value.status == 403
    status = _refusal(caught)
    assert status["reason"] == "DynamicConfigPolicy"
    assert (
        f'ClusterDynamicConfigClass "{name}" exists and does not admit namespace {outside}'
        in (status["message"])
    )


def test_poller_without_identity_leaves_the_map_empty(tmp_path: Path) -> None:
    poller = ClassPoller(
        KubeAccess(token_path=str(tmp_path / "token"), ca_path=str(tmp_path / "ca.crt"))
    )

    assert poller.poll_once() is False
    assert dict(poller.classes()) == {}


def test_failed_poll_keeps_the_previous_map(tmp_path: Path, webhook_identity: KubeAccess) -> None:
    poller = ClassPoller(webhook_identity)
    poller._classes = {("ns", "kept"): object()}  # type: ignore[dict-item]
    (tmp_path / "ca.crt").write_text(Path(webhook_identity.ca_path).read_text())
    (tmp_path / "token").write_text("not-a-token")
    poller.access = KubeAccess(
        server=webhook_identity.server,
        token_path=str(tmp_path / "token"),
        ca_path=str(tmp_path / "ca.crt"),
    )

    assert poller.poll_once() is False
    assert ("ns", "kept") in poller.classes()


def _classes_hook(running_webhook: Any, poller: ClassPoller) -> Any:
    settings = WebhookSettings(
        installation=parse_installation({"DYNAMIC_CONFIG_WEBHOOK_CLASSES": "true"}), classes=True
    )
    return running_webhook(settings, classes=poller.classes)


def _cluster_class(custom: Any, cluster: Any, name: str, spec: dict[str, Any]) -> None:
    custom.create_cluster_custom_object(
        GROUP, VERSION, "clusterdynamicconfigclasses",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterDynamicConfigClass",
         "metadata": {"name": name}, "spec": spec},
    )  # fmt: skip
    cluster.on_teardown(
        lambda: custom.delete_cluster_custom_object(
            GROUP, VERSION, "clusterdynamicconfigclasses", name
        )
    )


@pytest.mark.usefixtures("class_crds")
def test_cluster_class_credential_in_another_namespace_is_refused(
    cluster: Any, running_webhook: Any, poller: ClassPoller, kube_client: Any
) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    custom = client.CustomObjectsApi(kube_client)
    hook = _classes_hook(running_webhook, poller)
    label = uuid.uuid4().hex[:8]
    tenant, platform = cluster.namespace(label), cluster.namespace(label)
    cluster.register(hook, label)
    name = f"platform-{label}"
    _cluster_class(custom, cluster, name, {
        "source": "consul", "endpoint": "http://consul.infra.svc:8500",
        "tokenSecret": {"name": "consul-agent-token", "namespace": platform, "key": "token"},
    })  # fmt: skip
    _await_map(poller, lambda m: (None, name) in m)

    with pytest.raises(ApiException) as caught:
        cluster.create_pod(tenant, {**POD, "dynamic-config.rs/class": name})
    at_home = cluster.create_pod(platform, {**POD, "dynamic-config.rs/class": name})

    assert caught.value.status == 403
    status = _refusal(caught)
    assert status["reason"] == "DynamicConfigPolicy"
    assert (
        f'ClusterDynamicConfigClass "{name}" keeps its credential Secret in namespace '
        f"{platform}: it is usable by a DynamicConfigRender and not by an injected agent"
    ) in status["message"]
    agent = at_home.spec.containers[1]
    assert [(e.name, e.value_from.secret_key_ref.name) for e in agent.env] == [
        ("DYNAMIC_CONFIG_AGENT_TOKEN", "consul-agent-token")
    ]


@pytest.mark.usefixtures("class_crds")
def test_the_pods_own_annotations_win_over_its_class(
    cluster: Any, running_webhook: Any, poller: ClassPoller, kube_client: Any
) -> None:
    from kubernetes import client

    custom = client.CustomObjectsApi(kube_client)
    hook = _classes_hook(running_webhook, poller)
    label = uuid.uuid4().hex[:8]
    namespace = cluster.namespace(label)
    cluster.register(hook, label)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "dynamicconfigclasses",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DynamicConfigClass",
         "metadata": {"name": "team-consul"},
         "spec": {"source": "consul", "endpoint": "http://consul.infra.svc:8500",
                  "tokenSecret": "consul-agent-token"}},
    )  # fmt: skip
    _await_map(poller, lambda m: (namespace, "team-consul") in m)

    pod = cluster.create_pod(
        namespace,
        {
            **POD,
            "dynamic-config.rs/class": "team-consul",
            "dynamic-config.rs/endpoint": "http://consul.team.svc:8500",
            "dynamic-config.rs/token-secret": "team-token/acl",
        },
    )

    agent = pod.spec.containers[1]
    assert agent.args[:4] == ["--source", "consul", "--endpoint", "http://consul.team.svc:8500"]
    assert [
        (e.name, e.value_from.secret_key_ref.name, e.value_from.secret_key_ref.key)
        for e in agent.env
    ] == [("DYNAMIC_CONFIG_AGENT_TOKEN", "team-token", "acl")]


@pytest.mark.usefixtures("class_crds")
def test_the_namespaces_own_class_comes_before_a_cluster_class_of_that_name(
    cluster: Any, running_webhook: Any, poller: ClassPoller, kube_client: Any
) -> None:
    """The contract looks up ``(namespace, name)`` first and the cluster scope only after.

    The cluster class admits only ``elsewhere``, so a pod in ``own`` is admitted at all only
    because its namespace's class answered first.
    """
    from kubernetes import client

    custom = client.CustomObjectsApi(kube_client)
    hook = _classes_hook(running_webhook, poller)
    label = uuid.uuid4().hex[:8]
    own, elsewhere = cluster.namespace(label), cluster.namespace(label)
    cluster.register(hook, label)
    name = f"shared-{label}"
    _cluster_class(custom, cluster, name, {
        "source": "consul", "endpoint": "http://consul.platform.svc:8500",
        "namespaces": [elsewhere],
    })  # fmt: skip
    custom.create_namespaced_custom_object(
        GROUP, VERSION, own, "dynamicconfigclasses",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DynamicConfigClass",
         "metadata": {"name": name},
         "spec": {"source": "vault", "endpoint": "https://vault.team.svc:8200",
                  "tokenSecret": "vault-token"}},
    )  # fmt: skip
    _await_map(poller, lambda m: (None, name) in m and (own, name) in m)

    in_own = cluster.create_pod(own, {**POD, "dynamic-config.rs/class": name})
    in_elsewhere = cluster.create_pod(elsewhere, {**POD, "dynamic-config.rs/class": name})

    assert in_own.spec.containers[1].args[:4] == [
        "--source", "vault", "--endpoint", "https://vault.team.svc:8200",
    ]  # fmt: skip
    assert in_elsewhere.spec.containers[1].args[:4] == [
        "--source", "consul", "--endpoint", "http://consul.platform.svc:8500",
    ]  # fmt: skip
