"""Leg 4 of the end-to-end ladder (issue 15): the operator as the chart's Deployment, on a kubelet.

The CRDs are the chart's ``crds/``; the operator's ServiceAccount, ClusterRole, binding and
Deployment are the chart's (``helm template`` with ``operator.enabled=true``, the objects
labelled ``operator``; see ``opnode_support``), running the operator image built here with its
in-cluster identity (the ``kubernetes`` Service and a projected token). Renders read Consul
(the test server, through ``kube_node.expose``); what they write is consumed by running pods the
way applications consume it: a mounted ConfigMap, ``envFrom`` a Secret, a Secret volume.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from dynconf_k8s.operator.types import (
    CLASS_KIND,
    CLUSTER_CLASS_KIND,
    GROUP,
    PLURALS,
    RENDER_KIND,
    VERSION,
)
from tests.e2e.opnode_support import (
    applied,
    chart_crds,
    exec_in,
    memory_note,
    new_namespace,
    pod_trouble,
    render_component,
    wait_for,
    wait_pod_ready,
    working_set_mib,
)
from tests.fixtures.kube import REPO
from tests.fixtures.node import KubeNode, ProjectImage
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e


def _operator_support() -> Any:
    """The operator tests' ``Kube`` helpers (their conftest is not importable by name)."""
    path = REPO / "packages" / "dynconf-k8s" / "tests" / "operator" / "conftest.py"
    spec = importlib.util.spec_from_file_location("dynconf_e2e_operator_support", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class OperatorOnNode:
    """The running operator, a namespace for Renders and pods, and Consul."""

    def __init__(self, kube: Any, core: Any, system: str, apps: str, consul: Any, endpoint: str):
        self.kube, self.core, self.system, self.apps = kube, core, system, apps
        self.consul, self.endpoint = consul, endpoint

    def put(self, key: str, document: dict[str, Any]) -> None:
        self.consul.client.kv.put(key, json.dumps(document))

    def consul_class(self, namespace: str, name: str = "consul") -> None:
        spec = {"source": "consul", "endpoint": f"http://{self.endpoint}"}
        self.kube.create(CLASS_KIND, namespace, name, spec)

    def render(
        self, namespace: str, name: str, key: str, target: dict[str, Any], **more: Any
    ) -> None:
        spec = {"class": "consul", "key": key, "intervalSeconds": 1, "target": target, **more}
        self.kube.create(RENDER_KIND, namespace, name, spec)

    def delete_render(self, namespace: str, name: str) -> None:
        self.kube.custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[RENDER_KIND], name
        )

    def run_pod(self, name: str, spec: dict[str, Any]) -> None:
        body = {
            "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 1, **spec},
        }
        self.core.create_namespaced_pod(self.apps, body)
        wait_pod_ready(self.core, self.apps, name)

    def read(self, pod: str, path: str) -> str:
        return exec_in(self.core, self.apps, pod, "app", "cat", path)


def _app(command: str, **more: Any) -> dict[str, Any]:
    return {
        "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
        "command": ["sh", "-c", command], **more,
    }  # fmt: skip


def _secret_data(item: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (item.get("data") or {}).items()}


@pytest.fixture(scope="module")
def operator(
    kube_node: KubeNode,
    kube_node_client: object,
    node_image: ProjectImage,
    helm_bin: Path,
    consul_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorOnNode]:
    """The chart's CRDs and operator objects applied, the operator Ready; the leg's handle."""
    node_image("operator")
    core = client.CoreV1Api(kube_node_client)
    system = new_namespace(core, "dc-op")
    apps = new_namespace(core)
    objects = render_component(
        helm_bin, tmp_path_factory.mktemp("chart"), system, "operator", "operator.enabled=true"
    )
    kinds = {o["kind"] for o in objects}
    assert kinds == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"}, kinds
    began = time.monotonic()
    with operator_running(kube_node, kube_node_client, consul_server, system, apps, objects) as (
        handle,
        pod,
    ):
        print(f"\ne2e operator: Deployment pod Ready {time.monotonic() - began:.1f} s after apply")
        try:
            yield handle
        finally:
            memory = working_set_mib(core, kube_node.name, system, pod)
            print(f"\ne2e operator: {memory_note(memory, 128)}")
            statuses = core.read_namespaced_pod(pod, system).status.container_statuses or []
            restarts = [s.restart_count for s in statuses]
            core.delete_namespace(apps)
            assert restarts == [0], pod_trouble(core, system, pod)
    core.delete_namespace(system)


