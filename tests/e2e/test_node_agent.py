"""Leg 5 of the end-to-end ladder (issue 15): the node agent as the chart's DaemonSet, on a kubelet.

The DaemonSet, its ServiceAccount and the CSIDriver are the chart's (``helm template`` with
``nodeAgent.enabled=true``, the objects labelled ``node-agent``; see ``opnode_support``), with the
node agent image built here and ``nodeAgent.registration: builtin`` (``NODE_REGISTRATION``: the
node cannot pull upstream's registrar, the chart's default), so the node agent registers itself
with the kubelet and the first assertion is the kubelet's own record of the driver in
``CSINode``. Pods mount inline CSI volumes reading Consul (the test server, through
``kube_node.expose``); the node agent's gauges are scraped through the apiserver's pod proxy.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from dynconf_k8s.node.metrics import DOCUMENTS, READERS
from dynconf_k8s.node.service import DRIVER_NAME
from tests.e2e.opnode_support import (
    applied,
    exec_in,
    memory_note,
    new_namespace,
    pod_metrics,
    pod_trouble,
    render_component,
    wait_for,
    wait_pod_gone,
    wait_pod_ready,
    working_set_mib,
)
from tests.fixtures.node import KubeNode, ProjectImage
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e

METRICS_PORT = 9111
FIRST = "/tmp/first-read"
"""What the app's first command copied from the volume: proof the file was there at start."""


class NodeAgentOnNode:
    """The running DaemonSet pod and a namespace for application pods reading Consul."""

    def __init__(self, core: Any, system: str, apps: str, pod: str, consul: Any, endpoint: str):
        self.core, self.system, self.apps, self.pod = core, system, apps, pod
        self.consul, self.endpoint = consul, endpoint

    def gauges(self) -> tuple[float, float]:
        values = pod_metrics(self.core, self.system, self.pod, METRICS_PORT, "dynamic_config_")
        return values[DOCUMENTS], values[READERS]

    def put(self, key: str, document: dict[str, Any]) -> None:
        self.consul.client.kv.put(key, json.dumps(document))

    def run_reader(self, name: str, key: str) -> float:
        """A pod whose app first copies the rendered file, then idles; seconds to Ready."""
        body = {
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                    # no retry: a missing file at start exits 3 and shows as a restart
                    "command": ["sh", "-c", f"cp /config/app.json {FIRST} || exit 3; "
                                            "exec sleep 3600"],
                    "readinessProbe": {"exec": {"command": ["test", "-s", FIRST]},
                                       "periodSeconds": 1},
                    "volumeMounts": [{"name": "config", "mountPath": "/config",
                                      "readOnly": True}],
                }],
                "volumes": [{"name": "config", "csi": {
                    "driver": DRIVER_NAME, "readOnly": True,
                    "volumeAttributes": {
                        "source": "consul", "endpoint": f"http://{self.endpoint}",
                        "key": key, "path": "app.json",
                    },
                }}],
            },
        }  # fmt: skip
        began = time.monotonic()
        self.core.create_namespaced_pod(self.apps, body)
        wait_pod_ready(self.core, self.apps, name)
        return time.monotonic() - began

    def read(self, pod: str) -> dict[str, Any]:
        text = exec_in(self.core, self.apps, pod, "app", "cat", "/config/app.json")
        return json.loads(text)  # type: ignore[no-any-return]

    def wait_value(self, pod: str, want: dict[str, Any], timeout: float = 30) -> float:
        """Seconds until the pod's file holds ``want``."""
        began = time.monotonic()
        wait_for(lambda: self.read(pod) == want, timeout, f"{pod} to read {want}")
        return time.monotonic() - began

    def delete(self, *pods: str) -> None:
        for pod in pods:
            self.core.delete_namespaced_pod(pod, self.apps, grace_period_seconds=1)
        for pod in pods:
            wait_pod_gone(self.core, self.apps, pod)

    def wait_gauges(self, want: tuple[float, float], timeout: float = 30) -> None:
        wait_for(lambda: self.gauges() == want, timeout, f"documents, readers == {want}")


@pytest.fixture(scope="module")
def node_agent(
    kube_node: KubeNode,
    kube_node_client: object,
    node_image: ProjectImage,
    helm_bin: Path,
    consul_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[NodeAgentOnNode]:
    """The chart's node-agent objects applied, its pod Ready; yields the leg's handle."""
    node_image("node-agent")
    core = client.CoreV1Api(kube_node_client)
    system = new_namespace(core, "dc-node")
    apps = new_namespace(core)
    objects = render_component(
        helm_bin, tmp_path_factory.mktemp("chart"), system, "node-agent", "nodeAgent.enabled=true"
    )
    assert {o["kind"] for o in objects} == {"CSIDriver", "ServiceAccount", "DaemonSet"}
    began = time.monotonic()
    with applied(kube_node_client, objects, system), kube_node.expose(consul_server.port) as ep:
        selector = "app.kubernetes.io/component=node-agent"

        def running() -> str | None:
            pods = core.list_namespaced_pod(system, label_selector=selector).items
            return pods[0].metadata.name if pods else None

        pod = wait_for(running, 60, "the DaemonSet's pod")
        wait_pod_ready(core, system, pod)
        print(f"\ne2e node agent: DaemonSet pod Ready {time.monotonic() - began:.1f} s after apply")
        handle = NodeAgentOnNode(core, system, apps, pod, consul_server, ep)
        try:
            yield handle
        finally:
            pod = handle.pod  # the restart test replaces it
            memory = working_set_mib(core, kube_node.name, system, pod)
            print(f"\ne2e node agent: {memory_note(memory, 256)}")
            core.delete_namespace(apps)
            status = core.read_namespaced_pod(pod, system).status.container_statuses or []
            assert [s.restart_count for s in status] == [0], pod_trouble(core, system, pod)
    core.delete_namespace(system)


def csinode_drivers(storage: Any, node: str) -> dict[str, str]:
    """The CSINode's drivers (raw JSON: the client's model refuses the empty list it starts as)."""
    try:
        answer = storage.read_csi_node(node, _preload_content=False)
    except client.ApiException as error:
        if error.status == 404:
            return {}
        raise
    drivers = json.loads(answer.data)["spec"].get("drivers") or []
    return {d["name"]: d["nodeID"] for d in drivers}


def test_the_kubelet_records_the_driver_the_node_agent_registered_itself(
    node_agent: NodeAgentOnNode, kube_node: KubeNode, kube_node_client: object
) -> None:
    storage = client.StorageV1Api(kube_node_client)
    began = time.monotonic()

    node_id = wait_for(
        lambda: csinode_drivers(storage, kube_node.name).get(DRIVER_NAME),
        30,
        f"{DRIVER_NAME} in CSINode {kube_node.name}",
    )

    assert node_id == kube_node.name
    pod = node_agent.core.read_namespaced_pod(node_agent.pod, node_agent.system)
    assert [c.name for c in pod.spec.containers] == ["node-agent"]  # no registrar sidecar
    print(f"\ne2e node agent: driver in CSINode {time.monotonic() - began:.1f} s after pod Ready")


def test_the_first_render_exists_before_the_app_starts(node_agent: NodeAgentOnNode) -> None:
    key = f"e2e-node/{uuid.uuid4().hex[:8]}/app.json"
    node_agent.put(key, {"port": 9000, "name": "first"})

    took = node_agent.run_reader("first", key)
    try:
        first = exec_in(node_agent.core, node_agent.apps, "first", "app", "cat", FIRST)
        pod = node_agent.core.read_namespaced_pod("first", node_agent.apps)
        restarts = [s.restart_count for s in pod.status.container_statuses]
    finally:
        node_agent.delete("first")

    assert json.loads(first) == {"port": 9000, "name": "first"}
    assert restarts == [0]
    print(f"\ne2e node agent: CSI pod Ready {took:.1f} s after create")


def test_two_pods_of_one_document_share_one_watch_and_both_see_a_change(
    node_agent: NodeAgentOnNode,
) -> None:
    key = f"e2e-node/{uuid.uuid4().hex[:8]}/app.json"
    node_agent.put(key, {"generation": 1})
    node_agent.run_reader("reader-a", key)
    node_agent.run_reader("reader-b", key)
    try:
        shared = node_agent.gauges()
        began = time.monotonic()
        node_agent.put(key, {"generation": 2})
        node_agent.wait_value("reader-a", {"generation": 2})
        node_agent.wait_value("reader-b", {"generation": 2})
        both = time.monotonic() - began
    finally:
        node_agent.delete("reader-a", "reader-b")

    assert shared == (1, 2)
    node_agent.wait_gauges((0, 0))
    print(f"\ne2e node agent: a Consul put reached both pods' files in {both:.2f} s")


def test_deleting_one_reader_leaves_the_other_updating(node_agent: NodeAgentOnNode) -> None:
    key = f"e2e-node/{uuid.uuid4().hex[:8]}/app.json"
    node_agent.put(key, {"generation": 1})
    node_agent.run_reader("stays", key)
    node_agent.run_reader("leaves", key)
    try:
        node_agent.delete("leaves")
        node_agent.wait_gauges((1, 1))
        node_agent.put(key, {"generation": 2})
        took = node_agent.wait_value("stays", {"generation": 2})
    finally:
        node_agent.delete("stays")

    node_agent.wait_gauges((0, 0))
    print(f"\ne2e node agent: the remaining reader followed a put in {took:.2f} s")


def test_a_restarted_node_agent_registers_again_and_its_volumes_keep_updating(
    node_agent: NodeAgentOnNode, kube_node: KubeNode, kube_node_client: object
) -> None:
    """The DaemonSet replaces the pod; the new process claims the recorded volume again."""
    storage = client.StorageV1Api(kube_node_client)
    key = f"e2e-node/{uuid.uuid4().hex[:8]}/app.json"
    node_agent.put(key, {"generation": 1})
    node_agent.run_reader("survives", key)
    try:
        old = node_agent.pod
        began = time.monotonic()
        node_agent.core.delete_namespaced_pod(old, node_agent.system, grace_period_seconds=5)
        wait_pod_gone(node_agent.core, node_agent.system, old)

        def replacement() -> str | None:
            pods = node_agent.core.list_namespaced_pod(
                node_agent.system, label_selector="app.kubernetes.io/component=node-agent"
            ).items
            fresh = [p.metadata.name for p in pods if p.metadata.name != old]
            return fresh[0] if fresh else None

        node_agent.pod = wait_for(replacement, 60, "the DaemonSet's replacement pod")
        wait_pod_ready(node_agent.core, node_agent.system, node_agent.pod)
        wait_for(
            lambda: csinode_drivers(storage, kube_node.name).get(DRIVER_NAME),
            30,
            f"{DRIVER_NAME} back in CSINode",
        )
        back = time.monotonic() - began
        node_agent.wait_gauges((1, 1))
        node_agent.put(key, {"generation": 2})
        took = node_agent.wait_value("survives", {"generation": 2})
    finally:
        node_agent.delete("survives")

    node_agent.wait_gauges((0, 0))
    print(
        f"\ne2e node agent: replaced and registered again in {back:.1f} s; the restored "
        f"volume followed a put in {took:.2f} s"
    )