@contextmanager
def operator_running(
    kube_node: KubeNode,
    kube_node_client: object,
    consul_server: Any,
    system: str,
    apps: str,
    objects: list[dict[str, Any]],
) -> Iterator[tuple[OperatorOnNode, str]]:
    """The chart's CRDs and the operator's ``objects`` applied in ``system``, its pod Ready.

    Yields the leg's handle (a Consul class in ``apps``) and the operator pod's name; every
    object applied is deleted on the way out.
    """
    core = client.CoreV1Api(kube_node_client)
    ext = client.ApiextensionsV1Api(kube_node_client)
    crds = chart_crds()
    with applied(kube_node_client, crds, system), kube_node.expose(consul_server.port) as ep:
        for crd in crds:
            name = crd["metadata"]["name"]
            wait_for(
                lambda name=name: any(
                    c.type == "Established" and c.status == "True"
                    for c in ext.read_custom_resource_definition(name).status.conditions or []
                ),
                30,
                f"CRD {name} Established",
            )
        with applied(kube_node_client, objects, system):
            selector = "app.kubernetes.io/component=operator"

            def listed() -> str | None:
                pods = core.list_namespaced_pod(system, label_selector=selector).items
                return pods[0].metadata.name if pods else None

            pod = wait_for(listed, 60, "the operator's pod")
            wait_pod_ready(core, system, pod)
            handle = OperatorOnNode(_operator_support().Kube(kube_node_client), core, system,
                                    apps, consul_server, ep)  # fmt: skip
            handle.consul_class(apps)
            yield handle, pod


def test_a_render_into_a_mounted_configmap_reaches_the_pod_and_so_does_a_change(
    operator: OperatorOnNode,
) -> None:
    key = f"e2e-op/{uuid.uuid4().hex[:8]}/app.json"
    operator.put(key, {"generation": 1})
    operator.render(operator.apps, "app", key, {"configMap": "app-config", "file": "app.json"})
    operator.kube.await_configmap(operator.apps, "app-config", lambda c: bool(c.get("data")))
    operator.run_pod("mounts", {
        "containers": [_app("cat /config/app.json && exec sleep 3600",
                            volumeMounts=[{"name": "config", "mountPath": "/config"}])],
        "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
    })  # fmt: skip
    assert json.loads(operator.read("mounts", "/config/app.json")) == {"generation": 1}

    began = time.monotonic()
    operator.put(key, {"generation": 2})
    operator.kube.await_configmap(
        operator.apps, "app-config", lambda c: '"generation": 2' in c["data"]["app.json"]
    )
    in_configmap = time.monotonic() - began
    wait_for(
        lambda: json.loads(operator.read("mounts", "/config/app.json")) == {"generation": 2},
        120,
        "the mounted file to follow the ConfigMap",
    )
    in_pod = time.monotonic() - began

    print(
        f"\ne2e operator: Consul put -> ConfigMap {in_configmap:.1f} s, "
        f"-> the pod's mounted file {in_pod:.1f} s (kubelet syncFrequency 10s)"
    )


def test_secret_targets_feed_envfrom_and_an_entries_volume(operator: OperatorOnNode) -> None:
    key = f"e2e-op/{uuid.uuid4().hex[:8]}/db.json"
    operator.put(key, {"db": {"pool_size": 5, "host": "db.internal"},
                       "postgres-password": "s3cret"})  # fmt: skip
    operator.render(operator.apps, "env", key, {"secret": "app-env", "shape": "envEntries"})
    operator.render(operator.apps, "entries", key, {"secret": "app-entries", "shape": "entries"})
    for name in ("app-env", "app-entries"):
        operator.kube.await_secret(operator.apps, name, lambda s: bool(s.get("data")))
    operator.run_pod("secrets", {
        "containers": [_app(
            "exec sleep 3600",
            envFrom=[{"secretRef": {"name": "app-env"}}],
            volumeMounts=[{"name": "entries", "mountPath": "/secrets", "readOnly": True}],
        )],
        "volumes": [{"name": "entries", "secret": {"secretName": "app-entries"}}],
    })  # fmt: skip

    environ = exec_in(operator.core, operator.apps, "secrets", "app", "cat", "/proc/1/environ")
    env = dict(e.split("=", 1) for e in environ.split("\0") if "=" in e)
    password = operator.read("secrets", "/secrets/postgres-password")
    host = operator.read("secrets", "/secrets/db.host")

    assert env["DB_POOL_SIZE"] == "5"
    assert env["DB_HOST"] == "db.internal"
    assert env["POSTGRES_PASSWORD"] == "s3cret"
    assert password == "s3cret"
    assert host == "db.internal"


def test_a_cluster_class_refuses_a_namespace_outside_its_allowlist(
    operator: OperatorOnNode,
) -> None:
    other = new_namespace(operator.core)
    name = f"platform-{uuid.uuid4().hex[:8]}"
    key = f"e2e-op/{uuid.uuid4().hex[:8]}/app.json"
    operator.put(key, {"port": 9000})
    operator.kube.create(CLUSTER_CLASS_KIND, None, name, {
        "source": "consul", "endpoint": f"http://{operator.endpoint}",
        "namespaces": [operator.apps],
    })  # fmt: skip
    try:
        spec = {"class": name, "classKind": CLUSTER_CLASS_KIND}
        target = {"configMap": "platform", "file": "app.json"}
        operator.render(operator.apps, "platform", key, target, **spec)
        operator.render(other, "platform", key, target, **spec)
        operator.kube.await_configmap(operator.apps, "platform", lambda c: bool(c.get("data")))
        refused = operator.kube.await_render(
            other, "platform", operator.kube.ready("ClassNotAllowed", "False")
        )
        event = operator.kube.await_event(other, "platform", "RenderFailed")
        with pytest.raises(client.ApiException) as missing:
            operator.core.read_namespaced_config_map("platform", other)
    finally:
        operator.kube.custom.delete_cluster_custom_object(
            GROUP, VERSION, PLURALS[CLUSTER_CLASS_KIND], name
        )
        operator.core.delete_namespace(other)

    assert "does not allow namespace" in refused["status"]["lastError"]
    assert event["type"] == "Warning"
    assert missing.value.status == 404


def test_deleting_a_render_garbage_collects_its_configmap_and_secret(
    operator: OperatorOnNode,
) -> None:
    key = f"e2e-op/{uuid.uuid4().hex[:8]}/app.json"
    operator.put(key, {"port": 9000})
    operator.render(operator.apps, "gc-map", key, {"configMap": "gc-map", "file": "app.json"})
    operator.render(operator.apps, "gc-secret", key, {"secret": "gc-secret", "shape": "entries"})
    operator.kube.await_configmap(operator.apps, "gc-map", lambda c: bool(c.get("data")))
    secret = operator.kube.await_secret(operator.apps, "gc-secret", lambda s: bool(s.get("data")))
    assert _secret_data(secret) == {"port": "9000"}

    began = time.monotonic()
    operator.delete_render(operator.apps, "gc-map")
    operator.delete_render(operator.apps, "gc-secret")
    operator.kube.await_gone("ConfigMap", operator.apps, "gc-map")
    operator.kube.await_gone("Secret", operator.apps, "gc-secret")

    print(
        f"\ne2e operator: targets garbage-collected {time.monotonic() - began:.1f} s after delete"
    )
